"""Whether Spark's own Parquet reader and writer can reach a table, and how to name its files
for Spark.

A local path or ``file://`` URI is always reachable. ``s3://bucket/prefix`` is reached as
``s3a://bucket/prefix`` through Hadoop's s3a connector, with the table's storage options
passed as the matching ``fs.s3a.*`` settings; whether the connector is on Spark's classpath is
found out by asking Spark to resolve a path there (no data is read). Anything else (``gs://``,
``az://``, an in-memory store) is not reachable, and callers fall back to the Python data
source, saying so once per location kind in the log."""

from __future__ import annotations

import logging
import os
import re
from typing import Any
from urllib.parse import urlparse

from .options import TableLocation

log = logging.getLogger("manifest_table.spark")

_S3A_SETTINGS = {
    "endpoint_url": "fs.s3a.endpoint",
    "region": "fs.s3a.endpoint.region",
    "access_key_id": "fs.s3a.access.key",
    "secret_access_key": "fs.s3a.secret.key",
    "session_token": "fs.s3a.session.token",
}
"""Our S3 storage options -> the s3a settings that mean the same (docs/spark.md)."""

_NOT_WIRED = {
    "gs": "Google's Cloud Storage connector for Hadoop (com.google.cloud.bigdataoss:gcs-connector)",
    "az": "Hadoop's Azure connector (org.apache.hadoop:hadoop-azure, for abfss:// paths)",
}
"""Stores Spark reaches only through the Python data source (which reads and writes them
with the providers' Python clients, like every other operation here)."""

_reported: set[str] = set()
_GLOB = re.compile(r"[*?\[\]{}\\]")


def hadoop_root(location: TableLocation) -> str:
    """The table root as Spark takes a path: ``file:/abs/path`` (not percent-encoded: Hadoop
    encodes a path itself) or ``s3a://bucket/prefix``."""
    uri = location.objects_uri
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        return f"s3a://{parsed.netloc}{parsed.path}".rstrip("/")
    path = parsed.path if parsed.scheme == "file" else uri
    return "file:" + os.path.abspath(path)


def hadoop_path(location: TableLocation, key: str) -> str:
    """The path Spark takes for one object of the table (``key`` is a relative key such as
    ``data/<hex>.parquet``)."""
    return f"{hadoop_root(location)}/{key}"


def hadoop_options(location: TableLocation) -> dict[str, str]:
    """Reader and writer options that carry the table's storage options to Hadoop's s3a."""
    options = dict(location.storage_options or {})
    settings = {_S3A_SETTINGS[k]: v for k, v in options.items() if k in _S3A_SETTINGS}
    if "fs.s3a.endpoint" in settings:  # a custom endpoint (MinIO, moto) wants path-style URLs
        settings["fs.s3a.path.style.access"] = "true"
    return settings


def native_reachable(spark: Any, location: TableLocation) -> bool:
    """True when Spark's file sources can open the table's location."""
    if _GLOB.search(location.uri):
        report_fallback(location, "glob", "the table's path has glob characters, which Spark would expand")
        return False
    scheme = urlparse(location.uri).scheme
    if scheme in _NOT_WIRED:
        report_fallback(
            location,
            scheme,
            f"Spark's own Parquet path is not wired for {scheme}:// tables "
            f"(it would need {_NOT_WIRED[scheme]} on Spark's classpath, and this library to pass "
            "it the table's storage options)",
        )
        return False
    if scheme not in ("s3", "s3a"):
        return len(scheme) <= 1 or scheme == "file"  # a path, a Windows drive or file://
    try:
        # Resolving a file source relation checks that the path exists, which needs a
        # FileSystem for the scheme; the pointer always exists. No data is read.
        probe = (
            spark.read.options(**hadoop_options(location))
            .format("text")
            .load(hadoop_path(location, "_latest_manifest"))
        )
        probe.schema  # noqa: B018 - over Spark Connect, analysis (and the check) happens here
        return True
    except Exception as exc:
        first_line = (str(exc).splitlines() or [""])[0][:200]
        report_fallback(location, "s3a", f"Spark cannot open s3a:// paths ({first_line})")
        return False


def report_fallback(location: TableLocation, kind: str, reason: str) -> None:
    """Log, once per ``kind`` of reason, that the Python data source is used instead."""
    if kind not in _reported:
        _reported.add(kind)
        log.warning(
            "%s: %s; using the manifest_table Python data source instead of Spark's own Parquet path (docs/spark.md)",
            location.uri,
            reason,
        )

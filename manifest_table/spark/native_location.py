"""Whether Spark's own Parquet reader and writer can reach a table, and how to name its files
and pass its storage options to Spark's Hadoop connectors.

A local path or ``file://`` URI is always reachable. A cloud table is reached through the
Hadoop connector of its store, with the table's storage options passed as that connector's
settings (read and write options, which Spark hands to Hadoop): ``s3://bucket/prefix`` as
``s3a://bucket/prefix`` (hadoop-aws), ``gs://bucket/prefix`` as itself (Google's
gcs-connector, or Hadoop's own hadoop-gcp), ``az://container/prefix`` as
``abfss://container@<account>.dfs.core.windows.net/prefix`` (hadoop-azure's ABFS). Whether the
connector is on Spark's classpath is found out by asking Spark to resolve the table's pointer
object (no data is read); where it is not, and for anything else (an in-memory store),
callers fall back to the Python data source, saying so once per kind in the log."""

from __future__ import annotations

import logging
import os
import re
from typing import Any
from urllib.parse import urlparse, urlsplit

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

_CONNECTORS = {
    "s3": "Hadoop's s3a connector (org.apache.hadoop:hadoop-aws)",
    "gs": "a Cloud Storage connector for Hadoop "
    "(com.google.cloud.bigdataoss:gcs-connector, or org.apache.hadoop:hadoop-gcp)",
    "az": "Hadoop's Azure connector (org.apache.hadoop:hadoop-azure)",
}
"""What Spark needs on its classpath to reach each kind of cloud table natively."""

_reported: set[str] = set()
_GLOB = re.compile(r"[*?\[\]{}\\]")


def hadoop_root(location: TableLocation) -> str:
    """The table root as Spark takes a path: ``file:/abs/path`` (not percent-encoded: Hadoop
    encodes a path itself), ``s3a://bucket/prefix``, ``gs://bucket/prefix`` or
    ``abfs[s]://container@account.dfs.core.windows.net/prefix``."""
    uri = location.objects_uri
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        return f"s3a://{parsed.netloc}{parsed.path}".rstrip("/")
    if parsed.scheme == "gs":
        return uri.rstrip("/")
    if parsed.scheme == "az":
        return _azure(location)[0]
    path = parsed.path if parsed.scheme == "file" else uri
    return "file:" + os.path.abspath(path)


def hadoop_path(location: TableLocation, key: str) -> str:
    """The path Spark takes for one object of the table (``key`` is a relative key such as
    ``data/<hex>.parquet``)."""
    return f"{hadoop_root(location)}/{key}"


def hadoop_options(location: TableLocation) -> dict[str, str]:
    """Reader and writer options that carry the table's storage options to its Hadoop connector."""
    scheme = urlparse(location.objects_uri).scheme
    if scheme == "gs":
        return _gcs_settings(location)
    if scheme == "az":
        return _azure(location)[1]
    options = dict(location.storage_options or {})
    settings = {_S3A_SETTINGS[k]: v for k, v in options.items() if k in _S3A_SETTINGS}
    if "fs.s3a.endpoint" in settings:  # a custom endpoint (MinIO, moto) wants path-style URLs
        settings["fs.s3a.path.style.access"] = "true"
    return settings


def _gcs_settings(location: TableLocation) -> dict[str, str]:
    """The GCS connector's settings for the store's endpoint and credentials. An emulator
    (``endpoint_url`` or ``$STORAGE_EMULATOR_HOST``) is reached without credentials, renaming
    by copy and delete (Google's gcs-connector also calls GCS's move and folder APIs, which
    emulators lack); Hadoop's own hadoop-gcp has no endpoint setting and reaches Google only."""
    from ..storage.gcs import GcsStore  # google-cloud-storage: only for gs:// tables

    connection = GcsStore.from_uri(location.objects_uri, location.storage_options).connection
    settings = {"fs.gs.project.id": connection.project} if connection.project else {}
    if connection.anonymous:
        settings["fs.gs.auth.type"] = "UNAUTHENTICATED"
    elif connection.key_file:
        settings["fs.gs.auth.type"] = "SERVICE_ACCOUNT_JSON_KEYFILE"
        settings["fs.gs.auth.service.account.json.keyfile"] = connection.key_file
    if connection.endpoint:
        settings["fs.gs.storage.root.url"] = connection.endpoint + "/"
        settings["fs.gs.operation.move.enable"] = "false"
        settings["fs.gs.hierarchical.namespace.folders.enable"] = "false"
    return settings


def _azure(location: TableLocation) -> tuple[str, dict[str, str]]:
    """The ABFS path of the table root and ABFS's settings for the store's account. An
    account at Azure is named by its host; an emulator's (a host whose first path segment is
    the account, such as Azurite) through ``fs.azure.abfs.endpoint``, over the Blob API ABFS
    uses for accounts without a hierarchical namespace (Hadoop 3.5). Without an account key,
    ABFS's own authentication settings apply (OAuth, managed identity: the session's)."""
    parsed = urlparse(location.objects_uri)
    from ..storage.azure import AzureStore  # azure-storage-blob: only for az:// tables

    account = AzureStore.from_uri(location.objects_uri, location.storage_options).account
    endpoint, url = account.arrow_endpoint(), urlsplit(account.blob_url)
    secure = url.scheme == "https"
    dfs_host = f"{account.name}{endpoint['dfs_storage_authority']}"
    settings: dict[str, str] = {}
    if not endpoint["blob_storage_authority"].startswith("."):  # an emulator
        dfs_host = f"{account.name}.dfs.core.windows.net"
        settings |= {
            "fs.azure.abfs.endpoint": url.netloc,
            "fs.azure.account.hns.enabled": "false",
            "fs.azure.fns.account.service.type": "BLOB",
        }
    if not secure:
        settings |= {"fs.azure.always.use.https": "false", "fs.azure.networking.library": "JDK_HTTP_URL_CONNECTION"}
    if account.key:
        settings |= {"fs.azure.account.auth.type": "SharedKey", f"fs.azure.account.key.{dfs_host}": account.key}
    root = f"{'abfss' if secure else 'abfs'}://{parsed.netloc}@{dfs_host}{parsed.path}".rstrip("/")
    return root, settings


def native_reachable(spark: Any, location: TableLocation) -> bool:
    """True when Spark's file sources can open the table's location."""
    if _GLOB.search(location.uri):
        report_fallback(location, "glob", "the table's path has glob characters, which Spark would expand")
        return False
    scheme = urlparse(location.uri).scheme
    kind = "s3" if scheme == "s3a" else scheme
    if kind not in _CONNECTORS:
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
        reason = f"Spark cannot open {kind}:// tables ({first_line}); it needs {_CONNECTORS[kind]} on its classpath"
        report_fallback(location, kind, reason)
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

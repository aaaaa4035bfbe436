"""Readers of other versions than the suite's, installed once from PyPI into cached
directories and run in subprocesses whose ``sys.path`` starts there (the suite's own DuckDB
and PySpark are newer than the extensions and JVM jars built for them).

``installed(name, packages)`` fills ``$MT_READER_ENVS/<name>-<hash of the packages>`` (default
``~/.cache/manifest_table/``) with ``pip install --no-deps --target``, into a fresh directory
renamed into place, so concurrent runs never see half an install. Where the registry cannot
be reached, the test is skipped saying so; any other failure fails it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("MT_READER_ENVS", Path.home() / ".cache" / "manifest_table"))
DUCKDB_1_4 = [
    "duckdb==1.4.4",
    "pytz",
    *(f"duckdb-ext-{n}==1.4.4.20260205" for n in ("iceberg", "avro", "delta", "httpfs")),
]
"""DuckDB 1.4.4 and its extensions as the ``duckdb-ext-*`` packages (pytz: its Python client
needs it to return zoned timestamps)."""
DUCKDB_1_5 = [
    "duckdb==1.5.5",
    "pytz",
    *(f"duckdb-extension-{n}==1.5.5" for n in ("iceberg", "avro", "delta", "httpfs")),
]
"""DuckDB 1.5.5 and its extensions as the ``duckdb-extension-*`` packages."""
DUCKDB = {"1.4.4": DUCKDB_1_4, "1.5.5": DUCKDB_1_5}
NO_FILE_CACHE = "SET enable_external_file_cache = false"
"""Turns off DuckDB's cache of file ranges, which DuckDB 1.5.5's ``iceberg_scan`` misreads
deletion vectors through (tests/mirror_matrix.py, ``EXCUSES``)."""
PYSPARK_4_1 = ["pyspark==4.1.4", "py4j==0.10.9.9"]
"""The Spark that both reference JVM readers are built for (tests/spark_mirror_reader.py):
``delta-spark_4.1_2.13`` 4.4.0 and ``iceberg-spark-runtime-4.1_2.13`` 1.12.0. The suite's
PySpark 4.3 cannot load them (``NoSuchMethodError`` / ``IncompatibleClassChangeError``)."""
UNREACHABLE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ProxyError",
    "ConnectTimeout",
    "Name or service not known",
    "UnknownHostException",
    "Connection refused",
    "connect timed out",
    "Host repo1.maven.org not found",
)
"""What a client says when the registry cannot be reached (pip's and Ivy's words)."""


def installed(name: str, packages: list[str]) -> Path:
    digest = hashlib.sha256(" ".join(packages).encode()).hexdigest()[:8]
    target = ROOT / f"{name}-{digest}"
    if (target / ".complete").exists():
        return target
    staging = target.with_name(f"{target.name}.{uuid.uuid4().hex}")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(staging), *packages],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        unreachable(done.stderr, f"installing {packages} from PyPI")
        pytest.fail(f"installing {packages} failed: {done.stderr[-2000:]}")
    (staging / ".complete").touch()
    ROOT.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(target)
    except OSError:  # another run installed it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def unreachable(output: str, doing: str) -> None:
    """Skip the test if ``output`` says a registry could not be reached."""
    found = next((word for word in UNREACHABLE if word in output), None)
    if found is not None:
        pytest.skip(f"{doing}: the registry cannot be reached ({found})")


def run_reader(script: str, env_dir: Path, request: str, timeout: float = 600) -> str:
    """Run ``tests/<script>`` with ``env_dir`` first on its path; its stdout."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(env_dir), str(Path(__file__).parents[1])])}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script))],
        input=request,
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )
    if done.returncode != 0:
        unreachable(done.stderr, f"{script}")
        raise AssertionError(f"{script} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def read_duckdb(release: str, queries: dict[str, str], setup: list[str] | None = None) -> dict[str, object]:
    """Each query's rows (canonical, or ``"error: ..."``) read by DuckDB ``release`` and its
    extensions in one connection, in order, after the ``setup`` statements
    (tests/duckdb_mirror_reader.py)."""
    request = json.dumps({"setup": setup or [], "queries": queries})
    found = json.loads(run_reader("duckdb_mirror_reader.py", installed(f"duckdb-{release}", DUCKDB[release]), request))
    assert found.pop("duckdb") == release
    return found  # type: ignore[no-any-return]

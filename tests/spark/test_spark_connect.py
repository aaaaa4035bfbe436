"""``manifest_table.spark`` over a real Spark Connect session (no SparkContext): ``read`` (latest
and time travel) equals the Python API, ``write`` appends, ``delete``, ``compact`` and ``upsert`` commit on
the native path, and the Python API sees the result.

The Connect session runs in a subprocess, so its Spark cannot clash with the classic session the
other Spark tests share in the pytest process. The subprocess starts a local Connect server the way
``SparkSession.builder.remote("local[2]")`` does (a local Spark with ``SparkConnectPlugin``), but on
a free port instead of the fixed 15002, so parallel runs on one machine never reach each other's
server, and talks to it through a ``pyspark.sql.connect`` session only."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import manifest_table as mt

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("x", pa.float64()),
                    ("ts", pa.timestamp("us", "UTC"))])


def rows(start: int, stop: int) -> pa.Table:
    ids = range(start, stop)
    return pa.table({
        "id": list(ids),
        "name": [None if i % 7 == 0 else f"n{i}" for i in ids],
        "x": [i / 3 for i in ids],
        "ts": [dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i) for i in ids],
    }, schema=SCHEMA)


def ids_of(table: mt.Table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


EXPECTED = sorted((set(range(40)) - {i for i in range(40) if i % 10 == 7} | set(range(100, 110))) - set(range(5)))
"""The ids left after the table below, a Spark append of 100..109 and a Spark ``id < 5`` delete."""


@pytest.mark.timeout(110)
def test_read_write_delete_compact_over_spark_connect(tmp_path: Path):
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA)
    t.append(rows(0, 20))
    t.append(rows(20, 40))
    t.delete("id IN (7, 17, 27, 37)")  # version 3: two files with deletes
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE"):
        env.pop(name, None)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "tests.spark.test_spark_connect", uri], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=100)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the Spark Connect run took over 100 s; its stderr ended with:\n{_tail(exc.stderr)}")
    assert done.returncode == 0, f"the Spark Connect run failed:\n{_tail(done.stderr)}"
    assert "connect ok" in done.stdout, done.stdout
    laps = [line for line in done.stderr.splitlines() if line.startswith("mt-lap ")]
    print(f"Spark Connect run: {time.monotonic() - started:.1f} s;", ", ".join(laps))

    t = mt.open_table(uri)
    assert t.version == 7  # 4 the Spark append, 5 the delete, 6 the compaction, 7 the upsert
    assert ids_of(t, version=6) == EXPECTED
    assert t.scan(version=6).to_arrow().sort_by("id").equals(rows(0, 110).filter(pa.array(
        [i in set(EXPECTED) for i in range(110)])).sort_by("id"))
    compacted = t.manifest(6).files
    assert len(compacted) == 1  # compacted into one file, deleted rows gone
    assert compacted[0].live_rows == compacted[0].rows == len(EXPECTED)
    assert ids_of(t, version=3) == sorted(set(range(40)) - {7, 17, 27, 37})  # history kept
    assert ids_of(t) == sorted(set(EXPECTED) | set(range(110, 115)))
    assert sorted(t.scan(where="x = -1.0").to_arrow().column("id").to_pylist()) == list(range(105, 115))


def _tail(text: str | bytes | None, lines: int = 60) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_session():
    """A Spark Connect session on a local Connect server on a free port."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    token = str(uuid.uuid4())
    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token  # the server and the client read it
    port = _free_port()
    server = (SparkSession.builder.master("local[2]").appName("manifest_table-connect-test")
              .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
              .config("spark.connect.grpc.binding.address", "127.0.0.1")
              .config("spark.connect.grpc.binding.port", str(port))
              .config("spark.connect.authenticate.token", token)
              .config("spark.sql.artifact.isolation.enabled", "true")
              .config("spark.sql.artifact.isolation.alwaysApplyClassloader", "true")
              .config("spark.ui.enabled", "false")
              .config("spark.sql.shuffle.partitions", "2")
              .config("spark.default.parallelism", "2")
              .config("spark.sql.session.timeZone", "UTC")
              .getOrCreate())
    server.sparkContext.setLogLevel("ERROR")
    # What ``remote("local[2]")`` sets once its server runs: from here on ``pyspark.sql.functions``
    # and friends build Connect columns, as in any Connect client.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return ConnectSession.builder.remote(f"sc://localhost:{port}").getOrCreate()


def _lap(started: float, step: str) -> None:
    print(f"mt-lap {step} at {time.monotonic() - started:.1f} s", file=sys.stderr)


def _child(uri: str) -> None:
    """What the subprocess runs: every native operation through the Connect session."""
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from manifest_table.spark import compact, delete, live_row, read, upsert, write
    from tests.spark.fixtures import sorted_rows

    started = time.monotonic()
    spark = _connect_session()
    assert isinstance(spark, ConnectSession)
    try:
        spark.sparkContext
        raise AssertionError("a Spark Connect session has no SparkContext")
    except PySparkException:
        pass
    _lap(started, "read")
    t = mt.open_table(uri)

    assert sorted_rows(read(spark, uri)) == sorted_rows(t.scan().to_arrow())
    assert spark.catalog.functionExists(live_row.FUNCTION)  # deletes dropped by the JVM function, uploaded
    assert sorted_rows(read(spark, uri, version=2)) == sorted_rows(t.scan(version=2).to_arrow())
    assert read(spark, uri).filter("id >= 30").select("id").count() == 9

    _lap(started, "write")
    info = write(spark.createDataFrame(rows(100, 110)), uri)
    assert info is not None and info.committed and info.version == 4  # the native path commits
    assert ids_of(t) == sorted(set(range(40)) - {7, 17, 27, 37} | set(range(100, 110)))

    _lap(started, "delete")
    info = delete(spark, uri, "id < 5")
    assert info.committed and info.metrics["rows_deleted"] == 5 and info.version == 5
    assert ids_of(t) == EXPECTED

    _lap(started, "compact")
    info = compact(spark, uri, target_file_size=64 * 1024 * 1024, min_deleted_fraction=0.01)
    assert info.committed and info.parameters["engine"] == "spark", info
    assert info.version == 6 and info.metrics["files_added"] == 1, info.metrics
    assert sorted_rows(read(spark, uri)) == sorted_rows(t.to_arrow())

    _lap(started, "upsert")
    changed = rows(105, 115).set_column(2, "x", pa.array([-1.0] * 10))
    info = upsert(spark, uri, spark.createDataFrame(changed), ["id"])
    assert info.version == 7 and (info.metrics["rows_updated"], info.metrics["rows_inserted"]) == (5, 5), info
    _lap(started, "stop")
    spark.stop()
    print(f"connect ok in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    _child(sys.argv[1])

"""Spark writes (append, overwrite, create), their failure modes (schema mismatch, failing and
retried tasks, lost messages), writes racing Python-API writers, and the distributed delete."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import TaskContext
from pyspark.sql.functions import col, udf

import manifest_table as mt
from manifest_table.spark import compact, delete
from manifest_table.spark.options import SourceOptions
from manifest_table.spark.schema import spark_schema
from manifest_table.spark.writer import BatchWriter
from tests.spark.fixtures import failing_at_marker, sorted_rows

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                    ("ts", pa.timestamp("us", "UTC"))])
SMALL_FILES = {"row_group_size": "4096", "target_file_size": "1"}  # about a file per 100 rows


def frame(spark, start: int, stop: int, partitions: int = 2):
    return spark.range(start, stop, numPartitions=partitions).selectExpr(
        "id", "concat('n', id) AS name", "id / 4 AS score", "timestamp_seconds(id) AS ts")


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [i / 4 for i in ids],
                     "ts": pa.array([i * 1_000_000 for i in ids], pa.timestamp("us", "UTC"))}, schema=SCHEMA)


def ids_of(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def data_files_on_disk(uri: str) -> set[str]:
    data = Path(uri) / "data"
    return {f"data/{p.name}" for p in data.iterdir() if not p.name.startswith(".")} if data.exists() else set()


def referenced(table: mt.Table) -> set[str]:
    return {f.path for f in table.manifest().files}


def test_append_creates_a_missing_table_and_commits_once(spark, tmp_path: Path):
    uri = str(tmp_path / "t")
    df = frame(spark, 0, 500, partitions=3)
    df.write.format("manifest_table").mode("append").save(uri)
    t = mt.open_table(uri)
    assert t.schema == SCHEMA  # from the DataFrame's types
    assert [(i.version, i.operation) for i in t.history()] == [(1, "append"), (0, "create")]
    assert sorted_rows(t.to_arrow()) == sorted_rows(df)

    # Columns in another order, and an int column into the long one, append fine.
    frame(spark, 500, 600).selectExpr("ts", "name", "CAST(id AS INT) AS id", "score") \
        .write.format("manifest_table").mode("append").save(uri)
    assert t.version == 2 and ids_of(t) == list(range(600))
    assert sorted_rows(spark.read.format("manifest_table").load(uri)) == sorted_rows(t.to_arrow())


def test_overwrite_replaces_every_row_in_one_commit(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 100))
    t.delete("id < 10")
    frame(spark, 1000, 1050).write.format("manifest_table").mode("overwrite").save(t.uri)
    assert ids_of(t) == list(range(1000, 1050))
    info = t.history()[0]
    assert (info.version, info.operation, info.metrics["rows_deleted"]) == (3, "overwrite", 90)
    assert t.scan(version=2).count() == 90  # the replaced rows stay readable by time travel


@pytest.mark.parametrize("select,problem", [
    (["id", "name"], r"missing columns \['score', 'ts'\]"),
    (["id", "name", "score", "ts", "1 AS extra"], r"unknown columns \['extra'\]"),
    (["CAST(id AS STRING) AS id", "name", "score", "ts"], "column 'id' is string, the table has bigint"),
    (["id", "name", "CAST(score AS FLOAT) AS score", "CAST(ts AS DATE) AS ts"], "column 'ts' is date"),
])
def test_schema_mismatch_fails_before_any_task_runs(spark, tmp_path: Path, select, problem):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    spark.sparkContext.setJobGroup("mismatch", "a write that must not start")
    try:
        with pytest.raises(Exception, match=problem):
            frame(spark, 0, 10).selectExpr(*select).write.format("manifest_table").mode("append").save(t.uri)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("mismatch") == []
    assert t.version == 0 and data_files_on_disk(t.uri) == set()


def test_a_failing_task_commits_nothing_and_leaves_no_files(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    before = data_files_on_disk(t.uri)
    df = failing_at_marker(frame(spark, 1000, 2000, partitions=4))
    with pytest.raises(Exception, match="injected failure"):
        df.write.format("manifest_table").options(**SMALL_FILES).mode("append").save(t.uri)
    assert t.version == 1 and ids_of(t) == list(range(10))
    assert data_files_on_disk(t.uri) == before == referenced(t)


def test_a_retried_task_does_not_duplicate_rows(spark, tmp_path: Path):
    """One task's first attempt writes some files, then meets a null in the NOT NULL column
    (the UDF makes it only on attempt 0): it removes its files and fails. The retry succeeds,
    and every row is in the table once."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA.set(0, SCHEMA.field("id").with_nullable(False)))

    @udf("long")
    def null_on_first_attempt(value: int) -> int | None:
        return None if value == 1900 and TaskContext.get().attemptNumber() == 0 else value

    df = frame(spark, 0, 2000, partitions=4).withColumn("id", null_on_first_attempt(col("id")))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")  # files before the null
    try:
        df.write.format("manifest_table").options(**SMALL_FILES).mode("append").save(t.uri)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert t.version == 1 and ids_of(t) == list(range(2000))
    assert data_files_on_disk(t.uri) == referenced(t)


def test_a_table_created_meanwhile_with_another_schema_gets_nothing(spark, tmp_path: Path):
    """The target was missing when the job was planned, and someone creates it with another
    schema while the tasks run (here: a task, on its first row): the commit fails, and Spark's
    abort removes the files the tasks wrote."""
    uri = str(tmp_path / "t")

    @udf("long")
    def create_other_table_on_first_row(value: int) -> int:
        if value == 0:
            mt.create_table(uri, pa.schema([("other", pa.string())]))
        return value

    df = frame(spark, 0, 400).withColumn("id", create_other_table_on_first_row(col("id")))
    with pytest.raises(Exception, match="created concurrently with schema"):
        df.write.format("manifest_table").mode("append").save(uri)
    t = mt.open_table(uri)
    assert t.version == 0 and data_files_on_disk(uri) == set()


def test_only_files_in_received_messages_are_committed(tmp_path: Path):
    """Two attempts of one task both write; the driver got the second's message only (the
    first was a speculative loser). Aborting after a commit that landed deletes nothing."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    writer = BatchWriter(SourceOptions.parse({"path": t.uri}), spark_schema(SCHEMA), overwrite=False)
    lost = writer.write(iter(rows(0, 50).to_batches()))
    received = writer.write(iter(rows(0, 50).to_batches()))
    writer.commit([received, None])
    assert t.version == 1 and ids_of(t) == list(range(50))
    assert referenced(t) == {f.path for f in received.files}
    writer.abort([received])  # as if commit had raised with an unknown outcome
    assert ids_of(t) == list(range(50))
    assert {f.path for f in lost.files} <= data_files_on_disk(t.uri)  # GC's job, not ours


def test_spark_append_concurrent_with_python_appends_and_deletes(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 1000))
    appended: list[int] = []
    deleted: list[int] = []

    def python_appends() -> None:
        table = mt.open_table(t.uri)
        for k in range(10):
            start = 10_000 + 10 * k
            if table.append(rows(start, start + 10)).committed:
                appended.extend(range(start, start + 10))

    def python_deletes() -> None:
        table = mt.open_table(t.uri)
        for k in range(10):
            if table.delete(f"id = {k * 37}").committed:
                deleted.append(k * 37)

    threads = [threading.Thread(target=python_appends), threading.Thread(target=python_deletes)]
    for thread in threads:
        thread.start()
    frame(spark, 100_000, 120_000, partitions=4).write.format("manifest_table").mode("append").save(t.uri)
    for thread in threads:
        thread.join()
    expected = (set(range(1000)) - set(deleted)) | set(appended) | set(range(100_000, 120_000))
    assert len(deleted) == 10 and len(appended) == 100
    assert ids_of(t) == sorted(expected)


def test_distributed_delete(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    for k in range(6):
        t.append(rows(100 * k, 100 * (k + 1)))
    t.delete("id < 10")  # existing bitmaps are unioned with the new ones
    where = "name LIKE 'n1%' OR id IN (5, 500, 501)"
    matching = t.scan(where=where).count()
    info = delete(spark, t.uri, where)
    assert (info.committed, info.operation, info.metrics["rows_deleted"]) == (True, "delete", matching)
    assert t.scan(where=where).count() == 0
    assert t.scan().count() == 590 - matching
    expected = [i for i in range(10, 600) if not (str(i).startswith("1") or i in (500, 501))]
    assert ids_of(t) == expected
    nothing = delete(spark, t.uri, "id > 10000")
    assert not nothing.committed and t.version == info.version


def test_distributed_compaction_keeps_every_row_and_concurrent_delete(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    for k in range(8):
        t.append(rows(100 * k, 100 * (k + 1)))
    t.delete("id >= 300 AND id < 360")  # 60% of one file: rewritten to drop them
    deleted: list[int] = []

    def python_deletes() -> None:  # commits while the compaction runs: remapped, never lost
        table = mt.open_table(t.uri)
        for i in range(700, 800, 10):
            if table.delete(f"id = {i}").committed:
                deleted.append(i)

    thread = threading.Thread(target=python_deletes)
    thread.start()
    info = compact(spark, t.uri, target_file_size=64 * 1024 * 1024)
    thread.join()
    assert (info.committed, info.operation) == (True, "compact")
    assert info.metrics["files_removed"] == 8 and info.metrics["files_added"] == 1
    assert len(deleted) == 10
    assert ids_of(t) == [i for i in range(800) if not 300 <= i < 360 and i not in deleted]
    assert len(t.manifest().files) == 1


def test_the_pipeline_runs(spark, tmp_path: Path, capsys):
    from manifest_table import pipeline

    pipeline.run(spark, tmp_path, str(tmp_path / "events"), rows=20_000, users=200)
    steps = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert steps == ["generated", "ingested", "erased", "read", "time", "purge", "gc"]
    pipeline.run(spark, tmp_path / "one", str(tmp_path / "one" / "events"), rows=2, users=1)  # the erase takes all
    assert "no events left" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rows", "1"], "--rows must be at least 2"),
        (["--users", "0"], "--users at least 1"),
        (["--table", "{table}"], "is not a new or empty directory"),
    ],
)
def test_the_pipeline_refuses_bad_arguments_before_starting_spark(tmp_path: Path, capsys, argv, message):
    """Above all a directory that holds a table: the job ends with a forced GC of no retention."""
    from manifest_table import pipeline

    table = mt.create_table(str(tmp_path / "mine"), SCHEMA)
    table.append(rows(0, 3))
    with pytest.raises(SystemExit) as exit_:
        pipeline.main([arg.format(table=table.uri) for arg in argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert table.version == mt.open_table(table.uri).version == 1


def test_maintenance_job_under_spark_submit(tmp_path: Path):
    """gc/maintain_spark.py as a scheduler would run it: compaction on executors, then GC."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("no spark-submit next to this Python")
    for name in ("a", "b"):
        t = mt.create_table(str(tmp_path / name), SCHEMA)
        for k in range(3):
            t.append(rows(10 * k, 10 * (k + 1)))
        t.delete("id < 5")
    script = Path(__file__).resolve().parents[2] / "gc" / "maintain_spark.py"
    result = subprocess.run(
        [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(script),
         str(tmp_path), "--retain-versions", "1", "--retain-for", "0", "--grace", "0", "--force"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("compaction: version 5: 3 files -> 1") == 2
    assert "summary: 2 tables, 2 ok, 0 failed" in result.stdout
    for name in ("a", "b"):
        t = mt.open_table(str(tmp_path / name))
        assert ids_of(t) == list(range(5, 30)) and len(t.manifest().files) == 1
        assert data_files_on_disk(t.uri) == referenced(t)


def test_abort_after_a_commit_whose_pointer_lags_keeps_its_files(tmp_path: Path):
    """A commit whose manifest landed but whose pointer step failed raises to Spark, which then
    aborts: the files the landed (not yet visible) version references must stay."""
    from manifest_table.format.pointer import POINTER_KEY, encode_pointer
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    writer = BatchWriter(SourceOptions.parse({"path": t.uri}), spark_schema(SCHEMA), overwrite=False)
    received = writer.write(iter(rows(0, 50).to_batches()))
    writer.commit([received])
    _, etag = t.store.get_with_etag(POINTER_KEY)
    t.store.put_if_match(POINTER_KEY, encode_pointer(0), etag)  # as if the pointer never moved
    writer.abort([received])
    assert {f.path for f in received.files} <= data_files_on_disk(t.uri)
    t.append(rows(50, 51))  # rolls the pointer forward over the landed version
    assert ids_of(t) == list(range(51))


def test_abort_that_cannot_read_the_table_keeps_its_files(tmp_path: Path):
    """An abort that cannot tell whether the commit landed (the table unreadable: here the
    landed version's manifest damaged) leaves the job's files to GC's grace period."""
    from manifest_table.format.manifest import manifest_key
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    writer = BatchWriter(SourceOptions.parse({"path": t.uri}), spark_schema(SCHEMA), overwrite=False)
    received = writer.write(iter(rows(0, 50).to_batches()))
    writer.commit([received])
    (tmp_path / "t" / manifest_key(1)).write_bytes(b"not a manifest")
    writer.abort([received])
    assert {f.path for f in received.files} <= data_files_on_disk(t.uri)

"""A slow writer never breaks a table (docs/protocol.md, "Time"): a writer paused past the
grace period after staging gives up before its commit point on every path that stages objects,
and garbage collection measures ages on the store's clock, whatever its host's clock says.

Released 0.3.0 broke the table in the first scenario: the paused writer's commit was
acknowledged and every read of the latest version failed (``VersionExpiredError: data/...
of version 2 is gone``), since GC had deleted the file it staged."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StructField, StructType

import manifest_table as mt
from manifest_table.clock import Stamp, utc_now
from manifest_table.entry_points import create_from_rows
from manifest_table.errors import CommitFailedError, InvalidArgumentError
from manifest_table.format.entries import DataFile
from manifest_table.mirrors.source import Source
from manifest_table.mirrors.sync import sync
from manifest_table.operations.garbage_collection import collect_garbage
from manifest_table.spark.job_commit import TableCommit
from manifest_table.spark.options import TableLocation
from manifest_table.storage import MemoryStore, ObjectStore
from manifest_table.testing import skewed_clock
from tests.conftest import store_location
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
GRACE = "3s"


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [0] * len(ids)}, schema=SCHEMA)


# --- the paused writer: a real process, stopped with SIGSTOP --------------------------------
def _stage_then_stop(uri: str, options: dict[str, str] | None, staged: str, outcome: str) -> None:
    """Stage an append, stop (SIGSTOP) until the parent continues us, then commit."""
    table = mt.open_table(uri, storage_options=options)
    tx = table.transaction()
    tx.append(_rows(2))
    Path(staged).write_text(json.dumps([f.path for f in tx.staging.changes.added]))
    os.kill(os.getpid(), signal.SIGSTOP)
    try:
        result: dict[str, Any] = {"committed": tx.commit().version}
    except Exception as exc:
        result = {"error": type(exc).__name__, "message": str(exc)}
    Path(outcome).write_text(json.dumps(result))


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("kind", ["local", "seaweedfs"])
def test_a_writer_paused_past_the_grace_gives_up_and_the_table_stays_readable(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """No option is set but the table's ``gc_grace``: GC and the writer take it from the table."""
    uri, options = (str(tmp_path / "t"), None) if kind == "local" else store_location(kind, request)
    table = mt.create_table(uri, SCHEMA, storage_options=options, properties={"gc_grace": GRACE})
    table.append(_rows(1))
    staged, outcome = tmp_path / "staged.json", tmp_path / "outcome.json"
    writer = multiprocessing.get_context("spawn").Process(
        target=_stage_then_stop, args=(uri, options, str(staged), str(outcome))
    )
    writer.start()
    try:
        deadline = time.monotonic() + 120
        while not (staged.exists() and _stopped(writer.pid)):  # type: ignore[arg-type]
            assert writer.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(4)  # the writer stays stopped for longer than the grace
        report = table.gc(retain_for=GRACE)  # the table's grace
        staged_keys = json.loads(staged.read_text())
        assert set(staged_keys) <= set(report.deleted_keys)  # GC took the writer's file as an orphan
    finally:
        os.kill(writer.pid, signal.SIGCONT)  # type: ignore[arg-type]
        writer.join(60)
    result = json.loads(outcome.read_text())
    assert result["error"] == "CommitFailedError", result
    assert "gave up before its commit point" in result["message"] and "Nothing was committed" in result["message"]
    reader = mt.open_table(uri, storage_options=options)
    assert reader.version == 1 and reader.scan().to_arrow().column("id").to_pylist() == [1]
    assert reader.append(_rows(3)).version == 2 and reader.scan().count() == 2


# --- every path that stages objects ---------------------------------------------------------
class PausesAfterStaging(WrappedStore):
    """The writer pauses for ``pause`` seconds right after it stages its first object (a data
    file or a tombstone): what SIGSTOP does above, inside one process."""

    def __init__(self, inner: ObjectStore, pause: float) -> None:
        super().__init__(inner)
        self.pause, self.armed = pause, False

    def _after(self, op: str, key: str) -> None:
        if self.armed and op == "put" and key.rsplit("/", 2)[-2] in ("data", "tombstones"):
            self.armed = False
            time.sleep(self.pause)


def _staged_objects(store: ObjectStore) -> set[str]:
    return {info.key for info in store.list() if info.key.startswith(("data/", "tombstones/", "segments/"))}


def _table(store: ObjectStore) -> mt.Table:
    table = mt.create_table("mem://t", SCHEMA, store=store, properties={"gc_grace": "1s"})
    table.append(_rows(1, 2, 3))
    table.append(_rows(4, 5, 6))
    return table


OPERATIONS: dict[str, Callable[[mt.Table], Any]] = {
    "append": lambda t: t.append(_rows(7)),
    "delete": lambda t: t.delete("id = 2"),
    "overwrite": lambda t: t.overwrite(_rows(8), where="id > 4"),
    "update": lambda t: t.update(values={"v": 1}, where="id = 3"),
    "upsert": lambda t: t.upsert(_rows(3, 9), on=["id"]),
    "compact": lambda t: t.compact(),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_paused_past_its_deadline_commits_nothing_and_leaves_nothing(operation: str) -> None:
    store = PausesAfterStaging(MemoryStore(), pause=1.0)  # the deadline: 1s - a margin of 0.25s
    table = _table(store)
    before, objects = table.scan().to_arrow(), _staged_objects(store)
    store.armed = True
    with pytest.raises(CommitFailedError, match="gave up before its commit point.*staged objects were removed"):
        OPERATIONS[operation](table)
    assert table.version == 2 and table.scan().to_arrow().equals(before)
    assert _staged_objects(store) == objects
    OPERATIONS[operation](table)  # unpaused, it commits
    assert table.version == 3


def test_a_grace_shortened_by_a_concurrent_commit_shortens_the_writers_deadline(tmp_path: Path) -> None:
    """A writer stages under a gc_grace of 1h; meanwhile another sets it to 1s, and GC then
    deletes anything unreferenced older than 1s: rebasing over that version, the writer takes
    the shorter grace (a deadline of 1s less the margin) and gives up rather than commit a
    file GC may have deleted."""
    uri = str(tmp_path / "t")
    table = mt.create_table(uri, SCHEMA, properties={"gc_grace": "1h"})
    table.append(_rows(1))
    tx = table.transaction()
    tx.append(_rows(2))
    staged = tx.staging.changes.added[0].path
    mt.open_table(uri).set_properties({"gc_grace": "1s"})
    time.sleep(1.0)
    with pytest.raises(CommitFailedError, match=r"gave up before its commit point.*the gc_grace of 1s"):
        tx.commit()
    assert table.version == 2 and table.scan().to_arrow().column("id").to_pylist() == [1]
    assert not (tmp_path / "t" / staged).exists()


def test_a_database_transaction_paused_past_the_databases_grace_commits_nothing() -> None:
    store = PausesAfterStaging(MemoryStore(), pause=1.0)
    db = mt.create_database("mem://db", store=store)
    db.set_properties({"gc_grace": "1s"})
    a, b = db.create_table("a", SCHEMA), db.create_table("b", SCHEMA)
    a.append(_rows(1))
    version, objects = db.version, {i.key for i in store.list() if "/data/" in i.key or "/roots/" in i.key}
    store.armed = True
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        with db.transaction() as tx:
            tx.table("a").delete("id = 1")
            tx.table("b").append(_rows(2))
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        store.armed = True
        b.append(_rows(3))  # a single table's commit is a database commit
    assert db.version == version and a.scan().count() == 1 and b.scan().count() == 0
    assert {i.key for i in store.list() if "/data/" in i.key or "/roots/" in i.key} == objects


def test_a_database_transaction_adding_files_written_long_ago_gives_up(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    db.set_properties({"gc_grace": "1h"})
    a = db.create_table("a", SCHEMA)
    writer = a.transaction()  # files written by someone else, 50 minutes ago
    writer.append(_rows(1))
    files = writer.staging.changes.added
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        with db.transaction() as tx:
            tx.table("a").add_files(files, written_since=utc_now() - timedelta(minutes=50))
    assert db.version == 2 and not (tmp_path / "db" / f"tables/{a.table_id}" / files[0].path).exists()


def test_rows_written_before_their_table_count_toward_the_deadline(tmp_path: Path) -> None:
    """``write_table`` (and the CLI's ``append --create``) write the rows before creating the
    table; when another writer creates it meanwhile, GC of that table may delete them, so the
    commit's deadline counts from the writing, not from the transaction that adds them."""
    uri = str(tmp_path / "t")

    def slow() -> Any:  # a stream that takes longer than the deadline (1s less 0.25s)
        yield _rows(1).to_batches()[0]
        mt.create_table(uri, SCHEMA, properties={"gc_grace": "1s"})  # another writer, meanwhile
        time.sleep(1.0)
        yield _rows(2).to_batches()[0]

    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        create_from_rows(uri, SCHEMA, pa.RecordBatchReader.from_batches(SCHEMA, slow()))
    assert mt.open_table(uri).version == 0 and not any((tmp_path / "t" / "data").iterdir())


def test_a_spark_job_longer_than_the_deadline_fails_cleanly(tmp_path: Path) -> None:
    """The driver's commit of files its executors wrote (spark/job_commit.py, used by the
    native write and the data source): the deadline counts from the job's start, or from
    when the tasks began writing (a streaming batch's tasks report it)."""
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "1h"})
    frame = StructType([StructField("id", LongType()), StructField("v", LongType())])
    location = TableLocation.of(table.uri, None)

    def written() -> list[DataFile]:  # what the executors wrote: data files the table does not list yet
        staging = mt.open_table(table.uri).transaction()
        staging.append(_rows(1))
        return staging.staging.changes.added

    job = TableCommit(location, frame, overwrite=False)
    job.began = utc_now() - timedelta(minutes=50)  # the job started 50 minutes ago: past 1h less 15m
    files = written()
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        job.commit(files)
    assert table.version == 0 and not any((tmp_path / "t" / "data").iterdir())
    streaming = TableCommit(location, frame, overwrite=False)  # built at each micro-batch's commit
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        streaming.commit(written(), ("query", 0), written_since=utc_now() - timedelta(minutes=50))
    assert table.version == 0 and not any((tmp_path / "t" / "data").iterdir())
    restarted = TableCommit(location, frame, overwrite=False)  # tasks that began after the job: the earlier counts
    restarted.began = utc_now() - timedelta(minutes=50)
    with pytest.raises(CommitFailedError, match="gave up before its commit point"):
        restarted.commit(written(), ("query", 0), written_since=utc_now() - timedelta(minutes=10))
    assert table.version == 0 and not any((tmp_path / "t" / "data").iterdir())
    assert streaming.commit(written(), ("query", 0), written_since=utc_now() - timedelta(minutes=40)).version == 1


def test_a_mirror_writer_past_its_deadline_writes_no_commit_point(tmp_path: Path) -> None:
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "1h"}, mirrors=["delta"])
    table.append(_rows(1))
    src = Source.of(table.log)
    object.__setattr__(src, "started", Stamp.at(datetime.now(UTC) - timedelta(minutes=50)))
    with pytest.raises(CommitFailedError, match="the mirror's _delta_log/00000000000000000002.json"):
        src.commit_point("_delta_log/00000000000000000002.json", b"{}", table.manifest().gc_grace)
    assert not (tmp_path / "t" / "_delta_log" / "00000000000000000002.json").exists()
    assert sync(table.log, table.manifest()) == {"delta": 1}  # a fresh sync has its own deadline


# --- clock skew between GC and writers -----------------------------------------------------
@pytest.mark.parametrize("skew", [+600, -600])
def test_gc_on_a_skewed_host_deletes_only_what_the_stores_clock_says_is_old(skew: int, tmp_path: Path) -> None:
    """A GC host 10 minutes ahead must not delete what a writer staged a moment ago; one 10
    minutes behind must still delete what is past the grace. Ages are the store's (here the
    file system's clock); the writers' clocks are skewed the other way."""
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "5m"})
    with skewed_clock(-skew):
        table.append(_rows(1))
        tx = table.transaction()
        tx.append(_rows(2))  # staged, not committed
    staged = tx.staging.changes.added[0].path
    orphan = tmp_path / "t" / "data" / f"{'0' * 32}.parquet"
    orphan.write_bytes(b"left by a writer that died 6 minutes ago")
    six_minutes_ago = time.time() - 360
    os.utime(orphan, (six_minutes_ago, six_minutes_ago))
    with skewed_clock(skew):
        report = table.gc(retain_for="5m")
    assert report.deleted_keys == [f"data/{'0' * 32}.parquet"] and report.in_grace["data files"].count == 1
    with skewed_clock(-skew):
        assert tx.commit().version == 2
    assert (tmp_path / "t" / staged).exists() and table.scan().count() == 2


def test_gc_measures_ages_on_the_store_not_on_its_host(tmp_path: Path) -> None:
    """The clock GC runs on is the store's: ``now=`` is the store's time, not the host's."""
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "5m"})
    tx = table.transaction()
    tx.append(_rows(1))
    with skewed_clock(3600):
        assert collect_garbage(table, retain_for="5m").in_grace["data files"].count == 1
    later = datetime.now(UTC) + timedelta(minutes=6)
    assert collect_garbage(table, retain_for="5m", now=later).deleted["data files"].count == 1


def test_a_shorter_grace_than_the_tables_needs_force(tmp_path: Path) -> None:
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "2h"})
    with pytest.raises(InvalidArgumentError, match=r"grace \(1h\) is shorter than the gc_grace of .* \(2h\)"):
        table.gc(grace="1h")
    assert table.gc(grace="1h", force=True).grace == timedelta(hours=1)
    assert table.gc(grace="3h", retain_for="3h").grace == timedelta(hours=3)
    assert table.gc().grace == timedelta(hours=2)


@pytest.mark.parametrize("when", ["yesterday", datetime(2026, 1, 1), 1700000000])
def test_written_since_must_be_an_aware_datetime(when: Any) -> None:
    table = mt.create_table("mem://t", SCHEMA, store=MemoryStore())
    writer = table.transaction()
    writer.append(_rows(1))
    with table.transaction() as tx:
        with pytest.raises(InvalidArgumentError, match="written_since must be a timezone-aware datetime"):
            tx.add_files(writer.staging.changes.added, written_since=when)
        assert tx.staging.changes.is_empty()

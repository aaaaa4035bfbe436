"""A database's maintenance (docs/databases.md): gc over every table, the maintenance job on
a database and on ``DB_URI/TABLE``, and the command line's ``db`` commands and ``DB_URI/TABLE``
arguments."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.maintenance.job import JobOptions, find_tables, run_job
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64())])
LATER = datetime.now(UTC) + timedelta(hours=1)


def files_of(db: mt.Database, table_id: str) -> set[str]:
    root = Path(db.uri) / "tables" / table_id
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_dropped_tables_files_go_only_after_retention_and_grace(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    kept, dropped = db.create_table("kept", SCHEMA), db.create_table("dropped", SCHEMA)
    kept.append(pa.table({"id": [1]}, schema=SCHEMA))
    dropped.append(pa.table({"id": [2]}, schema=SCHEMA))
    notes = Path(db.uri) / "tables" / dropped.table_id / "notes.txt"
    notes.write_text("not ours")
    db.drop_table("dropped")
    report = db.gc(retain_versions=10, retain_for=None, grace=timedelta(0), force=True, now=LATER)
    assert not report.deleted_keys  # a retained version still holds the dropped table
    assert content_after_gc(db, "dropped", version=4) == [2]
    report = db.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True, now=LATER)
    assert files_of(db, dropped.table_id) == {"notes.txt"}  # only the writers' shapes go
    assert any(k.endswith("notes.txt") for k in report.unknown_keys)
    assert db.tables() == ["kept"] and kept.to_arrow().column("id").to_pylist() == [1]
    with pytest.raises(mt.errors.VersionExpiredError):
        db.tables(version=4)


def test_gc_keeps_what_is_younger_than_the_grace_period(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    t = db.create_table("t", SCHEMA)
    t.append(pa.table({"id": [1]}, schema=SCHEMA))
    orphan = f"data/{uuid.uuid4().hex}.parquet"  # staged by a commit still in flight
    t.store.put_if_absent(orphan, b"staged")
    soon = datetime.now(UTC) + timedelta(minutes=30)  # (30 minutes after: not within one mtime tick)
    report = db.gc(retain_versions=1, retain_for=None, grace=timedelta(hours=1), force=True, now=soon)
    assert not report.deleted_keys and report.in_grace["data files"].count == 1
    report = db.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True, now=LATER)
    assert f"tables/{t.table_id}/{orphan}" in report.deleted_keys
    assert t.to_arrow().column("id").to_pylist() == [1]


def test_database_maintenance_takes_duration_and_size_strings(tmp_path: Path) -> None:
    """As ``Table.gc`` and ``Table.compact`` do: one parser for Python and the CLI."""
    db = mt.create_database(str(tmp_path / "db"))
    t = db.create_table("t", SCHEMA)
    for i in range(3):
        t.append(pa.table({"id": [i]}, schema=SCHEMA))
    assert db.compact(target_file_size="128MiB")["t"].metrics["files_removed"] == 3
    report = db.gc(retain_versions=1, retain_for=None, grace="0s", force=True, now=LATER)
    assert report.versions_expired and t.to_arrow().column("id").to_pylist() == [0, 1, 2]
    assert db.gc(retain_for="7d", grace="1d").versions_retained


def committed(done: dict[str, mt.CommitInfo]) -> list[str]:
    return sorted(name for name, info in done.items() if info.committed)


def test_database_maintenance_defaults_are_the_tables(tmp_path: Path) -> None:
    """``Database.compact`` and ``Database.gc`` without arguments do what ``Table.compact`` and
    ``Table.gc`` do: a fifth of a file deleted is rewritten, a tenth is not; a target smaller
    than every file merges nothing; versions younger than seven days are kept."""
    db = mt.create_database(str(tmp_path / "db"))
    for name, deleted in (("fifth", "id < 2"), ("tenth", "id = 0")):
        db.create_table(name, SCHEMA).append(pa.table({"id": list(range(10))}, schema=SCHEMA))
        db.table(name).delete(deleted)
    assert committed(db.compact()) == ["fifth"]
    small = _two_tables_of_three_files(tmp_path / "small")
    assert committed(small.compact(target_file_size=1)) == []
    assert committed(small.compact(target_file_size="1MiB")) == ["a", "b"]
    versions = len(db.history())
    six_days_on = datetime.now(UTC) + timedelta(days=6)
    assert not db.gc(now=six_days_on).versions_expired and len(db.history()) == versions
    assert db.gc(now=six_days_on + timedelta(days=2)).versions_expired


def content_after_gc(db: mt.Database, name: str, version: int) -> list[int]:
    return sorted(db.snapshot(version=version).table(name).to_arrow().column("id").to_pylist())


def _two_tables_of_three_files(path: Path) -> mt.Database:
    """Tables ``a`` and ``b``, each of three one-row appends: something to compact."""
    db = mt.create_database(str(path))
    for name in ("a", "b"):
        table = db.create_table(name, SCHEMA)
        for i in range(3):
            table.append(pa.table({"id": [i]}, schema=SCHEMA))
    return db


def test_the_maintenance_job_compacts_every_table_and_collects_once(tmp_path: Path) -> None:
    db = _two_tables_of_three_files(tmp_path / "db")
    standalone = mt.create_table(str(tmp_path / "plain"), SCHEMA)
    standalone.append(pa.table({"id": [9]}, schema=SCHEMA))
    assert find_tables(str(tmp_path)) == [db.uri, standalone.uri]
    lines: list[str] = []
    assert run_job(find_tables(str(tmp_path)), JobOptions(retain_for=None, retain_versions=1, grace=timedelta(0),
                                                          force=True), show=lines.append) == 0
    assert "a: compaction: version" in lines[0] and "b: compaction: version" in lines[0]
    assert all(db.table(n).manifest().totals.files == 1 for n in ("a", "b"))
    assert db.history()[-1].version == db.version  # gc kept the latest version only
    assert find_tables(f"{db.uri}/a") == [f"{db.uri}/a"]
    assert find_tables(f"{db.uri}/nope") == []  # (not a table of the database: nothing to maintain)


def test_the_job_on_db_uri_slash_table_compacts_that_table_and_collects_the_database(tmp_path: Path) -> None:
    db = _two_tables_of_three_files(tmp_path / "db")
    lines: list[str] = []
    options = JobOptions(retain_for=None, retain_versions=1, grace=timedelta(0), force=True)
    assert run_job(find_tables(f"{db.uri}/a"), options, show=lines.append) == 0
    assert "compaction: version" in lines[0] and "summary: 1 table, 1 ok" in lines[1]
    assert [db.table(n).manifest().totals.files for n in ("a", "b")] == [1, 3]
    assert [h.version for h in db.history()] == [db.version]  # the database's gc ran
    assert content_after_gc(db, "a", db.version) == content_after_gc(db, "b", db.version) == [0, 1, 2]


def test_a_dry_run_on_a_database_changes_nothing(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    for i in range(3):
        db.create_table(f"t{i}", SCHEMA).append(pa.table({"id": [i]}, schema=SCHEMA))
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    lines: list[str] = []
    options = JobOptions(dry_run=True, retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert run_job([db.uri], options, show=lines.append) == 0
    assert "would delete" in lines[0] and "(dry run)" in lines[-1]
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


def test_a_table_dropped_while_the_job_runs_is_skipped(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    for name in ("a", "b", "c"):
        db.create_table(name, SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))

    def compact(table: mt.Table, target: int | None, fraction: float) -> mt.CommitInfo:
        if table.uri.endswith("/a"):  # another writer drops b after the job listed the tables
            mt.open_database(db.uri).drop_table("b")
        return table.compact(target, fraction)

    lines: list[str] = []
    assert run_job([db.uri], JobOptions(retain_for=None, grace=timedelta(0), force=True), compact, lines.append) == 0
    assert "a: compaction" in lines[0] and "c: compaction" in lines[0] and "b:" not in lines[0]
    assert db.tables() == ["a", "c"]


def test_the_command_line_takes_db_uri_slash_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "db")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n{"id": 2}\n')
    for argv in (["db", "create", uri], ["create", f"{uri}/t", "--schema", "id:int64"],
                 ["append", f"{uri}/t", str(rows)], ["delete", f"{uri}/t", "id = 1"],
                 ["compact", f"{uri}/t"], ["gc", f"{uri}/t", "--dry-run"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    assert main(["count", f"{uri}/t"]) == 0 and capsys.readouterr().out == "1\n"
    assert main(["db", "tables", uri]) == 0 and capsys.readouterr().out == "t\n"
    assert main(["db", "tables", uri, "--version", "0"]) == 0 and capsys.readouterr().out == ""
    assert main(["db", "history", uri, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["operation"] for h in history][-3:] == ["append", "create_table", "create_database"]
    assert history[-3]["parameters"]["tables"] == {"t": "append"}
    assert main(["db", "snapshot", uri, "--json", "--version", "2"]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    assert list(tables) == ["t"] and (tables["t"]["live_rows"], tables["t"]["data_files"]) == (2, 1)
    assert main(["db", "tables", f"{uri}/t"]) == 1
    assert "no database at" in capsys.readouterr().err
    assert main(["create", f"{uri}/t", "--schema", "id:int64"]) == 1
    assert "already exists in database" in capsys.readouterr().err


def test_gc_skips_versions_a_concurrent_gc_expired_after_it_listed_them(tmp_path: Path) -> None:
    """A GC that has listed the database's versions, then reads their tables' roots while a
    second GC expires most of them (the bank test caught it: VersionExpiredError from the
    first): the first keeps what still exists, and the table reads as before."""
    uri = str(tmp_path / "db")
    table = mt.create_database(uri).create_table("t", SCHEMA)
    for i in range(4):
        table.append(pa.table({"id": [i]}, schema=SCHEMA))

    class SecondGcAtFirstRootRead(WrappedStore):
        ran = False

        def _before(self, op: str, key: str) -> None:
            if op == "get" and "/roots/" in key and not self.ran:
                self.ran = True
                mt.open_database(uri).gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True, now=LATER)

    store = SecondGcAtFirstRootRead(mt.open_database(uri).store)
    first = mt.open_database(uri, store=store)
    first.gc(retain_versions=10, retain_for=None, grace=timedelta(0), force=True, now=LATER)
    assert store.ran
    assert mt.open_database(uri).table("t").to_arrow().column("id").to_pylist() == [0, 1, 2, 3]


@pytest.mark.parametrize("operation", ["compact", "purge"])
def test_compact_and_purge_of_a_database_skip_a_table_dropped_meanwhile(tmp_path: Path, operation: str) -> None:
    db = _two_tables_of_three_files(tmp_path / "db")
    db.create_table("c", SCHEMA).append(pa.table({"id": [7, 8]}, schema=SCHEMA))
    for name in ("a", "b", "c"):
        db.table(name).delete("id = 0 OR id = 7")

    class DropsBAtTheFirstWrite(WrappedStore):
        dropped = False

        def _before(self, op: str, key: str) -> None:
            if op == "put" and not self.dropped:  # table a's first write: another writer drops b
                self.dropped = True
                db.drop_table("b")

    hooked = mt.open_database(db.uri, store=DropsBAtTheFirstWrite(db.store))
    done = getattr(hooked, operation)()
    assert sorted(done) == ["a", "c"] and all(info.committed for info in done.values())
    assert db.tables() == ["a", "c"]
    assert content_after_gc(db, "a", db.version) == [1, 2] and content_after_gc(db, "c", db.version) == [8]

"""Databases (docs/databases.md): the API, typed errors and name validation, snapshots and
time travel across tables, the conflict matrix of database commits, and what a commit that
loses a race to other tables costs (its root is reused)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import (
    CommitConflictError,
    CorruptTableError,
    DatabaseExistsError,
    DatabaseNotFoundError,
    InvalidArgumentError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from manifest_table.storage.local import LocalStore
from manifest_table.testing import FaultPlan, FaultyStore

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int64())])


def rows(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    return [{"id": i, "qty": q} for i, q in pairs]


def content(table: mt.Table, **scan: object) -> list[tuple[int, int]]:
    return sorted((r["id"], r["qty"]) for r in table.scan(**scan).to_arrow().to_pylist())  # type: ignore[arg-type]


@pytest.fixture
def db(tmp_path: Path) -> mt.Database:
    return mt.create_database(str(tmp_path / "db"))


# --- API --------------------------------------------------------------------------------
def test_tables_are_created_written_listed_dropped_and_renamed(db: mt.Database) -> None:
    orders = db.create_table("orders", SCHEMA)
    assert isinstance(orders, mt.Table) and db.tables() == ["orders"] and db.version == 1
    orders.append(rows((1, 5), (2, 7)))
    orders.delete("id = 1")
    orders.update({"qty": "qty + 1"}, where="id = 2")
    orders.upsert(rows((2, 100), (3, 3)), on=["id"])
    assert content(orders) == [(2, 100), (3, 3)]
    assert [h.operation for h in orders.history()] == ["upsert", "update", "delete", "append", "create_table"]
    db.create_table("tmp", SCHEMA)
    db.rename_table("orders", "sales")
    db.drop_table("tmp")
    assert db.tables() == ["sales"]
    assert content(db.table("sales")) == [(2, 100), (3, 3)]
    assert content(mt.open_table(f"{db.uri}/sales")) == [(2, 100), (3, 3)]
    assert db.history()[0].parameters["dropped"] == ["tmp"]
    assert db.history()[1].parameters["renamed"] == {"orders": "sales"}
    reopened = mt.open_database(db.uri)
    assert reopened.tables() == ["sales"] and reopened.version == db.version


def test_a_dropped_name_can_be_reused_by_a_new_table(db: mt.Database) -> None:
    db.create_table("t", SCHEMA).append(rows((1, 1)))
    old = db.table("t")
    db.drop_table("t")
    new = db.create_table("t", SCHEMA)
    assert new.table_id != old.table_id and content(new) == []
    with pytest.raises(TableNotFoundError, match="dropped"):
        old.to_arrow()
    assert content(old, version=2) == [(1, 1)]


def test_a_transaction_commits_every_table_at_once_and_reads_its_own_changes(db: mt.Database) -> None:
    db.create_table("orders", SCHEMA)
    db.create_table("stock", SCHEMA).append(rows((7, 10)))
    before = db.version
    with db.transaction() as tx:
        tx.table("orders").append(rows((1, 1)))
        tx.table("stock").update({"qty": "qty - 1"}, where="id = 7")
        tx.create_table("audit", SCHEMA).append(rows((99, 1)))
        assert content_of(tx.table("stock").scan()) == [(7, 9)]
    assert db.version == before + 1
    info = db.history(limit=1)[0]
    assert info.operation == "transaction"
    assert info.parameters["tables"] == {"orders": "append", "stock": "update", "audit": "create_table"}
    assert content(db.table("stock")) == [(7, 9)] and content(db.table("audit")) == [(99, 1)]


def test_an_exception_in_a_transaction_commits_nothing_and_removes_its_files(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    files_before = sorted(p.name for p in Path(db.uri).rglob("*.parquet"))
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.table("a").append(rows((1, 1)))
            tx.create_table("b", SCHEMA).append(rows((2, 2)))
            raise RuntimeError("boom")
    assert db.tables() == ["a"] and content(db.table("a")) == []
    assert sorted(p.name for p in Path(db.uri).rglob("*.parquet")) == files_before


def test_a_table_of_a_transaction_commits_only_with_it(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    with db.transaction() as tx:
        with pytest.raises(InvalidArgumentError, match="database transaction"):
            tx.table("a").commit()
        tx.table("a").append(rows((1, 1)))
    assert content(db.table("a")) == [(1, 1)]


def test_an_empty_transaction_commits_nothing(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    with db.transaction() as tx:
        tx.table("a").scan().to_arrow()
    assert db.version == 1


def content_of(scan: mt.Scan) -> list[tuple[int, int]]:
    return sorted((r["id"], r["qty"]) for r in scan.to_arrow().to_pylist())


# --- names and typed errors ---------------------------------------------------------------
class _Name(str):
    """A str subclass: its methods may say anything, so it is refused like any non-string."""


@pytest.mark.parametrize("name", ["", "a/b", "..", ".", "tab\x00le", "new\nline", "back\\slash", "x" * 256, 7,
                                  "é" * 128, "c1\x85control", _Name("a")])
def test_bad_table_names_are_refused_and_nothing_is_written(db: mt.Database, name: object) -> None:
    before = sorted(str(p) for p in Path(db.uri).rglob("*"))
    with pytest.raises(InvalidArgumentError, match="table name"):
        db.create_table(name, SCHEMA)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="table name"):
        db.table(name)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="table name"):
        db.snapshot().table(name)  # type: ignore[arg-type]
    assert sorted(str(p) for p in Path(db.uri).rglob("*")) == before


@pytest.mark.parametrize(("call", "message"), [
    (lambda db: db.history(-1), "limit must be at least 0"),
    (lambda db: db.history("3"), "limit must be an integer"),
    (lambda db: db.snapshot(version=0, as_of="2026-01-01T00:00:00Z"), "pass version or as_of, not both"),
    (lambda db: db.tables(version=-1), "version must be at least 0"),
])
def test_bad_arguments_to_a_database_are_refused(db: mt.Database, call: Callable[[mt.Database], object],
                                                 message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        call(db)


def test_typed_errors_say_what_is_there(db: mt.Database, tmp_path: Path) -> None:
    db.create_table("a", SCHEMA)
    with pytest.raises(TableExistsError):
        db.create_table("a", SCHEMA)
    with pytest.raises(TableNotFoundError):
        db.table("missing")
    with pytest.raises(TableNotFoundError):
        db.drop_table("missing")
    db.create_table("b", SCHEMA)
    with pytest.raises(TableExistsError):
        db.rename_table("a", "b")
    with pytest.raises(DatabaseExistsError):
        mt.create_database(db.uri)
    with pytest.raises(DatabaseNotFoundError):
        mt.open_database(str(tmp_path / "nothing"))
    mt.create_table(str(tmp_path / "plain"), SCHEMA)
    with pytest.raises(DatabaseNotFoundError, match="open_table"):
        mt.open_database(str(tmp_path / "plain"))
    with pytest.raises(DatabaseExistsError):
        mt.create_database(str(tmp_path / "plain"))
    with pytest.raises(TableNotFoundError, match="open_database"):
        mt.open_table(db.uri).to_arrow()
    with pytest.raises(TableNotFoundError):
        mt.open_table(f"{db.uri}/missing")
    with pytest.raises(InvalidArgumentError, match="mirrors"):
        db.create_table("m", SCHEMA, mirrors=["delta"])
    with pytest.raises(InvalidArgumentError, match="Database.gc"):
        db.table("a").gc()


def test_a_damaged_database_version_is_corrupt_naming_the_field(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    path = Path(db.uri) / "manifest" / f"v{1:020d}.json"
    doc = json.loads(path.read_bytes())
    doc["tables"]["a"]["root"] = "tables/../../etc/passwd"
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptTableError, match="root"):
        mt.open_database(db.uri).tables()


# --- snapshots and time travel -------------------------------------------------------------
def test_a_snapshot_reads_every_table_at_one_version_while_writers_commit(db: mt.Database) -> None:
    a, _ = db.create_table("a", SCHEMA), db.create_table("b", SCHEMA)
    with db.transaction() as tx:
        tx.table("a").append(rows((1, 1)))
        tx.table("b").append(rows((1, 1)))
    snap = db.snapshot()
    a.append(rows((2, 2)))
    db.drop_table("b")
    assert snap.version == 3 and snap.tables() == ["a", "b"]
    assert content(snap.table("a")) == [(1, 1)] and content(snap.table("b")) == [(1, 1)]
    assert content(db.snapshot(version=3).table("b")) == [(1, 1)]
    assert content(a, version=3) == [(1, 1)] and content(a) == [(1, 1), (2, 2)]
    with pytest.raises(VersionNotFoundError):
        a.scan(version=0)


def test_time_travel_by_timestamp_covers_every_table(db: mt.Database) -> None:
    a = db.create_table("a", SCHEMA)
    a.append(rows((1, 1)))
    when = db.history(limit=1)[0].timestamp
    a.append(rows((2, 2)))
    assert content(db.snapshot(as_of=when).table("a")) == [(1, 1)]
    assert content(a, as_of=when) == [(1, 1)]
    assert db.tables(as_of=when) == ["a"]
    with pytest.raises(InvalidArgumentError):
        db.snapshot(version=1, as_of=when)


# --- conflicts -----------------------------------------------------------------------------
def _two_writers(db: mt.Database) -> tuple[mt.DatabaseTransaction, mt.Database]:
    """A transaction staged on the latest version, and a second handle to commit under it."""
    return db.transaction(), mt.open_database(db.uri)


def test_commits_on_other_tables_rebase(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    db.create_table("b", SCHEMA)
    tx, other = _two_writers(db)
    tx.table("a").append(rows((1, 1)))
    other.table("b").append(rows((2, 2)))
    other.create_table("c", SCHEMA)
    tx.commit()
    assert content(db.table("a")) == [(1, 1)] and content(db.table("b")) == [(2, 2)]


def test_appends_to_one_table_from_two_writers_both_land(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    tx, other = _two_writers(db)
    tx.table("a").append(rows((1, 1)))
    other.table("a").append(rows((2, 2)))
    tx.commit()
    assert content(db.table("a")) == [(1, 1), (2, 2)]


def test_an_update_conflicts_with_a_concurrent_update_of_the_same_rows(db: mt.Database) -> None:
    db.create_table("a", SCHEMA).append(rows((1, 10)))
    db.create_table("b", SCHEMA).append(rows((1, 10)))
    tx, other = _two_writers(db)
    tx.table("a").update({"qty": "qty - 1"}, where="id = 1")
    tx.table("b").update({"qty": "qty + 1"}, where="id = 1")
    other.table("b").update({"qty": "qty * 2"}, where="id = 1")
    with pytest.raises(CommitConflictError):
        tx.commit()
    assert content(db.table("a")) == [(1, 10)] and content(db.table("b")) == [(1, 20)]


@pytest.mark.parametrize("concurrent", ["drop", "rename"])
def test_writing_to_a_table_a_concurrent_commit_dropped_or_renamed_conflicts(db: mt.Database,
                                                                            concurrent: str) -> None:
    db.create_table("a", SCHEMA)
    tx, other = _two_writers(db)
    tx.table("a").append(rows((1, 1)))
    other.drop_table("a") if concurrent == "drop" else other.rename_table("a", "z")
    with pytest.raises(CommitConflictError, match="was dropped" if concurrent == "drop" else "renamed to 'z'"):
        tx.commit()


def test_creating_a_name_a_concurrent_commit_created_conflicts(db: mt.Database) -> None:
    tx, other = _two_writers(db)
    tx.create_table("a", SCHEMA).append(rows((1, 1)))
    other.create_table("a", SCHEMA)
    with pytest.raises(CommitConflictError, match="taken by a concurrent commit"):
        tx.commit()
    assert content(db.table("a")) == []


def test_dropping_a_table_a_concurrent_commit_wrote_to_conflicts(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    tx, other = _two_writers(db)
    tx.drop_table("a")
    other.table("a").append(rows((1, 1)))
    with pytest.raises(CommitConflictError, match="written by a concurrent commit"):
        tx.commit()
    assert db.tables() == ["a"]


def test_renaming_a_table_a_concurrent_commit_wrote_to_rebases(db: mt.Database) -> None:
    db.create_table("a", SCHEMA)
    tx, other = _two_writers(db)
    tx.rename_table("a", "b")
    other.table("a").append(rows((1, 1)))
    tx.commit()
    assert db.tables() == ["b"] and content(db.table("b")) == [(1, 1)]


def test_a_commit_that_lost_only_to_other_tables_reuses_its_root(tmp_path: Path) -> None:
    """The retry costs the winner's GET and one PUT of the next database version: no new
    root, no re-plan (docs/design/003-databases.md, "Request budget")."""
    uri = str(tmp_path / "db")
    mt.create_database(uri)
    store = FaultyStore(LocalStore(uri), FaultPlan())
    db = mt.open_database(uri, store=store)
    db.create_table("a", SCHEMA)
    db.create_table("b", SCHEMA)
    tx = db.transaction()
    tx.table("a").append(rows((1, 1)))
    mt.open_database(uri).table("b").append(rows((2, 2)))
    del store.plan.calls[:]
    tx.commit()
    puts = [c.key for c in store.plan.calls if c.kind in ("put_if_absent", "put_if_match")]
    roots = [k for k in puts if "/roots/" in k]
    versions = [k for k in puts if k.startswith("manifest/")]
    assert len(roots) == 1 and len(versions) == 2  # one root; the lost version and the won one
    assert all(k in roots or k in versions or k == "_latest_manifest" for k in puts)


def test_duckdb_and_polars_read_a_database_table(db: mt.Database) -> None:
    duckdb = pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    t = db.create_table("t", SCHEMA)
    t.append(rows((1, 1), (2, 2), (3, 3)))
    t.delete("id = 2")
    con = duckdb.connect()
    assert sorted(db.table("t").to_duckdb(con, "t").fetchall()) == [(1, 1), (3, 3)]
    assert sorted(t.to_polars().collect().rows()) == [(1, 1), (3, 3)]
    assert sorted(t.to_polars(version=2).collect().rows()) == [(1, 1), (2, 2), (3, 3)]


def test_a_schema_change_of_a_database_table_is_one_database_commit(db: mt.Database) -> None:
    t = db.create_table("t", SCHEMA)
    t.append(rows((1, 1)))
    with t.update_schema() as s:
        s.add_column("note", pa.string())
        s.rename_column("qty", "quantity")
    assert db.history(limit=1)[0].parameters["tables"] == {"t": "update_schema"}
    assert db.table("t").schema.names == ["id", "quantity", "note"]
    assert db.table("t").to_arrow().to_pylist() == [{"id": 1, "quantity": 1, "note": None}]
    assert t.scan(version=2).to_arrow().schema.names == ["id", "qty"]

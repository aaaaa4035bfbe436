"""Catalog changes inside database transactions (issue 28): every staged create, drop and
rename is checked against the catalog as the transaction leaves it, a commit never names two
tables alike, a replayed streaming batch commits once, and a handle held across a rename
reads the table but refuses writes, naming the new name. Each test failed on release 0.3.0."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.commit.loop import commit as commit_loop
from manifest_table.database.catalog import CatalogChange
from manifest_table.database.commit import DatabaseProposal
from manifest_table.errors import (
    CommitConflictError,
    InvalidArgumentError,
    TableExistsError,
    TableNotFoundError,
    TableRenamedError,
)

SCHEMA = pa.schema([("id", pa.int64())])


def ids(table: mt.Table, **scan: object) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())  # type: ignore[arg-type]


def files(db: mt.Database) -> list[str]:
    return sorted(str(p.relative_to(db.uri)) for p in Path(db.uri).rglob("*") if p.is_file())


@pytest.fixture
def db(tmp_path: Path) -> mt.Database:
    db = mt.create_database(str(tmp_path / "db"))
    db.create_table("a", SCHEMA).append([{"id": 1}])
    db.create_table("b", SCHEMA).append([{"id": 2}])
    return db


# --- item 1: two renames onto one name --------------------------------------------------------
def test_two_renames_onto_one_name_are_refused_when_staged(db: mt.Database) -> None:
    before, stored = db.version, files(db)
    with pytest.raises(TableExistsError, match="'c' already exists.*renamed 'a' to it"):
        with db.transaction() as tx:
            tx.rename_table("a", "c")
            tx.rename_table("b", "c")
    assert db.version == before and files(db) == stored
    assert db.tables() == ["a", "b"] and ids(db.table("a")) == [1] and ids(db.table("b")) == [2]


@pytest.mark.parametrize("steps", [
    [("create", "c"), ("rename", "a", "c")],
    [("rename", "a", "c"), ("create", "c")],
    [("rename", "a", "b")],
    [("drop", "a"), ("rename", "b", "c"), ("rename", "c", "b"), ("create", "b")],
])
def test_every_staged_change_is_checked_against_the_catalog_the_transaction_leaves(
        db: mt.Database, steps: list[tuple[str, ...]]) -> None:
    before = db.version
    with pytest.raises(TableExistsError):
        with db.transaction() as tx:
            for kind, *names in steps:
                {"create": lambda n: tx.create_table(n, SCHEMA), "drop": tx.drop_table,
                 "rename": tx.rename_table}[kind](*names)
    assert db.version == before and db.tables() == ["a", "b"]


def test_a_commit_that_claims_a_name_twice_is_refused_before_the_write(db: mt.Database) -> None:
    """The last check, just before the database version is written: whatever staged it, a
    version never names two tables alike (the entry of one would be overwritten)."""
    base, pointer = db.log.latest()
    a, b = base.tables["a"].id, base.tables["b"].id
    for change in (CatalogChange(base.version, renamed={a: ("a", "c"), b: ("b", "c")}),
                   CatalogChange(base.version, renamed={a: ("a", "b")})):
        with pytest.raises(TableExistsError, match="names two tables"):
            commit_loop(db.log, DatabaseProposal(db.log, [], change), base, pointer)
    assert db.version == base.version and db.tables() == ["a", "b"]


def test_renames_apply_in_order_a_swap_is_one_commit(db: mt.Database) -> None:
    old_a = db.table("a")
    with db.transaction() as tx:
        tx.rename_table("a", "tmp")
        tx.rename_table("b", "a")
        tx.rename_table("tmp", "b")
        assert ids(tx.table("a")) == [2] and ids(tx.table("b")) == [1]  # reads follow the staged catalog
    assert db.tables() == ["a", "b"] and ids(db.table("a")) == [2] and ids(db.table("b")) == [1]
    assert db.history(limit=1)[0].parameters["renamed"] == {"a": "b", "b": "a"}
    assert ids(db.table("a"), version=db.version - 1) == [2]  # a handle's time travel follows its table
    assert ids(db.snapshot(version=db.version - 1).table("a")) == [1]  # a snapshot's, the names then
    with pytest.raises(TableRenamedError, match="renamed to 'b'.*now names another table"):
        old_a.append([{"id": 9}])


def test_a_table_renamed_in_a_transaction_can_be_written_in_it(db: mt.Database) -> None:
    with db.transaction() as tx:
        tx.table("a").append([{"id": 10}])
        tx.rename_table("a", "c")
        tx.table("c").append([{"id": 11}])
        tx.create_table("a", SCHEMA).append([{"id": 12}])
        tx.drop_table("b")
        with pytest.raises(TableNotFoundError, match="this transaction dropped it"):
            tx.table("b")
    assert db.tables() == ["a", "c"]
    assert ids(db.table("c")) == [1, 10, 11] and ids(db.table("a")) == [12]
    info = db.history(limit=1)[0]
    assert info.parameters["renamed"] == {"a": "c"} and info.parameters["created"] == ["a"]
    assert info.parameters["dropped"] == ["b"]


def test_a_table_created_or_written_in_a_transaction_cannot_be_dropped_in_it(db: mt.Database) -> None:
    with db.transaction() as tx:
        tx.table("a").append([{"id": 3}])
        tx.create_table("n", SCHEMA)
        for name in ("a", "n"):
            with pytest.raises(InvalidArgumentError, match="created or written in this transaction"):
                tx.drop_table(name)
        reader = tx.table("b")
        reader.scan().to_arrow()
        tx.drop_table("b")  # only read: it may go, and its transaction with it
        with pytest.raises(mt.errors.ManifestTableError, match="already been committed or aborted"):
            reader.append([{"id": 4}])
    assert db.tables() == ["a", "n"] and ids(db.table("a")) == [1, 3]


# --- item 4: drop and re-create one name ---------------------------------------------------------
def test_a_name_dropped_in_a_transaction_can_be_created_again_in_it(db: mt.Database) -> None:
    old = db.table("a")
    with db.transaction() as tx:
        tx.drop_table("a")
        tx.create_table("a", pa.schema([("id", pa.int64()), ("note", pa.string())])).append(
            [{"id": 5, "note": "new"}])
    new = db.table("a")
    assert new.table_id != old.table_id and new.schema.names == ["id", "note"] and ids(new) == [5]
    info = db.history(limit=1)[0]
    assert info.parameters["dropped"] == ["a"] and info.parameters["created"] == ["a"]
    assert ids(old, version=db.version - 1) == [1]
    with pytest.raises(TableNotFoundError, match="dropped"):
        old.to_arrow()


def test_creating_a_name_a_concurrent_commit_took_by_a_rename_conflicts(db: mt.Database) -> None:
    tx = db.transaction()
    tx.create_table("c", SCHEMA)
    mt.open_database(db.uri).rename_table("a", "c")
    with pytest.raises(CommitConflictError, match="'c' was taken by a concurrent commit"):
        tx.commit()
    assert db.tables() == ["b", "c"] and ids(db.table("c")) == [1]


CONCURRENT_TAKEOVERS = {  # what another commit did to name 'a' meanwhile, and the catalog it left
    "dropped and created again": (lambda tx: (tx.drop_table("a"), tx.create_table("a", SCHEMA).append([{"id": 9}])),
                                  {"a": [9], "b": [2]}, "'a' was dropped"),
    "renamed away, another renamed onto it": (lambda tx: (tx.rename_table("a", "x"), tx.rename_table("b", "a")),
                                              {"a": [2], "x": [1]}, "'a' was renamed to 'x'"),
}


@pytest.mark.parametrize("takeover", sorted(CONCURRENT_TAKEOVERS))
@pytest.mark.parametrize("change", ["drop", "rename"])
def test_dropping_or_renaming_a_name_another_table_took_meanwhile_conflicts(
        db: mt.Database, change: str, takeover: str) -> None:
    """The transaction drops (or renames) the table named 'a' when it began; a concurrent
    commit gave that name to another table. The change was about the first table: it must
    neither drop nor rename the table that holds the name now."""
    act, left, message = CONCURRENT_TAKEOVERS[takeover]
    tx = db.transaction()
    tx.drop_table("a") if change == "drop" else tx.rename_table("a", "c")
    with mt.open_database(db.uri).transaction() as other:
        act(other)
    with pytest.raises(CommitConflictError, match=f"table {message} by a concurrent commit"):
        tx.commit()
    assert {name: ids(db.table(name)) for name in db.tables()} == left


# --- item 3: a replayed streaming batch ----------------------------------------------------------
def test_a_replayed_batch_commits_nothing_in_a_database_transaction(db: mt.Database) -> None:
    for _ in range(2):
        with db.transaction() as tx:
            tx.table("a").set_app_transaction("stream", 1)
            tx.table("a").append([{"id": 7}])
            tx.table("b").append([{"id": 8}])  # a batch that writes two tables
    assert ids(db.table("a")) == [1, 7] and ids(db.table("b")) == [2, 8]
    before, stored = db.version, files(db)
    with db.transaction() as tx:
        tx.table("a").set_app_transaction("stream", 0)  # an older batch: also already committed
        tx.table("a").append([{"id": 70}])
        tx.table("b").append([{"id": 80}])
    assert db.version == before and ids(db.table("a")) == [1, 7] and ids(db.table("b")) == [2, 8]
    assert files(db) == stored  # what the replay staged is removed, in every table


def test_a_replayed_batch_reports_that_it_committed_nothing(db: mt.Database) -> None:
    infos = []
    for _ in range(2):
        tx = db.transaction()
        tx.table("a").set_app_transaction("stream", 4)
        tx.table("a").append([{"id": 7}])
        infos.append(tx.commit())
    assert infos[0].committed and not infos[1].committed and infos[1].version == infos[0].version
    assert ids(db.table("a")) == [1, 7]


# --- item 8: a handle held across a rename -------------------------------------------------------
def test_a_handle_across_a_rename_reads_the_table_and_refuses_writes_naming_the_new_name(db: mt.Database) -> None:
    handle = db.table("a")
    db.rename_table("a", "c")
    renamed_at = db.version
    assert ids(handle) == [1] and ids(handle, version=renamed_at - 1) == [1]  # reads follow the table
    for write in (lambda: handle.append([{"id": 2}]), lambda: handle.delete("id = 1"), handle.compact,
                  lambda: handle.update_schema().__enter__()):
        with pytest.raises(TableRenamedError, match=f"renamed to 'c'.*version {renamed_at}.*open .*/db/c") as raised:
            write()
        assert isinstance(raised.value, TableNotFoundError)
    mt.open_table(f"{db.uri}/c").append([{"id": 3}])
    assert ids(handle) == [1, 3]
    db.rename_table("c", "a")  # the name is the table's again: the handle writes again
    handle.append([{"id": 4}])
    assert ids(db.table("a")) == [1, 3, 4]


def test_a_rename_during_a_commit_conflicts_and_the_retry_names_the_new_name(db: mt.Database) -> None:
    handle = db.table("a")
    tx = handle.transaction()
    tx.append([{"id": 2}])
    mt.open_database(db.uri).rename_table("a", "c")
    with pytest.raises(CommitConflictError, match="renamed to 'c' by a concurrent commit"):
        tx.commit()
    with pytest.raises(TableRenamedError, match="renamed to 'c'"):
        handle.append([{"id": 2}])
    assert ids(db.table("c")) == [1]

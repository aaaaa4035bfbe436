"""``DB_URI/TABLE`` means the database's table everywhere (issue 28): the Python entry points
create it in the database, ``open_table`` looks for a database at the parent first, every
name a database accepts opens as ``DB_URI/NAME`` on every store, a database's own location is
no table, and the CLI's ``info`` works on a database's table. Each test failed on 0.3.0."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import (
    DatabaseExistsError,
    InvalidArgumentError,
    StoreError,
    TableExistsError,
    TableNotFoundError,
)
from manifest_table.storage import LocalStore, MemoryStore
from tests.conftest import store_location

SCHEMA = pa.schema([("id", pa.int64())])

NAMES = ["a ", " a", "\u00a0nbsp\u00a0", "a#b", "#", "a?b", "?x=1&y=2", "a%20b", "100%", "%2F", "a b",
         "x:y", "...", "-", "~user", "a*b[1]{2}", "q'\"", "ünïcødé", "名前", "🙂", "e" * 255]
"""Names a database accepts that a URI parser would read otherwise: blanks around them, a
fragment, a query, percent escapes, glob characters, non-ASCII, the longest allowed."""


def ids(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


# --- item 6: every accepted name opens as DB_URI/NAME -------------------------------------------
@pytest.mark.parametrize("kind", ["local", "s3", "gcs", "azure"])
def test_every_accepted_name_opens_as_db_uri_slash_name(kind: str, request: pytest.FixtureRequest,
                                                        tmp_path: Path) -> None:
    uri, options = (str(tmp_path / "db"), None) if kind == "local" else store_location(kind, request)
    db = mt.create_database(uri, storage_options=options)
    with db.transaction() as tx:
        for n, name in enumerate(NAMES[3:]):
            tx.create_table(name, SCHEMA).append([{"id": n}])
    mt.create_table(f"{uri}/{NAMES[0]}", SCHEMA, storage_options=options).append([{"id": -1}])
    mt.write_table(f"{uri}/{NAMES[1]}", [{"id": -2}], storage_options=options)
    mt.write_table(f"{uri}/{NAMES[2]}", [{"id": -3}], storage_options=options)
    assert db.tables() == sorted(NAMES)
    expected = {name: [n] for n, name in enumerate(NAMES[3:])} | dict(zip(NAMES[:3], ([-1], [-2], [-3])))
    for name in NAMES:
        location = f"{uri}/{name}"
        opened = mt.open_table(location, storage_options=options)
        assert isinstance(opened, mt.DatabaseTable) and opened.name == name and opened.uri == location, name
        assert ids(opened) == expected[name], name


def test_every_accepted_name_round_trips_on_a_memory_store() -> None:
    """A memory store has no URI: the database's versions carry every name through JSON."""
    store = MemoryStore()
    db = mt.create_database("mem://db", store=store)
    with db.transaction() as tx:
        for n, name in enumerate(NAMES):
            tx.create_table(name, SCHEMA).append([{"id": n}])
    reopened = mt.open_database("mem://db", store=store)
    assert reopened.tables() == sorted(NAMES)
    assert {name: ids(reopened.table(name)) for name in NAMES} == {name: [n] for n, name in enumerate(NAMES)}


def test_the_command_line_takes_every_accepted_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "db")
    mt.create_database(uri)
    for name in ("a ", "a#b", "a?b", "100%"):
        assert main(["create", f"{uri}/{name}", "--schema", "id:int64"]) == 0
        assert main(["count", f"{uri}/{name}"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n0\n") + out.startswith("0\n") >= 1 and "error" not in out
    assert sorted(mt.open_database(uri).tables()) == ["100%", "a ", "a#b", "a?b"]


# --- item 2: DB_URI/TABLE is always the database's table -----------------------------------------
def test_create_and_write_table_of_db_uri_slash_name_create_in_the_database(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    orders = mt.create_table(f"{db.uri}/orders", SCHEMA, target_file_size="1MiB")
    assert isinstance(orders, mt.DatabaseTable) and db.tables() == ["orders"]
    mt.write_table(f"{db.uri}/new", [{"id": 1}])
    assert db.tables() == ["new", "orders"] and ids(db.table("new")) == [1]
    mt.write_table(f"{db.uri}/new", [{"id": 2}], mode="append")
    assert ids(db.table("new")) == [1, 2]
    with pytest.raises(TableExistsError, match="already exists in database"):
        mt.create_table(f"{db.uri}/orders", SCHEMA)
    with pytest.raises(TableExistsError):
        mt.write_table(f"{db.uri}/new", [{"id": 3}])
    with pytest.raises(InvalidArgumentError, match="mirrors"):
        mt.create_table(f"{db.uri}/m", SCHEMA, mirrors=["delta"])
    with pytest.raises(InvalidArgumentError, match="format version"):
        mt.write_table(f"{db.uri}/v1", [{"id": 1}], format_version=1)
    with pytest.raises(InvalidArgumentError, match="format version"):
        mt.create_table(f"{db.uri}/v1", SCHEMA, format_version=1)
    # the database's folder holds its objects only: no standalone table was made in it
    top = sorted(p.name for p in Path(db.uri).iterdir() if p.name != ".cas.lock")
    assert top == ["_latest_manifest", "manifest", "tables"]
    assert db.tables() == ["new", "orders"]


def test_open_table_finds_the_databases_table_before_a_standalone_one_in_its_folder(tmp_path: Path) -> None:
    """0.3.0's create_table("DB/orders") made a standalone table in the database's folder,
    which open_table then read and wrote instead of the database's."""
    db = mt.create_database(str(tmp_path / "db"))
    db.create_table("orders", SCHEMA).append([{"id": 1}])
    shadow = mt.create_table("shadow", SCHEMA, store=LocalStore(Path(db.uri) / "orders"))  # as 0.3.0 made it
    shadow.append([{"id": 99}])
    opened = mt.open_table(f"{db.uri}/orders")
    assert isinstance(opened, mt.DatabaseTable) and ids(opened) == [1]
    opened.append([{"id": 2}])
    assert ids(db.table("orders")) == [1, 2] and ids(shadow) == [99]
    with pytest.raises(TableNotFoundError, match="no table 'shadowed' in database"):
        mt.open_table(f"{db.uri}/shadowed")  # never a standalone table, even where one could be


def test_db_uri_slash_name_with_a_trailing_slash_is_the_databases_table(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    created = mt.create_table(f"{db.uri}/orders/", SCHEMA)
    assert isinstance(created, mt.DatabaseTable) and db.tables() == ["orders"]
    mt.open_table(f"{db.uri}/orders/").append([{"id": 1}])
    mt.write_table(f"{db.uri}/more/", [{"id": 2}])
    assert ids(db.table("orders")) == [1] and ids(db.table("more")) == [2]
    assert not (Path(db.uri) / "orders").exists()  # no standalone table in the database's folder


def test_create_table_finds_a_database_whose_creator_died_before_its_pointer(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    (Path(db.uri) / "_latest_manifest").unlink()  # as if create_database died after version 0
    created = mt.create_table(f"{db.uri}/orders", SCHEMA)
    assert isinstance(created, mt.DatabaseTable) and mt.open_database(db.uri).tables() == ["orders"]
    db = mt.create_database(str(tmp_path / "other"))
    (Path(db.uri) / "_latest_manifest").unlink()
    written = mt.write_table(f"{db.uri}/orders", [{"id": 1}])
    assert isinstance(written, mt.DatabaseTable) and ids(mt.open_database(db.uri).table("orders")) == [1]
    assert not (tmp_path / "db" / "orders").exists() and not (tmp_path / "other" / "orders").exists()


@pytest.mark.parametrize("name", ["back\\slash", "c1\x85control"])
def test_a_standalone_table_may_have_a_name_no_database_takes(tmp_path: Path, name: str) -> None:
    """``DB_URI/NAME`` is read only where NAME is a table name: any other last part of a path is
    a standalone table's folder, as before databases."""
    table = mt.create_table(str(tmp_path / name), SCHEMA)
    table.append([{"id": 1}])
    assert ids(mt.open_table(str(tmp_path / name))) == [1]
    mt.write_table(str(tmp_path / name), [{"id": 2}], mode="append")
    assert ids(mt.open_table(str(tmp_path / name))) == [1, 2]


def test_a_parent_that_cannot_be_read(tmp_path: Path) -> None:
    """As an S3 role allowed only its table's prefix sees a 403 there: a table there opens, a
    missing one raises the parent's store error (which may be why), and nothing is created."""
    (tmp_path / "_latest_manifest").mkdir()  # the parent's pointer: unreadable
    inside = tmp_path / "inside"
    mt.create_table("t", SCHEMA, store=LocalStore(inside)).append([{"id": 1}])
    assert ids(mt.open_table(str(inside))) == [1]
    with pytest.raises(StoreError, match="_latest_manifest"):
        mt.open_table(str(tmp_path / "missing"))
    new = str(tmp_path / "new")
    for make in (lambda: mt.create_table(new, SCHEMA), lambda: mt.write_table(new, [{"id": 1}])):
        with pytest.raises(StoreError, match="_latest_manifest"):
            make()
    assert not (tmp_path / "new").exists()


def test_a_database_is_created_in_an_empty_location_only(tmp_path: Path) -> None:
    mt.create_table(str(tmp_path / "lake" / "events"), SCHEMA)
    with pytest.raises(DatabaseExistsError, match="not empty"):
        mt.create_database(str(tmp_path / "lake"))  # it would hide lake/events behind DB_URI/NAME
    assert ids(mt.open_table(str(tmp_path / "lake" / "events"))) == []


# --- item 7: a database's location is no table -----------------------------------------------------
def test_open_table_of_a_database_fails_at_open_naming_open_database(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    with pytest.raises(TableNotFoundError, match=f"{db.uri} is a database.*open_database"):
        mt.open_table(db.uri)
    with pytest.raises(TableNotFoundError, match="open_database"):
        mt.write_table(db.uri, [{"id": 1}], mode="append")


# --- item 5: info of a database's table -------------------------------------------------------------
def test_info_of_a_database_table_names_its_oldest_readable_version(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    db.create_table("x", SCHEMA)
    db.create_table("a", SCHEMA).append([{"id": 1}])
    db.table("x").append([{"id": 1}])
    capsys.readouterr()
    assert main(["info", f"{db.uri}/a", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["version"], facts["oldest_retained_version"], facts["live_rows"]) == (4, 2, 1)
    assert main(["info", f"{db.uri}/a"]) == 0 and "oldest retained version: 2" in capsys.readouterr().out

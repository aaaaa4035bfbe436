"""Table and database properties (format/properties.py): the registry, set_properties, the CLI,
what each value is stored as, the format version a property raises a table to, and the writer
requirement (a writer refuses a table holding a property it does not know; readers read it)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import (
    CorruptTableError,
    InvalidArgumentError,
    UnsupportedTableError,
    UpgradeRequiredError,
)
from manifest_table.format import properties as registry
from manifest_table.format.manifest import manifest_key

SCHEMA = pa.schema([("id", pa.int64())])


def root(t: mt.Table, version: int | None = None) -> dict[str, Any]:
    return json.loads(t.store.get(manifest_key(t.version if version is None else version)))


def test_a_new_table_shows_every_property_and_stays_at_format_version_2(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    assert t.properties == {"bloom_filter_columns": [], "cluster_by": [], "deletes_limit": 64, "gc_grace": "24h",
                            "max_small_segments": 8,
                            "segment_target_files": 32768, "sort_by": [], "tail_limit": 32}
    assert root(t)["format_version"] == 2 and "gc_grace" not in root(t)["properties"]


def test_set_properties_is_one_commit_that_raises_the_format_version_and_round_trips(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append([{"id": 1}])
    info = t.set_properties({"gc_grace": timedelta(hours=6)})
    assert (info.version, info.operation, info.parameters) == (2, "set_properties", {"properties": {"gc_grace": "6h"}})
    assert root(t)["format_version"] == 3 and root(t)["properties"]["gc_grace"] == "6h"
    assert mt.open_table(t.uri).properties["gc_grace"] == "6h" and t.manifest().gc_grace == 6 * 3600
    t.append([{"id": 2}])  # carried forward by every commit
    assert (root(t)["format_version"], root(t)["properties"]["gc_grace"]) == (3, "6h")
    assert t.set_properties({"gc_grace": "90m", "tail_limit": 4}).version == 4
    assert (t.properties["gc_grace"], t.properties["tail_limit"]) == ("90m", 4)
    t.set_properties({"gc_grace": None})  # back to the default; the format version never goes down
    assert t.properties["gc_grace"] == "24h" and root(t)["format_version"] == 3
    assert t.scan(version=1).count() == 1 and t.scan().count() == 2
    assert not t.set_properties({}).committed
    with t.update_schema() as change:
        change.add_column("grp", pa.int32())
    t.set_properties({"bloom_filter_columns": "id , grp"})  # as the CLI passes it: names around commas
    assert mt.open_table(t.uri).properties["bloom_filter_columns"] == ["id", "grp"]


def test_create_table_takes_properties_and_picks_the_format_version(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "2d", "tail_limit": 8})
    assert (root(t)["format_version"], t.properties["gc_grace"], t.properties["tail_limit"]) == (3, "2d", 8)
    assert t.set_properties({"gc_grace": 5400}).committed  # a number is seconds, as for every duration
    assert mt.open_table(t.uri).properties["gc_grace"] == "90m"


@pytest.mark.parametrize("given, match", [
    ({"gc_grac": "1h"}, r"unknown table properties \['gc_grac'\] \(did you mean 'gc_grace'\?\)"),
    ({"gc_grace": "0"}, "gc_grace must be a positive duration"),
    ({"gc_grace": [3600]}, "gc_grace must be a datetime.timedelta"),
    ({"gc_grace": "soon"}, "not a duration: 'soon'"),
    ({"tail_limit": 0}, "tail_limit must be at least 1"),
    ({"tail_limit": True}, "tail_limit must be an integer"),
    ({"tail_limit": 2**63}, r"tail_limit must be below 2\*\*63"),
    ({"sort_by": ["id", ""]}, "sort_by must be a list of one or more distinct column names"),
    ("gc_grace=1h", "properties must be a dict"),
])
def test_bad_properties_are_refused_and_nothing_is_written(tmp_path: Path, given: Any, match: str) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    before = sorted(p.name for p in (tmp_path / "t" / "manifest").iterdir())
    with pytest.raises(InvalidArgumentError, match=match):
        t.set_properties(given)
    with pytest.raises(InvalidArgumentError, match=match):
        mt.create_table(str(tmp_path / "u"), SCHEMA, properties=given)
    assert sorted(p.name for p in (tmp_path / "t" / "manifest").iterdir()) == before
    assert not (tmp_path / "u").exists()


def test_a_format_v1_table_names_upgrade(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, format_version=1)
    with pytest.raises(UpgradeRequiredError, match="upgrade"):
        t.set_properties({"gc_grace": "6h"})
    assert t.version == 0 and t.properties["gc_grace"] == "24h"
    t.upgrade({"gc_grace": "6h"})
    assert (root(t)["format_version"], t.properties["gc_grace"]) == (3, "6h")


def test_database_properties_apply_to_the_database_not_its_tables(tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    orders = db.create_table("orders", SCHEMA)
    assert db.properties == {"gc_grace": "24h"} and "gc_grace" not in orders.properties
    doc = json.loads(db.store.get(manifest_key(db.version)))
    assert doc["format_version"] == 1 and "properties" not in doc  # what 0.3.0 reads and writes
    info = db.set_properties({"gc_grace": "2h"})
    assert (info.version, db.properties, mt.open_database(db.uri).properties) == (2, {"gc_grace": "2h"},
                                                                                  {"gc_grace": "2h"})
    doc = json.loads(db.store.get(manifest_key(db.version)))
    assert (doc["format_version"], doc["properties"]) == (2, {"gc_grace": "2h"})
    orders.append([{"id": 1}])  # a table's commit carries the database's properties forward
    assert db.properties == {"gc_grace": "2h"} and db.log.manifest(db.version).gc_grace == 7200
    with pytest.raises(InvalidArgumentError, match="take it from the database"):
        orders.set_properties({"gc_grace": "1h"})
    with pytest.raises(InvalidArgumentError, match="does not apply to a database; it applies to tables"):
        db.set_properties({"tail_limit": 4})
    assert orders.set_properties({"tail_limit": 4}).version == 4 and orders.properties["tail_limit"] == 4


@pytest.fixture
def listed_property() -> Any:
    """A property whose value is a list, registered as a later release would add one."""
    def columns(name: str, value: Any) -> tuple[str, ...]:
        names = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        if not names or not 1 <= len(value) <= 4:
            raise InvalidArgumentError(f"{name} must be a list of 1 to 4 column names, not {value!r}")
        return tuple(value)

    prop = registry.register(registry.Property("test_columns", "a list", (), columns, lambda v: list(v)))
    yield prop
    del registry.REGISTRY[prop.name]


def test_a_list_property_round_trips_through_its_stored_form(tmp_path: Path, listed_property: Any) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.set_properties({"test_columns": ("id", "x")})
    assert root(t)["properties"]["test_columns"] == ["id", "x"] and t.properties["test_columns"] == ["id", "x"]
    assert mt.open_table(t.uri).manifest().properties[listed_property] == ("id", "x")
    with pytest.raises(InvalidArgumentError, match="test_columns must be a list of 1 to 4"):
        t.set_properties({"test_columns": []})


def test_a_writer_refuses_a_property_it_does_not_know_and_readers_read_on(tmp_path: Path,
                                                                          listed_property: Any) -> None:
    """What a newer release's property does to this release: reads work, writes are refused
    (writing the next root would drop it), and nothing is committed."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append([{"id": 1}])
    t.set_properties({"test_columns": ["id"]})
    del registry.REGISTRY["test_columns"]  # now this release does not know it
    try:
        old = mt.open_table(t.uri)
        assert old.scan().count() == 1 and old.properties["test_columns"] == ["id"]
        with pytest.raises(UnsupportedTableError, match=r"\['test_columns'\].*upgrade manifest_table"):
            old.append([{"id": 2}])
        assert old.version == 2 and sorted(p.name for p in (tmp_path / "t" / "data").iterdir()) == \
            sorted(f.path[len("data/"):] for f in old.manifest().files)  # the refused append's file is gone
    finally:
        registry.register(listed_property)


def test_a_stored_property_not_in_its_canonical_form_is_corrupt(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"gc_grace": "6h"})
    path = tmp_path / "t" / "manifest" / manifest_key(0).split("/")[1]
    for bad in ("360m", 21600, ""):
        doc = json.loads(path.read_bytes())
        doc["properties"]["gc_grace"] = bad
        path.write_text(json.dumps(doc))
        with pytest.raises(CorruptTableError, match="field properties.gc_grace"):
            mt.open_table(t.uri).manifest()
    doc["properties"].update(gc_grace="6h", tail_limit=32.0)  # equal to 32, but not as stored
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptTableError, match="field properties.tail_limit"):
        mt.open_table(t.uri).manifest()


def test_a_root_without_a_layout_limit_is_corrupt_naming_it(tmp_path: Path) -> None:
    """Every root stores the layout limits (releases 0.2.0 and 0.3.0 read them)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    path = tmp_path / "t" / "manifest" / manifest_key(0).split("/")[1]
    doc = json.loads(path.read_bytes())
    del doc["properties"]["tail_limit"]
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptTableError, match="field properties.tail_limit is missing"):
        mt.open_table(t.uri).manifest()


def test_a_layout_limit_reset_is_stored_at_its_default(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"tail_limit": 4})
    t.set_properties({"tail_limit": None})
    assert root(t)["properties"]["tail_limit"] == 32 and mt.open_table(t.uri).properties["tail_limit"] == 32


def test_a_table_property_stored_in_a_database_is_one_this_release_does_not_know(tmp_path: Path) -> None:
    """A name is known in its scopes only: elsewhere a newer release gave it a meaning of its
    own, so it reads as unknown (shown as stored) and writes are refused."""
    db = mt.create_database(str(tmp_path / "db"))
    db.set_properties({"gc_grace": "6h"})
    path = tmp_path / "db" / "manifest" / manifest_key(db.version).split("/")[1]
    doc = json.loads(path.read_bytes())
    doc["properties"]["sort_by"] = "not a list"  # no table's sort_by: not parsed as one
    path.write_text(json.dumps(doc))
    opened = mt.open_database(db.uri)
    assert opened.properties == {"gc_grace": "6h", "sort_by": "not a list"}
    with pytest.raises(UnsupportedTableError, match=r"\['sort_by'\]"):
        opened.create_table("t", SCHEMA)


def test_the_cli_shows_and_sets_properties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    assert main(["properties", t.uri]) == 0
    assert "gc_grace              24h" in capsys.readouterr().out
    assert main(["properties", t.uri, "gc_grace=6h", "tail_limit=16"]) == 0
    out = capsys.readouterr().out
    assert "set gc_grace=6h, tail_limit=16" in out and "tail_limit            16" in out
    assert t.properties["gc_grace"] == "6h" and t.properties["tail_limit"] == 16
    assert main(["properties", t.uri, "gc_grace="]) == 0 and t.properties["gc_grace"] == "24h"
    capsys.readouterr()
    assert main(["properties", t.uri, "gc_grac=1h"]) == 1
    assert "did you mean 'gc_grace'" in capsys.readouterr().err
    db = mt.create_database(str(tmp_path / "db"))
    assert main(["properties", db.uri, "gc_grace=2h"]) == 0 and db.properties == {"gc_grace": "2h"}

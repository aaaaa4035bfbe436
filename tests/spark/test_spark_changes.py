"""``read_changes``: the change feed as a Spark DataFrame, one task per commit, the same rows
as ``Table.changes`` (docs/changes.md), on a table of its own and on a database's table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import manifest_table as mt
from manifest_table.spark import read_changes

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.uint8())])


def rows_of(frame) -> list[tuple]:
    return sorted((r["_commit_version"], r["_change_type"], r["id"], r["v"], r["n"]) for r in frame.collect())


def test_read_changes_equals_the_python_feed(spark, tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    for table in (mt.create_table(str(tmp_path / "t"), SCHEMA), db.create_table("t", SCHEMA)):
        table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "n": [1, 2, 3]}, schema=SCHEMA))
        table.update(values={"v": "z"}, where="id = 2")
        table.delete("id = 3")
        uri = table.uri
        start = table.version - 3
        frame = read_changes(spark, uri, start)
        assert [f.name for f in frame.schema.fields] == ["id", "v", "n", "_change_type", "_commit_version",
                                                          "_commit_timestamp"]
        expected = sorted((r["_commit_version"], r["_change_type"], r["id"], r["v"], r["n"])
                          for r in table.changes(start).to_arrow().to_pylist())
        assert rows_of(frame) == expected and len(expected) == 6
        narrowed = read_changes(spark, uri, start + 1, table.version - 1, columns=["id"], where="id > 1")
        assert sorted(r["_change_type"] for r in narrowed.collect()) == ["update_postimage", "update_preimage"]
        assert read_changes(spark, uri, table.version).count() == 0

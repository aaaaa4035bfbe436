"""The table API against every store: create/open, append, scan, time travel, history."""

from __future__ import annotations

import datetime as dt
import time

import pandas as pd
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from manifest_table.storage import LocalStore

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [i / 2 for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(store) -> mt.Table:
    return mt.create_table("test://t", SCHEMA, store=store)


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def test_create_then_open_and_exists_errors(store):
    with pytest.raises(TableNotFoundError):
        mt.open_table("test://t", store=store)
    t = mt.create_table("test://t", SCHEMA, store=store)
    assert t.version == 0 and t.schema == SCHEMA
    with pytest.raises(TableExistsError):
        mt.create_table("test://t", SCHEMA, store=store)
    opened = mt.open_table("test://t", store=store)
    assert opened.version == 0 and opened.scan().to_arrow().num_rows == 0
    assert opened.scan().to_arrow().schema == SCHEMA


def test_append_every_input_kind(table):
    table.append(rows(0, 3))
    table.append(rows(3, 5).to_batches()[0])
    table.append(pa.RecordBatchReader.from_batches(SCHEMA, rows(5, 8).to_batches()))
    table.append(rows(8, 10).to_pandas())
    info = table.append([{"id": 10, "name": "x", "score": 1.0}, {"id": 11}])
    assert (info.version, info.operation, info.metrics["rows_added"]) == (5, "append", 2)
    assert ids(table.scan().to_arrow()) == list(range(12))
    assert table.scan(where="id = 11").to_arrow().to_pylist() == [{"id": 11, "name": None, "score": None}]


def test_empty_append_commits_nothing(table):
    info = table.append(SCHEMA.empty_table())
    assert not info.committed and table.version == 0
    assert not table.append([]).committed


def test_schema_mismatch_names_columns_and_commits_nothing(table):
    with pytest.raises(SchemaMismatchError, match="missing columns \\['score'\\]"):
        table.append(pa.table({"id": [1], "name": ["a"]}))
    with pytest.raises(SchemaMismatchError, match="unknown columns \\['extra'\\]"):
        table.append([{"id": 1, "extra": 2}])
    with pytest.raises(SchemaMismatchError, match="'name'"):
        table.append(pa.table({"id": [1], "name": [1.5], "score": [1.0]}))
    with pytest.raises(SchemaMismatchError):
        table.append("not data")
    assert table.version == 0


def test_nested_data_appends_member_by_member(tmp_path):
    """Lists by their items and structs by their fields' names and types: text that looks like
    numbers is no integer inside a list either, and a struct's fields are not matched by place."""
    schema = pa.schema([("l", pa.list_(pa.int64())), ("s", pa.struct([("a", pa.int64()), ("b", pa.string())]))])
    table = mt.create_table(tmp_path / "t", schema)
    good_struct = pa.array([{"a": 1, "b": "x"}], schema.field("s").type)
    with pytest.raises(SchemaMismatchError, match="'l'"):
        table.append(pa.table({"l": pa.array([["1", "2"]]), "s": good_struct}))
    renamed = pa.array([{"b": 1, "a": "x"}], pa.struct([("b", pa.int64()), ("a", pa.string())]))
    with pytest.raises(SchemaMismatchError, match="'s'"):
        table.append(pa.table({"l": pa.array([[1]]), "s": renamed}))
    assert table.version == 0
    narrower = pa.array([{"a": 7, "b": "y"}], pa.struct([("a", pa.int8()), ("b", pa.large_string())]))
    table.append(pa.table({"l": pa.array([[1, 2]], pa.large_list(pa.int32())), "s": narrower}))
    assert table.to_arrow().to_pylist() == [{"l": [1, 2], "s": {"a": 7, "b": "y"}}]


def test_timestamps_dates_and_strings_append_and_update_across_their_widths(tmp_path):
    """Other units, date64, plain strings into large ones: stored by a checked cast, in appends
    and in the values an update computes."""
    schema = pa.schema(
        [("ts", pa.timestamp("us", "UTC")), ("day", pa.date32()), ("later", pa.date64()), ("note", pa.large_string())]
    )
    table = mt.create_table(tmp_path / "t", schema)
    table.append(
        pa.table(
            {
                "ts": pa.array([1_700_000_000], pa.timestamp("s", "UTC")),
                "day": pa.array([1_700_000_000_000 // 86_400_000 * 86_400_000], pa.date64()),
                "later": pa.array([19_700], pa.date32()),
                "note": pa.array(["a"], pa.string()),
            }
        )
    )
    table.update({"note": "'b'", "day": "later"})
    assert table.to_arrow().to_pylist() == [
        {
            "ts": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC),
            "day": dt.date(1970, 1, 1) + dt.timedelta(days=19_700),
            "later": dt.date(1970, 1, 1) + dt.timedelta(days=19_700),
            "note": "b",
        }
    ]


def test_safe_casts_and_column_order(table):
    table.append(pa.table({"score": [1.0], "name": ["a"], "id": pa.array([7], pa.int32())}))
    table.append(pa.table({"id": [8], "name": ["b"], "score": pa.array([3], pa.int64())}))  # integers into doubles
    with pytest.raises(SchemaMismatchError, match="9007199254740993"):  # but not past 2**53, where doubles skip some
        table.append(pa.table({"id": [9], "name": ["c"], "score": [2**53 + 1]}))
    assert table.scan().to_arrow().to_pylist() == [
        {"id": 7, "name": "a", "score": 1.0},
        {"id": 8, "name": "b", "score": 3.0},
    ]


def test_scan_projection_filter_and_streaming(table):
    table.append(rows(0, 100))
    table.append(rows(100, 200))
    scan = table.scan(columns=["name"], where="id >= 150 AND score < 90")
    out = scan.to_arrow()
    assert out.column_names == ["name"]
    assert sorted(out.column("name").to_pylist()) == sorted(f"n{i}" for i in range(150, 180))
    assert scan.count() == 30
    assert sum(b.num_rows for b in table.scan().to_batches()) == 200
    assert isinstance(table.scan(where="id < 3").to_pandas(), pd.DataFrame)
    assert table.scan(columns=[], where="id < 7").to_arrow().num_rows == 7
    with pytest.raises(InvalidArgumentError, match="nope"):
        table.scan(columns=["nope"])


def test_pruning_skips_files_by_stats(table):
    for start in range(0, 500, 100):
        table.append(rows(start, start + 100))
    scan = table.scan(where="id BETWEEN 120 AND 130")
    assert len(scan.plan_files()) == 1 and scan.count() == 11


def test_bounds_of_long_strings_are_left_out_of_the_manifest(store):
    """A string bound longer than 256 characters is not kept (a manifest of long keys would
    outweigh the files it lists); a filter on that column reads the file, and finds the row."""
    t = mt.create_table("test://s", pa.schema([("id", pa.int64()), ("s", pa.string())]), store=store)
    long = "x" * 300
    t.append(pa.table({"id": [1, 2], "s": ["a", long]}))
    t.append(pa.table({"id": [3, 4], "s": ["b", "c"]}))
    first, second = t.manifest().files
    assert (first.stats["s"].min, first.stats["s"].max) == (None, None) and first.stats["s"].null_count == 0
    assert (second.stats["s"].min, second.stats["s"].max) == ("b", "c")
    assert t.scan(where=f"s = '{long}'").to_arrow().column("id").to_pylist() == [2]


def test_time_travel_by_version_and_timestamp(table):
    table.append(rows(0, 10))
    time.sleep(0.01)
    middle = dt.datetime.now(dt.UTC)
    time.sleep(0.01)
    table.append(rows(10, 20))
    assert table.scan(version=1).count() == 10
    assert table.scan(version=0).count() == 0
    assert table.scan(as_of=middle).count() == 10
    assert table.scan(as_of=middle.isoformat()).count() == 10
    assert table.scan(as_of=dt.datetime.now(dt.UTC)).count() == 20
    with pytest.raises(VersionNotFoundError):
        table.scan(version=3)
    with pytest.raises(VersionNotFoundError):
        table.scan(as_of=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))


def test_history_newest_first(table):
    table.append(rows(0, 1))
    table.append(rows(1, 3))
    history = table.history()
    assert [h.version for h in history] == [2, 1, 0]
    assert [h.operation for h in history] == ["append", "append", "create"]
    assert history[0].metrics["rows_added"] == 2
    assert history[0].timestamp >= history[1].timestamp
    assert len(table.history(limit=1)) == 1


def test_rolls_files_at_target_size(store):
    t = mt.create_table("test://t", SCHEMA, store=store, target_file_size=20_000, row_group_size=8_000)
    info = t.append(rows(0, 20_000))
    assert info.metrics["files_added"] > 1
    files = t.manifest().files
    assert sum(f.rows for f in files) == 20_000
    assert ids(t.scan().to_arrow()) == list(range(20_000))
    # row-group pruning inside a file: the stats of the chosen file let a narrow filter skip groups
    assert t.scan(where="id = 12345").to_arrow().column("id").to_pylist() == [12345]


def test_uri_forms(tmp_path):
    t = mt.create_table(tmp_path / "a", SCHEMA)
    t.append(rows(0, 2))
    assert mt.open_table(f"file://{tmp_path}/a").scan().count() == 2
    assert isinstance(t.store.inner, LocalStore)  # inside the retrying wrapper
    with pytest.raises(InvalidArgumentError, match="unsupported URI scheme 'hdfs'"):
        mt.open_table("hdfs://bucket/x")
    with pytest.raises(InvalidArgumentError, match="unknown table options"):
        mt.create_table(tmp_path / "b", SCHEMA, target_size=3)

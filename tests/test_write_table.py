"""``mt.write_table`` (a table from data in one call) and writes from any object with
``__arrow_c_stream__`` (Polars, DuckDB), issue 23 item 1."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, SchemaMismatchError, TableExistsError


def ids(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("make", [
    lambda: pa.table({"id": [1, 2], "name": ["a", "b"]}),
    lambda: pl.DataFrame({"id": [1, 2], "name": ["a", "b"]}),
    lambda: duckdb.connect().sql("SELECT * FROM (VALUES (1::BIGINT, 'a'), (2, 'b')) t(id, name)"),
    lambda: pd.DataFrame({"id": [1, 2], "name": ["a", "b"]}),
    lambda: [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
], ids=["arrow", "polars", "duckdb", "pandas", "rows"])
def test_write_table_creates_the_table_from_the_data(tmp_path: Path, make):
    data = make()
    table = mt.write_table(tmp_path / "t", data)
    text = pa.large_string() if isinstance(data, pd.DataFrame) else pa.string()  # Polars' string_view decoded
    assert table.schema == pa.schema([("id", pa.int64()), ("name", text)])
    assert table.version == 1 and table.to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_modes(tmp_path: Path):
    uri = tmp_path / "t"
    mt.write_table(uri, pa.table({"id": [1]}), mode="append")  # missing: created
    with pytest.raises(TableExistsError, match="mode='append'"):
        mt.write_table(uri, pa.table({"id": [2]}))
    table = mt.write_table(uri, pl.DataFrame({"id": [2, 3]}), mode="append")
    assert ids(table) == [1, 2, 3] and table.version == 2
    mt.write_table(uri, pl.DataFrame({"id": [9], "new": ["x"]}), mode="overwrite", schema_mode="merge")
    assert table.to_arrow().to_pylist() == [{"id": 9, "new": "x"}]
    with pytest.raises(SchemaMismatchError, match="unknown columns"):
        mt.write_table(uri, pa.table({"id": [1], "other": [1]}), mode="append")
    with pytest.raises(InvalidArgumentError, match="mode must be one of"):
        mt.write_table(uri, pa.table({"id": [1]}), mode="upsert")
    assert table.version == 3


def test_creation_options_apply_when_created(tmp_path: Path):
    table = mt.write_table(tmp_path / "t", pa.table({"id": [1]}), format_version=1, target_file_size=1 << 20)
    assert table.manifest().format_version == 1
    mt.write_table(tmp_path / "t", pa.table({"id": [2]}), mode="append", format_version=1)
    assert ids(table) == [1, 2]


def test_nothing_is_created_from_data_without_types(tmp_path: Path):
    with pytest.raises(SchemaMismatchError, match="only nulls"):
        mt.write_table(tmp_path / "t", pa.table({"id": [1], "x": pa.nulls(1)}))
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_append_overwrite_upsert_take_arrow_streams(tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    table.append(pl.DataFrame({"id": [1, 2], "name": ["a", "b"]}))
    con = duckdb.connect()
    table.upsert(con.sql("SELECT 2::BIGINT AS id, 'B' AS name UNION ALL SELECT 3, 'c'"), on=["id"])
    assert table.to_arrow().sort_by("id").column("name").to_pylist() == ["a", "B", "c"]
    table.overwrite(pl.DataFrame({"id": [7], "name": ["z"]}).lazy().collect())
    assert table.to_arrow().to_pylist() == [{"id": 7, "name": "z"}]
    table.append(pl.DataFrame({"id": [8], "name": ["y"], "extra": [1.5]}), schema_mode="merge")
    assert table.schema.names == ["id", "name", "extra"]
    with pytest.raises(SchemaMismatchError, match="cannot write a object"):
        table.append(object())

"""``mt.write_table`` (a table from data in one call) and writes from any object with
``__arrow_c_stream__`` (Polars, DuckDB), issue 23 item 1."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, SchemaMismatchError, TableExistsError, TableNotFoundError


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
    mt.write_table(uri, pa.table({"id": [1], "new": ["y"], "other": [1]}), mode="append", schema_mode="merge")
    assert table.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "new": "y", "other": 1},
                                                            {"id": 9, "new": "x", "other": None}]


def test_creation_options_apply_when_created(tmp_path: Path):
    table = mt.write_table(tmp_path / "t", pa.table({"id": [1]}), format_version=1, target_file_size=1 << 20)
    assert table.manifest().format_version == 1
    laid_out = mt.write_table(tmp_path / "l", pa.table({"id": [3, 1, 2]}),
                              properties={"sort_by": ["id"], "bloom_filter_columns": ["id"]})
    (written,) = laid_out.manifest().files
    assert pq.read_table(tmp_path / "l" / written.path).column("id").to_pylist() == [1, 2, 3]  # sorted as written
    assert pq.ParquetFile(tmp_path / "l" / written.path).metadata.row_group(0).column(0).bloom_filter_offset
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


# --- issue 30: a failed write leaves no table ------------------------------------------------
def _failing_stream() -> pa.RecordBatchReader:
    """A good batch, then one whose ids are text: it fails while the files are written."""
    schema = pa.schema([("id", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array(range(1000), pa.int64())], schema=schema)
        raise OSError("the source went away")
    return pa.RecordBatchReader.from_batches(schema, batches())


@pytest.mark.parametrize("data, kwargs, error, match", [
    ([{"id": 1, "name": "a\ud800"}], {}, SchemaMismatchError, r"column 'name' .* lone surrogate '\\ud800'"),
    ([{"id": 2**64}], {}, SchemaMismatchError, "column 'id' holds the integer 18446744073709551616, beyond int64"),
    ([{"id": -(2**63) - 1}], {"mode": "append"}, SchemaMismatchError, "beyond int64"),
    ([{"id": 1}], {"schema_mode": "bogus"}, InvalidArgumentError, "schema_mode must be None or 'merge'"),
    ([{"id": 1}], {"mode": "overwrite", "format_version": 4}, InvalidArgumentError, "format_version must be 1 to 3"),
    (pa.table({"id": [1.0, float("nan")]}).cast(pa.schema([("id", pa.float32())])), {"mirrors": ["hudi"]},
     InvalidArgumentError, "hudi"),
], ids=["surrogate", "beyond-int64", "below-int64", "schema-mode", "format-version", "mirror"])
def test_a_refused_write_creates_no_table(tmp_path: Path, data, kwargs, error, match):
    """Each was a raw UnicodeEncodeError or OverflowError, or left an empty table behind."""
    with pytest.raises(error, match=match):
        mt.write_table(tmp_path / "t", data, **kwargs)
    assert not (tmp_path / "t").exists()


def test_a_stream_that_fails_midway_leaves_no_table(tmp_path: Path):
    """The rows are written before the table is created: a failure leaves neither a table nor
    a data file (the version 0 of the old order stayed, empty)."""
    with pytest.raises(OSError, match="went away"):
        mt.write_table(tmp_path / "t", _failing_stream())
    assert not any(path.is_file() for path in (tmp_path / "t").rglob("*"))
    with pytest.raises(TableNotFoundError):
        mt.open_table(tmp_path / "t")


def test_a_table_created_meanwhile_takes_the_rows_if_it_has_the_columns(tmp_path: Path, monkeypatch):
    """Two writers creating one table: the one that loses the create adds its files to the
    winner's table when the columns are the same, and refuses (writing nothing) otherwise."""
    from manifest_table import entry_points
    from manifest_table.operations import create as create_module

    real = create_module.create
    for other, mode, expected in ((pa.schema([("id", pa.int64())]), "append", [1, 2, 3]),
                                  (pa.schema([("id", pa.int64())]), "overwrite", [1, 2]),  # in place of its rows
                                  (pa.schema([("id", pa.int32())]), "append", None)):
        uri = tmp_path / f"{other.field('id').type}-{mode}"

        def racing(table, empty, other=other, uri=uri):
            monkeypatch.setattr(create_module, "create", real)  # the other writer creates it first
            mt.create_table(uri, other).append(pa.table({"id": pa.array([3], other.field("id").type)}))
            return real(table, empty)
        monkeypatch.setattr(create_module, "create", racing)
        if expected is None:
            with pytest.raises(SchemaMismatchError, match="created at .* meanwhile; nothing was written"):
                entry_points.write_table(uri, pa.table({"id": [1, 2]}), mode="append")
            assert ids(mt.open_table(uri)) == [3]
            written = {f"data/{p.name}" for p in (uri / "data").iterdir()}
            assert written == {f.path for f in mt.open_table(uri).manifest().files}  # its files removed
        else:
            assert ids(entry_points.write_table(uri, pa.table({"id": [1, 2]}), mode=mode)) == expected

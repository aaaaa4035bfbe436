"""Every Arrow type is supported end to end or refused when a column is made (issue 24,
docs/writing.md "Column types"): for each supported type, a format-v2 table whose files sit
in segments reads back exactly from a fresh handle, through filters, a delete, an update, an
upsert and a compaction, and in DuckDB and Polars; each refused type fails at ``create_table``,
``add_column`` and the CLI with a typed error naming the column, the type and what to use
instead, and ``schema_mode="merge"`` adds encoded columns (a pandas categorical) as their
value type. The Spark reads of the same types are in tests/spark/test_spark_column_types.py."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import InvalidArgumentError, SchemaMismatchError
from manifest_table.expressions import Expr, col
from manifest_table.format.column_types import parquet_form
from manifest_table.storage import LocalStore
from tests.catalog import assert_rejected
from tests.column_types import REFUSED, SUPPORTED, comparable, refused_values, values

ROWS = 8


def model(dtype: pa.DataType) -> pa.Table:
    """Ids 0-7, ``c`` distinct and ordered like the ids, null at id 5."""
    column = values(dtype, range(ROWS))
    column = pa.concat_arrays([column.slice(0, 5), pa.nulls(1, dtype), column.slice(6)])
    return pa.table({"id": pa.array(range(ROWS), pa.int64()), "c": column})


def same_rows(got: pa.Table, expected: pa.Table) -> None:
    """``got`` (a reader's answer, its types that reader's) holds exactly ``expected``'s rows."""
    got = got.sort_by("id").cast(expected.schema)
    assert got.equals(expected.sort_by("id")), (got.to_pylist(), expected.to_pylist())


def filters(dtype: pa.DataType, data: pa.Table) -> list[Expr]:
    """Filters on the id, on nulls of ``c``, and comparisons of ``c`` with its value at id 3."""
    found = [col("id") < 3, col("c").is_null(), col("c").is_not_null() & (col("id") > 4)]
    if comparable(dtype):
        literal = data.column("c")[3]
        if pa.types.is_timestamp(dtype):  # (Python datetimes hold microseconds)
            literal = literal.cast(pa.timestamp("us", dtype.tz), safe=False)
        value = literal.as_py()
        found += [col("c") == value, col("c") >= value, col("c") < value, col("c").isin([value])]
    return found


NESTED_PARQUET_FORMS = {
    "large_list_of_seconds": pa.large_list(pa.timestamp("s")),
    "map_of_seconds": pa.map_(pa.string(), pa.time32("s")),
    "sorted_map_of_dates": pa.map_(pa.string(), pa.date64(), keys_sorted=True),
}
"""Supported types beyond tests/column_types.py (whose committed conformance corpus they would
change), each holding a type Parquet keeps in another form, inside a nesting SUPPORTED nests
no such type in."""


@pytest.mark.parametrize("name", [*SUPPORTED, *NESTED_PARQUET_FORMS])
def test_a_supported_type_works_end_to_end_from_fresh_handles(tmp_path: Path, name: str) -> None:
    """Tiny tail limit: the files (and their statistics) sit in segments, which a process that
    did not write them decodes (on main, second-unit timestamps and date64 made the segment
    unreadable, and time32[s] read back as time32[ms])."""
    dtype = SUPPORTED.get(name) or NESTED_PARQUET_FORMS[name]
    uri = str(tmp_path / name)
    expected = model(dtype)
    table = mt.create_table(uri, pa.schema([("id", pa.int64()), ("c", dtype)]), properties={"tail_limit": 2})
    for start in range(0, ROWS, 2):
        table.append(expected.slice(start, 2))
    assert mt.open_table(uri).manifest().index.segments

    same_rows(mt.open_table(uri).scan().to_arrow(), expected)
    assert mt.open_table(uri).scan().to_arrow().schema == expected.schema  # the declared types, exactly
    for where in filters(dtype, expected):
        kept = expected.filter(where.evaluate(expected))
        assert mt.open_table(uri).scan(where=where).to_arrow().sort_by("id").equals(kept), str(where)
        assert mt.open_table(uri).scan(where=where).count() == kept.num_rows, str(where)

    mt.open_table(uri).delete("id = 1")
    mt.open_table(uri).update({"id": 100}, where="id = 2")
    replacement = expected.slice(0, 1).set_column(1, "c", expected.column("c").take([7]))  # id 0, c of id 7
    mt.open_table(uri).upsert(replacement, on=["id"])
    mt.open_table(uri).compact(min_deleted_fraction=0.01)
    ids = [i for i in range(ROWS) if i != 1]
    expected = pa.concat_tables([replacement, expected.take([i for i in ids if i != 0])])
    expected = expected.set_column(0, "id", pa.array([100 if i == 2 else i for i in ids], pa.int64()))
    fresh = mt.open_table(uri)
    assert fresh.scan().to_arrow().sort_by("id").equals(expected.sort_by("id"))

    con = duckdb.connect()
    fresh.to_duckdb(con, "t")
    same_rows(con.sql("SELECT * FROM t").arrow().read_all(), expected)
    same_rows(fresh.to_polars().collect().to_arrow(), expected)
    assert fresh.to_polars().filter(pl.col("c").is_null()).collect().height == 1


@pytest.mark.parametrize("dtype", [pa.timestamp("s"), pa.timestamp("s", "UTC"), pa.date64()], ids=str)
def test_a_table_stays_readable_once_its_default_tail_flushes(tmp_path: Path, dtype: pa.DataType) -> None:
    """The issue's reproduction: 34 one-row appends flush the default tail of 32 entries into a
    segment, which every other handle then failed to decode."""
    uri = str(tmp_path / "t")
    table = mt.create_table(uri, pa.schema([("id", pa.int64()), ("c", dtype)]))
    rows = model(dtype)
    for i in range(34):
        table.append(rows.slice(i % ROWS, 1).set_column(0, "id", pa.array([i], pa.int64())))
    assert mt.open_table(uri).manifest().index.segments
    assert mt.open_table(uri).scan(where="id < 5").count() == 5


def test_parquet_gives_back_each_supported_type_or_its_parquet_form() -> None:
    """What the readers of our own Parquet (segments, data files) rely on: pyarrow reads a
    supported type back as itself or as ``parquet_form`` of it (second units as milliseconds,
    date64 as date32), with the same values."""
    table = pa.table({name: values(dtype, range(3)) for name, dtype in SUPPORTED.items()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    back = pq.read_table(pa.BufferReader(sink.getvalue()))
    for name, dtype in SUPPORTED.items():
        assert back.schema.field(name).type in (dtype, parquet_form(dtype)), name
        assert back.column(name).cast(dtype).equals(table.column(name)), name
    assert parquet_form(pa.timestamp("s", "Asia/Tokyo")) == pa.timestamp("ms", "Asia/Tokyo")
    assert parquet_form(SUPPORTED["struct"]) == pa.struct([("a", pa.int64()), ("b", pa.timestamp("ms", "UTC"))])


def test_values_parquet_would_change_are_refused_at_append(tmp_path: Path) -> None:
    """Parquet keeps date64 as days and seconds as milliseconds: a date64 holding a time of
    day, or seconds past the milliseconds' range, would read back as something else."""
    table = mt.create_table(str(tmp_path / "t"), pa.schema([("d", pa.date64()), ("s", pa.timestamp("s"))]))
    store = LocalStore(str(tmp_path / "t"))
    noon = pa.table({"d": pa.array([86_400_000 + 43_200_000], pa.date64()), "s": pa.array([0], pa.timestamp("s"))})
    assert_rejected(store, SchemaMismatchError, lambda: table.append(noon), match="column 'd' .* would lose data")
    far = pa.table({"d": pa.array([0], pa.date64()), "s": pa.array([2**62], pa.timestamp("s"))})
    assert_rejected(store, SchemaMismatchError, lambda: table.append(far), match="column 's'")


def _column_refused(name: str) -> str:
    dtype, instead = REFUSED[name]
    return rf"column 'c' has type {re.escape(str(dtype))}, which tables do not support.*use {re.escape(instead)}"


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_type_is_refused_at_create_and_add_column(tmp_path: Path, name: str) -> None:
    dtype, _ = REFUSED[name]
    with pytest.raises(InvalidArgumentError, match=_column_refused(name)):
        mt.create_table(str(tmp_path / "new"), pa.schema([("id", pa.int64()), ("c", dtype)]))
    assert not (tmp_path / "new").exists()
    table = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))

    def add() -> None:
        with table.update_schema() as update:
            update.add_column("c", dtype)
    assert_rejected(LocalStore(str(tmp_path / "t")), InvalidArgumentError, add, match=_column_refused(name))


def test_a_map_is_refused_by_its_key_type_too(tmp_path: Path) -> None:
    for dtype in (pa.map_(pa.float16(), pa.int64()), pa.map_(pa.int64(), pa.float16())):
        with pytest.raises(InvalidArgumentError, match="column 'c'.*halffloat"):
            mt.create_table(str(tmp_path / "new"), pa.schema([("id", pa.int64()), ("c", dtype)]))
    assert not (tmp_path / "new").exists()


DECODED = {"dictionary": pa.string(), "string_view": pa.string(), "binary_view": pa.binary(),
           "list_of_dictionary": pa.list_(pa.string())}
"""Refused types ``schema_mode="merge"`` adds as the type of their values."""


@pytest.mark.parametrize("name", REFUSED)
def test_merge_adds_an_encoded_column_by_its_values_and_refuses_the_other_types(tmp_path: Path, name: str) -> None:
    dtype, _ = REFUSED[name]
    table = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    data = pa.table({"id": pa.array(range(4), pa.int64()), "c": refused_values(dtype, 4)})
    if name in DECODED:
        table.append(data, schema_mode="merge")
        fresh = mt.open_table(str(tmp_path / "t"))
        assert fresh.schema.field("c").type == DECODED[name]
        assert fresh.scan().to_arrow().column("c").to_pylist() == data.column("c").to_pylist()
        return
    error, match = (SchemaMismatchError, "hold only nulls") if name == "null" else \
        (InvalidArgumentError, _column_refused(name))
    assert_rejected(LocalStore(str(tmp_path / "t")), error, lambda: table.append(data, schema_mode="merge"),
                    match=match)


def test_merge_of_a_pandas_categorical_adds_a_filterable_column(tmp_path: Path) -> None:
    """``pa.Schema.from_pandas`` makes a categorical a dictionary type, which filters cannot
    compare (issue 18, item 10): merge adds its value type."""
    pd = pytest.importorskip("pandas")
    table = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    table.append(pd.DataFrame({"id": [1, 2, 3], "color": pd.Categorical(["red", "blue", "red"])}),
                 schema_mode="merge")
    assert pa.types.is_string(table.schema.field("color").type) or pa.types.is_large_string(
        table.schema.field("color").type)
    assert mt.open_table(str(tmp_path / "t")).scan(where="color = 'red'").count() == 2
    with pytest.raises(InvalidArgumentError, match=r"column 'color' has type dictionary.*use large_string"):
        mt.create_table(str(tmp_path / "new"), pa.Schema.from_pandas(
            pd.DataFrame({"color": pd.Categorical(["red"])}), preserve_index=False))


def test_a_table_of_an_earlier_release_with_a_dictionary_column_still_takes_appends(tmp_path: Path) -> None:
    """0.2.0 created tables with dictionary, decimal256 and list-view columns and appended to
    them: such tables keep taking appends (``Refusal.appendable``); only new columns are refused."""
    from manifest_table.format.schema import check_schema
    schema = pa.schema([("c", pa.dictionary(pa.int32(), pa.string())), ("d", pa.decimal256(40, 2)),
                        ("l", pa.list_view(pa.int64()))])
    check_schema(schema, appending=True)
    with pytest.raises(InvalidArgumentError, match="column 'c'"):
        check_schema(schema)
    for never in (pa.string_view(), pa.null(), pa.float16(), pa.uuid()):  # 0.2.0 could not append these either
        with pytest.raises(InvalidArgumentError, match="column 'x'"):
            check_schema(pa.schema([("x", never)]), appending=True)


def test_the_cli_creates_like_a_parquet_file_by_its_value_types_and_refuses_the_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    categorical = tmp_path / "categorical.parquet"
    pq.write_table(pa.table({"id": [1], "color": pa.array(["red"]).dictionary_encode()}), categorical)
    assert main(["create", str(tmp_path / "a"), "--like", str(categorical)]) == 0
    assert mt.open_table(str(tmp_path / "a")).schema == pa.schema([("id", pa.int64()), ("color", pa.string())])
    halves = tmp_path / "halves.parquet"
    pq.write_table(pa.table({"id": [1], "h": pa.array([1.5], pa.float16())}), halves)
    capsys.readouterr()
    assert main(["create", str(tmp_path / "b"), "--like", str(halves)]) == 1
    assert "column 'h' has type halffloat, which tables do not support" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()

"""What ``append`` accepts: pandas frames round-trip (what ``to_pandas()`` returned appends
back unchanged, int columns with nulls included), and lists of dicts follow the same
exact-conversion rules as Arrow input, naming the column of a bad value."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, SchemaMismatchError

EVERY_TYPE = pa.schema(
    [
        ("i64", pa.int64()),
        ("i32", pa.int32()),
        ("i8", pa.int8()),
        ("u64", pa.uint64()),
        ("f64", pa.float64()),
        ("f32", pa.float32()),
        ("flag", pa.bool_()),
        ("s", pa.string()),
        ("ls", pa.large_string()),
        ("bin", pa.binary()),
        ("dec", pa.decimal128(12, 3)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", "UTC")),
        ("naive", pa.timestamp("ns")),
        ("tags", pa.list_(pa.int32())),
        ("point", pa.struct([("x", pa.int16()), ("label", pa.string())])),
    ]
)

ROWS = [
    {
        "i64": -(2**62),
        "i32": 7,
        "i8": -128,
        "u64": 2**40,
        "f64": 0.1,
        "f32": 1.5,
        "flag": True,
        "s": "é'\"",
        "ls": "long",
        "bin": b"\x00\xff",
        "dec": Decimal("-12.345"),
        "day": date(1970, 1, 1),
        "ts": datetime(2024, 3, 31, 1, 30, tzinfo=UTC),
        "naive": datetime(2000, 1, 1, 0, 0, 0, 1),
        "tags": [1, None, 3],
        "point": {"x": -3, "label": None},
    },
    {},  # every column null
    {
        "i64": 5,
        "i32": None,
        "i8": 127,
        "u64": 0,
        "f64": -0.0,
        "f32": None,
        "flag": False,
        "s": "",
        "ls": None,
        "bin": b"",
        "dec": Decimal("0.001"),
        "day": date(2262, 4, 11),
        "ts": None,
        "naive": None,
        "tags": [],
        "point": None,
    },
]


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(str(tmp_path / "t"), EVERY_TYPE)
    t.append(ROWS)
    return t


def test_pandas_round_trip_of_every_stored_type(table: mt.Table) -> None:
    frame = table.scan().to_pandas()
    assert str(frame["i64"].dtype) == "float64"  # pandas holds an int column with nulls as floats
    info = table.append(frame)
    assert info.committed and info.metrics["rows_added"] == 3
    assert table.scan(version=info.version - 1).to_arrow().to_pylist() == table.scan().to_arrow().slice(3).to_pylist()
    assert table.scan().to_arrow().schema == EVERY_TYPE


def test_pandas_float_column_with_a_fraction_is_refused_for_an_int_column(table: mt.Table) -> None:
    frame = table.scan().to_pandas()
    frame.loc[0, "i32"] = 7.5
    with pytest.raises(SchemaMismatchError, match=r"column 'i32' is double .* only whole numbers"):
        table.append(frame)


def test_pandas_whole_float_out_of_range_is_refused(table: mt.Table) -> None:
    frame = table.scan().to_pandas()
    frame["i8"] = [1.0, np.nan, 300.0]
    with pytest.raises(SchemaMismatchError, match="column 'i8'"):
        table.append(frame)


def test_dicts_take_exact_conversions(table: mt.Table) -> None:
    table.append(
        [
            {
                "f64": 3,
                "f32": np.int64(2),
                "dec": 12,
                "i64": np.int32(4),
                "u64": 2**64 - 1,
                "flag": np.bool_(True),
                "ts": datetime(2024, 1, 1),
                "naive": datetime(2024, 1, 1),
                "tags": (1, 2),
            }
        ]
    )
    assert table.scan().to_arrow().to_pylist()[-1] == {
        **{name: None for name in EVERY_TYPE.names},
        "f64": 3.0,
        "f32": 2.0,
        "dec": Decimal("12.000"),
        "i64": 4,
        "flag": True,
        "u64": 2**64 - 1,
        "ts": datetime(2024, 1, 1, tzinfo=UTC),
        "naive": datetime(2024, 1, 1),
        "tags": [1, 2],
    }


@pytest.mark.parametrize(
    "row, where",
    [
        ({"i64": 1.5}, r"column 'i64' has type int64 but row 1 holds 1.5 \(float\)"),
        ({"i64": 2.0}, r"column 'i64' has type int64 but row 1 holds 2.0"),
        ({"i32": np.float64(3.0)}, r"column 'i32'"),
        ({"i8": 128}, r"column 'i8' \(int8\)"),
        ({"u64": -1}, r"column 'u64' \(uint64\)"),
        ({"dec": 1.5}, r"column 'dec' .* holds 1.5"),
        ({"dec": Decimal("1.0001")}, r"column 'dec' \(decimal128\(12, 3\)\)"),
        ({"flag": 1}, r"column 'flag' .* holds 1"),
        ({"f64": True}, r"column 'f64' .* holds True"),
        ({"s": b"bytes"}, r"column 's' .* holds b'bytes'"),
        ({"day": "2024-01-01"}, r"column 'day' .* holds '2024-01-01'"),
        ({"ts": 1700000000}, r"column 'ts' .* holds 1700000000"),
        ({"tags": [1, "2"]}, r"column 'tags' .* holds '2'"),
        ({"point": {"x": 1.5}}, r"column 'point.x' .* holds 1.5"),
    ],
)
def test_dicts_with_a_bad_value_name_the_column_and_write_nothing(table: mt.Table, row: dict, where: str) -> None:
    before = table.version
    with pytest.raises(SchemaMismatchError, match=where):
        table.append([{"i64": 1}, row])
    assert table.version == before
    assert {info.key for info in table.store.list("data/")} == {f.path for f in table.manifest().files}


def test_pandas_arrow_dtypes_round_trip_integers_beyond_float_precision(tmp_path: Path) -> None:
    """float64 holds integers exactly only up to 2**53; Arrow-backed pandas columns keep all."""
    import pandas as pd

    t = mt.create_table(str(tmp_path / "big"), pa.schema([("u", pa.uint64()), ("i", pa.int64())]))
    t.append([{"u": 2**63 + 1, "i": 2**53 + 1}, {}])
    info = t.append(t.scan().to_pandas(types_mapper=pd.ArrowDtype))
    assert t.scan().to_arrow().to_pylist() == [{"u": 2**63 + 1, "i": 2**53 + 1}, {"u": None, "i": None}] * 2
    assert info.metrics["rows_added"] == 2


FIRST_SECOND, LAST_SECOND = -62_135_596_800, 253_402_300_799
"""0001-01-01 00:00:00 and 9999-12-31 23:59:59 UTC, in seconds from 1970."""
CALENDAR_EDGES = [
    (pa.date32(), -719_162, 2_932_896),
    (pa.date64(), -719_162 * 86_400_000, 2_932_896 * 86_400_000),
    (pa.timestamp("s"), FIRST_SECOND, LAST_SECOND),
    (pa.timestamp("ms", "America/New_York"), FIRST_SECOND * 1000, LAST_SECOND * 1000 + 999),
    (pa.timestamp("us", "Asia/Kolkata"), FIRST_SECOND * 10**6, LAST_SECOND * 10**6 + 999_999),
]


def _one_entry_maps(values: pa.Array) -> pa.MapArray:
    """A map per value: {"k": value}."""
    return pa.MapArray.from_arrays(pa.array(range(len(values) + 1), pa.int32()), pa.array(["k"] * len(values)), values)


@pytest.mark.parametrize("arrow_type, first, last", CALENDAR_EDGES, ids=lambda v: str(v))
def test_dates_and_times_of_the_years_1_to_9999_append_and_others_are_refused(
    tmp_path: Path, arrow_type: pa.DataType, first: int, last: int
) -> None:
    """Python's ``datetime`` holds the years 1-9999 (UTC for a zoned value), as Delta and
    Spark do: the edges append, read and filter; a value past them (top level, in a struct,
    in a list, as a map's value) is a ``SchemaMismatchError`` naming the column, with nothing
    written (it was an ``OverflowError`` from the statistics, a zoned one in the year 1 also
    from the overwrite's error message)."""
    schema = pa.schema(
        [("id", pa.int64()), ("t", arrow_type), ("s", pa.struct([("t", arrow_type)])), ("l", pa.list_(arrow_type)),
         ("m", pa.map_(pa.string(), arrow_type))]
    )
    table = mt.create_table(tmp_path / "t", schema)
    edges = pa.array([first, last], arrow_type)
    good = pa.table(
        {"id": [1, 2], "t": edges, "s": pa.StructArray.from_arrays([edges], ["t"]), "l": [[v] for v in edges],
         "m": _one_entry_maps(edges)},
        schema=schema,
    )
    table.append(good)
    files = sorted((tmp_path / "t" / "data").iterdir())
    assert table.scan().to_arrow().sort_by("id").equals(good)
    assert table.scan(where="t IS NOT NULL").count() == 2
    with pytest.raises(mt.errors.InvalidArgumentError, match="not satisfy") as raised:
        table.overwrite(good, where="t IS NULL")  # its message shows a row's t: the first edge
    assert "(e.g. the row with t = " in str(raised.value)
    for column in ("t", "s", "l", "m"):
        step = 86_400_000 if pa.types.is_date64(arrow_type) else 1  # (date64: whole days only)
        for beyond in (first - step, last + step):
            value = pa.array([beyond], arrow_type)
            row = {"id": [3], "t": edges[:1], "s": pa.StructArray.from_arrays([edges[:1]], ["t"]), "l": [[edges[0]]],
                   "m": _one_entry_maps(edges[:1])}
            row[column] = {"t": value, "s": pa.StructArray.from_arrays([value], ["t"]), "l": [[value[0]]],
                           "m": _one_entry_maps(value)}[column]
            with pytest.raises(SchemaMismatchError, match=f"column '{column}.*outside the years 1-9999"):
                table.append(pa.table(row, schema=schema))
    assert table.version == 1 and sorted((tmp_path / "t" / "data").iterdir()) == files


NESTED = pa.schema(
    [
        ("pair", pa.list_(pa.int64(), 2)),
        ("counts", pa.map_(pa.string(), pa.int64())),
        ("days", pa.map_(pa.string(), pa.date32())),
    ]
)


@pytest.mark.parametrize(
    "row, where",
    [
        ({"pair": [1.5, 2]}, r"column 'pair' has type int64 but row 0 holds 1.5"),
        ({"pair": [True, 2]}, r"column 'pair' .* holds True"),
        ({"counts": [("k", 1.5)]}, r"column 'counts.value' has type int64 but row 0 holds 1.5"),
        ({"counts": {"k": 2.0}}, r"column 'counts.value' .* holds 2.0"),
        ({"counts": [(1, 2)]}, r"column 'counts.key' has type string but row 0 holds 1"),
        ({"days": {"k": datetime(2024, 1, 1, 5)}}, r"column 'days.value' has type date32\[day\] .* holds datetime"),
    ],
)
def test_dicts_check_fixed_size_lists_and_maps_element_by_element(tmp_path: Path, row: dict, where: str) -> None:
    """On main Arrow's conversion stored 1.5 as 1 and a datetime as its date inside these two."""
    table = mt.create_table(str(tmp_path / "t"), NESTED)
    with pytest.raises(SchemaMismatchError, match=where):
        table.append([row])
    with pytest.raises(InvalidArgumentError, match=where):  # the same check for update's values
        table.update(values=row)
    table.append([{"pair": [1, 2], "counts": {"k": 1}, "days": [("d", date(2024, 1, 1))]}])
    assert table.to_arrow().to_pylist() == [{"pair": [1, 2], "counts": [("k", 1)], "days": [("d", date(2024, 1, 1))]}]

"""Corpus cases of every supported column type (tests/column_types.py): their values in data
files, their statistics in file entries (v1, and v2 keyed by field id) and as typed columns
of segments, and the edge values each type has (NaN, -0.0, infinities, long strings, zones
across a daylight-saving change, second units that Parquet keeps as milliseconds)."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from tests.column_types import SUPPORTED, values
from tests.conformance.registry import TINY, Site, case


def typed(columns: dict[str, pa.DataType], ids: range | list[int], nulls: bool = True) -> pa.Table:
    """``id`` and one column per type, valued by id (a null in every fourth row)."""
    ids = list(ids)
    data = {"id": pa.array(ids, pa.int64())}
    for name, dtype in columns.items():
        array = values(dtype, ids)
        if nulls:
            array = pa.array([None if i % 4 == 3 else v for i, v in zip(ids, array.to_pylist())], dtype)
        data[name] = array
    return pa.table(data)


def history(site: Site, columns: dict[str, pa.DataType], appends: int = 3, **options: object) -> None:
    """Appends of five rows and a delete: stats of each type in the tail (or segments, or v1
    files)."""
    table = site.table(pa.schema([("id", pa.int64()), *columns.items()]), **options)
    for start in range(0, 5 * appends, 5):
        table.append(typed(columns, range(start, start + 5)))
    table.delete("id = 2 OR id = 6")


def of(*names: str) -> dict[str, pa.DataType]:
    return {name: SUPPORTED[name] for name in names}


FAMILIES = {
    "integers": of(*(f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64))),
    "decimals": {"decimal128": SUPPORTED["decimal128"], "decimal_9_3": pa.decimal128(9, 3)},
    "binary": of("binary", "large_binary", "fixed_size_binary"),
    "dates-times": of("date32", "date64", "time32_s", "time32_ms", "time64_us", "time64_ns"),
    "timestamps": of(*(f"timestamp_{u}" for u in ("s", "ms", "us", "ns"))),
    "timestamps-zoned": of(*(f"timestamp_{u}_{z}" for u in ("s", "ms", "us", "ns") for z in ("utc", "berlin"))),
    "durations": of(*(f"duration_{u}" for u in ("s", "ms", "us", "ns"))),
    "nested": of("list", "large_list", "fixed_size_list", "struct", "map"),
}

for family, columns in FAMILIES.items():
    case(
        f"types-{family}",
        f"Columns of the {family.replace('-', ' and ')} types: values, nulls and their statistics.",
        "column types",
        family,
    )(lambda site, columns=columns: history(site, columns))


@case(
    "types-floats",
    "float32 and float64 with NaN (no max in the stats), -0.0, infinities and nulls.",
    "column types",
    "floats",
    "NaN",
)
def _(site: Site) -> None:
    schema = pa.schema([("id", pa.int64()), ("f32", pa.float32()), ("f64", pa.float64())])
    table = site.table(schema)
    edges = [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), None, 1.5, -2.25]
    table.append(pa.table({"id": range(8), "f32": edges, "f64": edges}, schema=schema))
    table.append(pa.table({"id": range(8, 11), "f32": [1.0, 2.0, 3.0], "f64": [None, None, None]}, schema=schema))
    table.delete("id = 1")


@case(
    "types-strings",
    "string and large_string: empty, non-ASCII, astral-plane, and longer than 256 characters (no min/max kept).",
    "column types",
    "strings",
    "long strings",
)
def _(site: Site) -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("ls", pa.large_string()), ("b", pa.bool_())])
    table = site.table(schema)
    texts = ["", "é", "日本", "🦆 duck", "x" * 300, None, "zz"]
    table.append(
        pa.table(
            {"id": range(7), "s": texts, "ls": texts[::-1], "b": [True, False, None, True, False, True, None]},
            schema=schema,
        )
    )
    short = ["a", "b", None]
    table.append(pa.table({"id": range(7, 10), "s": short, "ls": short, "b": [False] * 3}, schema=schema))
    table.delete("s = 'é'")


@case(
    "types-awkward-names",
    "Column names a dotted path would confuse (a column 'a.b' beside a struct 'a' with field "
    "'b'), names with spaces, quotes and non-ASCII letters.",
    "column types",
    "column names",
    "nested",
)
def _(site: Site) -> None:
    struct = pa.struct([("b", pa.int64())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("a.b", pa.int64()),
            ("a", struct),
            ("with space", pa.string()),
            ('quote"d', pa.decimal128(10, 1)),
            ("größe", pa.int32()),
        ]
    )
    table = site.table(schema, properties=TINY)
    for start in (0, 3, 6):
        ids = range(start, start + 3)
        table.append(
            pa.table(
                {
                    "id": ids,
                    "a.b": [i * 100 for i in ids],
                    "a": [{"b": -i} for i in ids],
                    "with space": [f"w{i}" for i in ids],
                    'quote"d': [Decimal(i) / 10 for i in ids],
                    "größe": list(ids),
                },
                schema=schema,
            )
        )
    table.delete('"a.b" = 400')


@case(
    "types-all-in-segments",
    "Every supported type, under tiny limits: the statistics live as typed min_/max_/nulls_ "
    "columns of segments (second units as Parquet keeps them, milliseconds and days).",
    "column types",
    "segments",
    "format v2",
)
def _(site: Site) -> None:
    history(site, dict(SUPPORTED), appends=2, properties={**TINY, "tail_limit": 1})


@case(
    "types-all-v1",
    "Every supported type in a format-1 table (statistics keyed by column name).",
    "column types",
    "format v1",
)
def _(site: Site) -> None:
    history(site, dict(SUPPORTED), appends=2, format_version=1)

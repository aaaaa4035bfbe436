"""Pruning with literals a column's type cannot hold exactly: fractions on integer columns,
sub-unit instants on coarse timestamps, zoned and naive literals, values beyond the type's
range, decimals of another scale.

Every layer that skips data (the vectorised segment pre-filter, segment summaries, file
stats, Parquet row-group stats) may only skip what the exact check skips. The property test
holds the pre-filter (expressions/stats_arrow.py) against ``may_match``; the end-to-end tests
read, count, delete and update a v2 table whose files sit in segments, against the row filter
evaluated over the same rows."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import manifest_table as mt
from manifest_table.errors import InvalidFilterError
from manifest_table.expressions import ColumnStats, Comparison, In, parse
from manifest_table.expressions.stats_arrow import stats_filter
from manifest_table.format.stats import instant_type
from manifest_table.storage import MemoryStore

EXAMPLES = int(os.environ.get("MT_PRUNING_EXAMPLES", "400"))
"""Random cases of the pre-filter property; set MT_PRUNING_EXAMPLES for a longer run."""
UTC = dt.UTC
TYPES = [
    pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.uint64(),
    pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us"), pa.timestamp("ns"),
    pa.timestamp("s", "UTC"), pa.timestamp("ms", "Europe/Paris"), pa.timestamp("ns", "America/New_York"),
    pa.date32(), pa.date64(), pa.decimal128(5, 2), pa.decimal128(38, 10), pa.decimal256(40, 0),
    pa.string(), pa.large_string(),
]
ZONES = st.sampled_from([None, UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)),
                         dt.timezone(-dt.timedelta(hours=8))])
FRACTIONS = st.sampled_from([Decimal("0"), Decimal("0.5"), Decimal("-0.5"), Decimal("1E-30"),
                             Decimal("-1E-30"), Decimal("0.999"), Decimal("0.001"), Decimal("0.0049")])


def _type_range(dtype: pa.DataType) -> tuple[int, int]:
    """The physical values a column of ``dtype`` is drawn from: the integer type's whole
    range, years 1900-2100 for instants and dates."""
    if pa.types.is_integer(dtype):
        bits = dtype.bit_width
        return (0, 2**bits - 1) if pa.types.is_unsigned_integer(dtype) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_timestamp(dtype):
        per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[dtype.unit]
        return -2208988800 * per_second, 4102444800 * per_second
    if pa.types.is_date(dtype):  # days (date64 holds them as milliseconds)
        return -25567, 47482
    digits = 10 ** (dtype.precision if pa.types.is_decimal(dtype) else 4) - 1
    return -digits, digits


def _values(dtype: pa.DataType, physical: list[int | None]) -> pa.Array:
    """Column values of ``dtype`` (as segments store them: zoned instants in UTC)."""
    if pa.types.is_decimal(dtype):
        return pa.array([None if p is None else Decimal(f"{p}E-{dtype.scale}") for p in physical], dtype)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return pa.array([None if p is None else f"{p + 10**4:05d}" for p in physical], dtype)
    if pa.types.is_integer(dtype):
        return pa.array(physical, dtype)
    if pa.types.is_date(dtype):
        return pa.array(physical, pa.int32()).cast(pa.date32()).cast(dtype)
    return pa.array(physical, pa.int64()).cast(instant_type(dtype))


@st.composite
def literal_near(draw: st.DrawFn, value: object) -> object:
    """A literal of any kind near ``value`` (a Python value of the column), often one the
    type cannot hold."""
    if isinstance(value, str):
        return draw(st.sampled_from([value, value + "\x00", value[:-1], value + "0", "", "\U0010ffff"]))
    if isinstance(value, Decimal | int):
        with decimal.localcontext(prec=100):
            exact = Decimal(value) + draw(FRACTIONS) + draw(st.sampled_from([0, 1, -1, 2**63, -(2**63), 2**64]))
        return draw(st.sampled_from([exact, math.floor(exact), float(exact)]))
    if isinstance(value, dt.datetime):
        instant = value + draw(st.sampled_from([dt.timedelta(0), dt.timedelta(microseconds=1),
                                                -dt.timedelta(microseconds=1), dt.timedelta(milliseconds=1.5),
                                                -dt.timedelta(milliseconds=500), dt.timedelta(seconds=0.7)]))
        zone = draw(ZONES)
        if zone is not None:
            instant = (instant if instant.tzinfo else instant.replace(tzinfo=UTC)).astimezone(zone)
        elif instant.tzinfo is not None:
            instant = instant.replace(tzinfo=None)
        return draw(st.sampled_from([instant, instant.date(), instant.isoformat()]))
    assert isinstance(value, dt.date)
    return draw(st.sampled_from([value, value + dt.timedelta(days=1), value - dt.timedelta(days=1),
                                 dt.datetime.combine(value, dt.time(12)), value.isoformat()]))


@st.composite
def stats_and_leaf(draw: st.DrawFn) -> tuple[pa.DataType, pa.Table, object]:
    dtype = draw(st.sampled_from(TYPES))
    least, most = _type_range(dtype)
    anchor = draw(st.one_of(st.integers(least, most), st.sampled_from([least, most, 0, least + 1, most - 1])))
    near = st.integers(-3, 3).map(lambda d: min(max(anchor + d, least), most))
    bounds = [sorted(pair) if None not in pair else pair
              for pair in draw(st.lists(st.tuples(st.none() | near, st.none() | near), min_size=1, max_size=12))]
    table = pa.table({"min_1": _values(dtype, [low for low, _ in bounds]),
                      "max_1": _values(dtype, [high for _, high in bounds])})
    point = _values(dtype, [anchor])[0].as_py()
    if hasattr(point, "to_pydatetime"):  # a pandas Timestamp of nanoseconds: literals are datetimes
        point = point.floor("us").to_pydatetime()
    literals = literal_near(point)
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    leaf = draw(st.one_of(st.builds(Comparison, st.just("c"), st.just(op), literals),
                          st.builds(In, st.just("c"), st.lists(literals, min_size=1, max_size=3))))
    return dtype, table, leaf


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stats_and_leaf())
def test_the_segment_prefilter_keeps_every_entry_may_match_keeps(case: tuple[pa.DataType, pa.Table, object]) -> None:
    dtype, table, leaf = case
    try:
        bound = leaf.bind(pa.schema([("c", dtype)]))  # type: ignore[attr-defined]
    except InvalidFilterError:
        assume(False)
    expr = stats_filter(bound, lambda name: ("min_1", "max_1", instant_type(dtype)) if name == "c" else None)
    if expr is None:
        return
    kept = set(table.append_column("i", pa.array(range(len(table)))).filter(expr).column("i").to_pylist())
    for i, (low, high) in enumerate(zip(table.column("min_1").to_pylist(), table.column("max_1").to_pylist())):
        if bound.may_match({"c": ColumnStats(low, high)}.get):
            assert i in kept, (str(bound), low, high)


# --- end to end: a v2 table whose files sit in segments --------------------------------------
E2E_SCHEMA = pa.schema([
    ("id", pa.int64()), ("u", pa.uint64()), ("ts", pa.timestamp("s")),
    ("tms", pa.timestamp("ms", "Europe/Paris")), ("tns", pa.timestamp("ns")), ("d", pa.decimal128(10, 2)),
    ("wide", pa.decimal128(38, 10)), ("day", pa.date32()), ("s", pa.string()),
])
TINY = {"tail_limit": 1, "deletes_limit": 1, "segment_target_files": 3, "max_small_segments": 2}
SECOND = dt.datetime(2026, 3, 29, 0, 59, 59)


def e2e_rows(i: int) -> dict[str, object]:
    """Row ``i``: every value lands exactly on its type's unit, so a literal between two
    units lies strictly between two rows."""
    instant = SECOND + dt.timedelta(seconds=i)
    return {"id": i, "u": 2**64 - 10 + i if i > 4 else i, "ts": instant, "tms": instant.replace(tzinfo=UTC),
            "tns": instant, "d": Decimal(i), "wide": Decimal(i) - Decimal("1E28") + 1 if i == 0 else Decimal(i),
            "day": SECOND.date() + dt.timedelta(days=i), "s": f"n{i}"}


def segmented_table(row_group_size: int | None = None) -> mt.Table:
    """Seven files of one row and one of three, in segments and the tail."""
    options = {} if row_group_size is None else {"row_group_size": row_group_size}
    t = mt.create_table("mem://t", E2E_SCHEMA, store=MemoryStore(), properties=TINY, **options)
    for i in range(7):
        t.append(pa.Table.from_pylist([e2e_rows(i)], schema=E2E_SCHEMA))
    t.append(pa.Table.from_pylist([e2e_rows(i) for i in (7, 8, 9)], schema=E2E_SCHEMA))
    assert len(t.manifest().index.segments) >= 2
    return t


FILTERS = [
    "id < 1.5", "id <= 1.5", "id > -1.5", "id >= 0.5", "id < 2.5 OR id > 100", "id = 1.0", "id IN (1.5, 2)",
    "id < 1.00000000000000000001", "id > 8.99999999999999999999", "id < 9223372036854775808",
    "id > -9223372036854775809", "id BETWEEN 0.5 AND 2.5", "NOT id >= 1.5",
    "u < 1.5", "u > -1", "u >= -1.5", "u < 18446744073709551616", "u > 18446744073709551613.5",
    "u IN (-1, 1, 18446744073709551616)", "u <= 18446744073709551614.0000001",
    "ts < TIMESTAMP '2026-03-29 01:00:00.5'", "ts > TIMESTAMP '2026-03-29 01:00:01.999999'",
    "ts >= TIMESTAMP '2026-03-29 01:00:00.000001'", "ts = TIMESTAMP '2026-03-29 01:00:00.5'",
    "ts < TIMESTAMP '2026-03-29 01:00:00.5' OR ts > TIMESTAMP '2026-03-29 01:00:06.25'",
    "tms < TIMESTAMP '2026-03-29 01:00:00.0005'", "tms < TIMESTAMP '2026-03-29 03:00:01.0005+02:00'",
    "tms > TIMESTAMP '2026-03-29 01:00:00.9995Z'", "tms <= TIMESTAMP '2026-03-29 00:00:01.5-01:00'",
    "tns < TIMESTAMP '2026-03-29 01:00:00.000001'", "tns > TIMESTAMP '2026-03-29 01:00:00.999999'",
    "ts < DATE '2026-03-30'", "d < 1.005", "d > 3.995", "d <= 1.0049", "d IN (1.001, 2)",
    "wide < -9999999999999999999999999998", "wide > -10000000000000000000000000000", "wide >= -1E40",
    "day < DATE '2026-03-31'", "s < 'n1\x00'", "s > 'n8~'",
]


def _expected(t: mt.Table, where: str) -> list[int]:
    data = t.to_arrow().cast(E2E_SCHEMA)
    return sorted(data.filter(parse(where).evaluate(data)).column("id").to_pylist())


@pytest.mark.parametrize("row_group_size", [None, 1], ids=["one-group", "a-group-a-row"])
def test_scans_and_counts_over_segments_keep_every_matching_row(row_group_size: int | None) -> None:
    t = segmented_table(row_group_size)
    for where in FILTERS:
        expected = _expected(t, where)
        assert sorted(t.scan(where=where).to_arrow().column("id").to_pylist()) == expected, where
        assert t.scan(where=where).count() == len(expected), where


@pytest.mark.parametrize("where", ["id < 1.5", "u < 1.5 OR u > 18446744073709551613.5",
                                   "ts < TIMESTAMP '2026-03-29 01:00:01.5'",
                                   "tms < TIMESTAMP '2026-03-29 03:00:01.0005+02:00'", "id > 8.5 OR d < 0.5"])
def test_delete_and_update_over_segments_change_every_matching_row(where: str) -> None:
    t = segmented_table()
    expected = _expected(t, where)
    assert 0 < len(expected) < 10
    t.update({"s": "'updated'"}, where=where)
    assert sorted(t.scan(where="s = 'updated'").to_arrow().column("id").to_pylist()) == expected
    t.delete(where)
    assert sorted(t.to_arrow().column("id").to_pylist()) == sorted(set(range(10)) - set(expected))

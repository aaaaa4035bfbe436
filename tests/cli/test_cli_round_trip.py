"""Property (issue 30): every column type written by ``scan --output`` as CSV or JSON lines
appends back to equal rows, for random values at the edges of each type (NaN and infinities,
quotes, commas and newlines in text, bytes that are not text, the extremes of every integer,
decimal and time unit, nulls beside empty values), not only the few fixed ones of
tests/cli/test_cli.py. ``MT_ROUND_TRIP_EXAMPLES`` runs more examples (40 by default)."""

from __future__ import annotations

import os
import tempfile
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import manifest_table as mt
from manifest_table.cli import main
from tests.column_types import SUPPORTED

EXAMPLES = int(os.environ.get("MT_ROUND_TRIP_EXAMPLES", "40"))
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_SECONDS = (-62135596800 + 86400, 253402300799 - 86400)
"""0001-01-02 to 9999-12-30: a zoned column's values are written in its zone, and a day
further out is year 0 or 10000 there, which ISO 8601's four digits cannot hold."""
_INT64 = (-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8) | st.sampled_from(
    ['', '"', '""', ",", "\n", "a\r\nb", "NA", "NULL", " ", "nan", "\\N", "1e39", "日本", "😀"])


def integers_of(dtype: pa.DataType) -> st.SearchStrategy[int]:
    """The counts a temporal or integer type stores, over its whole useful range."""
    t = pa.types
    if t.is_integer(dtype):
        bits, signed = dtype.bit_width, t.is_signed_integer(dtype)
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    elif t.is_timestamp(dtype):
        n = _PER_SECOND[dtype.unit]
        # A day inside int64's range: Arrow's text parser overflows in the first second of the
        # nanosecond range (1677-09-21 00:12:43: it scales the whole seconds before adding the
        # fraction), and a zoned value's text is its local time, up to a day away.
        low, high = max(_SECONDS[0] * n, _INT64[0] + 86400 * n), min(_SECONDS[1] * n, _INT64[1] - 86400 * n)
    elif t.is_date(dtype):
        low, high = -719162, 2932896  # days of 0001-01-01 and 9999-12-31
    elif t.is_time(dtype):
        low, high = 0, 86400 * _PER_SECOND[dtype.unit] - 1
    else:  # durations, within what a Python timedelta (how the rows are compared) holds
        most = 999_999_999 * 86400 * _PER_SECOND[dtype.unit]
        low, high = max(-most, _INT64[0]), min(most, _INT64[1])
    return st.integers(low, high) | st.sampled_from([low, high, 0])


def arrays(dtype: pa.DataType, n: int) -> st.SearchStrategy[pa.Array]:
    """``n`` values of ``dtype``, some null."""
    t = pa.types
    nulls = st.lists(st.sampled_from([False, False, False, True]), min_size=n, max_size=n)
    if t.is_struct(dtype):
        children = st.tuples(*(arrays(f.type, n) for f in dtype))
        return st.builds(lambda cs, mask: pa.StructArray.from_arrays(list(cs), fields=list(dtype),
                                                                    mask=pa.array(mask, pa.bool_())), children, nulls)
    if t.is_fixed_size_list(dtype):
        return st.builds(lambda flat: pa.FixedSizeListArray.from_arrays(flat, type=dtype),
                         arrays(dtype.value_type, n * dtype.list_size))
    if t.is_list(dtype) or t.is_large_list(dtype) or t.is_map(dtype):
        return st.lists(st.integers(0, 3), min_size=n, max_size=n).flatmap(lambda sizes: _lists(dtype, sizes))
    return st.lists(st.none() | scalars(dtype), min_size=n, max_size=n).map(lambda v: _leaf(dtype, v))


def _lists(dtype: pa.DataType, sizes: list[int]) -> st.SearchStrategy[pa.Array]:
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    kind = pa.int64() if pa.types.is_large_list(dtype) else pa.int32()
    if pa.types.is_map(dtype):
        keys = st.lists(TEXT, min_size=offsets[-1], max_size=offsets[-1], unique=True).map(
            lambda k: pa.array(k, dtype.key_type))
        return st.builds(lambda k, v: pa.MapArray.from_arrays(pa.array(offsets, kind), k, v, type=dtype),
                         keys, arrays(dtype.item_type, offsets[-1]))
    make = pa.LargeListArray if pa.types.is_large_list(dtype) else pa.ListArray
    return arrays(dtype.value_type, offsets[-1]).map(lambda flat: make.from_arrays(pa.array(offsets, kind), flat,
                                                                                 type=dtype))


def scalars(dtype: pa.DataType) -> st.SearchStrategy[Any]:
    t = pa.types
    if t.is_boolean(dtype):
        return st.booleans()
    if t.is_floating(dtype):
        return st.floats(width=dtype.bit_width)
    if t.is_decimal(dtype):
        most = 10**dtype.precision - 1
        exact = Context(prec=dtype.precision + 1)  # (the default context rounds to 28 digits)
        return st.integers(-most, most).map(lambda units: Decimal(units).scaleb(-dtype.scale, exact))
    if t.is_string(dtype) or t.is_large_string(dtype):
        return TEXT
    if t.is_fixed_size_binary(dtype):
        return st.binary(min_size=dtype.byte_width, max_size=dtype.byte_width)
    if t.is_binary(dtype) or t.is_large_binary(dtype):
        return st.binary(max_size=8)
    return integers_of(dtype)


def _leaf(dtype: pa.DataType, values: list[Any]) -> pa.Array:
    t = pa.types
    if t.is_date64(dtype):
        values = [None if v is None else v * 86_400_000 for v in values]
    if t.is_timestamp(dtype) or t.is_date(dtype) or t.is_time(dtype) or t.is_duration(dtype):
        storage = pa.int32() if t.is_time32(dtype) or t.is_date32(dtype) else pa.int64()
        return pa.array(values, storage).cast(dtype)
    return pa.array(values, dtype)


FLAT = sorted(name for name, dtype in SUPPORTED.items() if not pa.types.is_nested(dtype))


@st.composite
def tables(draw: st.DrawFn, fmt: str) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(SUPPORTED) if fmt == "jsonl" else FLAT), min_size=1, max_size=4,
                          unique=True))
    rows = draw(st.integers(0, 5))
    columns = {"id": pa.array(range(rows), pa.int64())}
    for name in names:
        columns[name] = draw(arrays(SUPPORTED[name], rows))
    return pa.table(columns)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_scan_output_appends_back_to_equal_rows(fmt: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tables(fmt))
    def round_trip(data: pa.Table) -> None:
        with tempfile.TemporaryDirectory() as work:
            source = mt.create_table(Path(work, "source"), data.schema)
            source.append(data)
            out = str(Path(work, f"rows.{fmt}"))
            assert main(["scan", source.uri, "--output", out]) == 0
            copy = mt.create_table(Path(work, "copy"), data.schema)
            assert main(["append", copy.uri, out]) == 0
            expected, got = source.to_arrow().sort_by("id"), copy.to_arrow().sort_by("id")
            assert repr(got.to_pylist()) == repr(expected.to_pylist())

    round_trip()

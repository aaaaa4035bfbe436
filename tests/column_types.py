"""Every Arrow type a table may be asked to hold, as the outcome docs/writing.md ("Column
types") gives it: ``SUPPORTED`` types work end to end, ``REFUSED`` ones are refused when a
column is made, with what to use instead. ``values`` makes distinct, ordered values of a
supported type that use its whole precision (nanoseconds of an ns timestamp, the time of
day of a second-unit one), so a reader that truncated them would be seen."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

_UNITS = ("s", "ms", "us", "ns")
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}

SUPPORTED: dict[str, pa.DataType] = {
    **{f"{sign}int{bits}": getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)},
    "float32": pa.float32(), "float64": pa.float64(),
    "decimal128": pa.decimal128(38, 2), "bool": pa.bool_(),
    "string": pa.string(), "large_string": pa.large_string(),
    "binary": pa.binary(), "large_binary": pa.large_binary(), "fixed_size_binary": pa.binary(4),
    "date32": pa.date32(), "date64": pa.date64(),
    "time32_s": pa.time32("s"), "time32_ms": pa.time32("ms"), "time64_us": pa.time64("us"),
    "time64_ns": pa.time64("ns"),
    **{f"timestamp_{u}": pa.timestamp(u) for u in _UNITS},
    **{f"timestamp_{u}_utc": pa.timestamp(u, "UTC") for u in _UNITS},
    **{f"timestamp_{u}_berlin": pa.timestamp(u, "Europe/Berlin") for u in _UNITS},
    **{f"duration_{u}": pa.duration(u) for u in _UNITS},
    "list": pa.list_(pa.timestamp("s")), "large_list": pa.large_list(pa.int64()),
    "fixed_size_list": pa.list_(pa.date64(), 2),
    "struct": pa.struct([("a", pa.int64()), ("b", pa.timestamp("s", "UTC"))]),
    "map": pa.map_(pa.string(), pa.int64()),
}

_UNION = [pa.field("i", pa.int64()), pa.field("s", pa.string())]
REFUSED: dict[str, tuple[pa.DataType, str]] = {
    "float16": (pa.float16(), "float32"),
    "decimal32": (pa.decimal32(9, 2), "decimal128(9, 2)"),
    "decimal64": (pa.decimal64(18, 2), "decimal128(18, 2)"),
    "decimal256_38": (pa.decimal256(38, 3), "decimal128(38, 3)"),
    "decimal256_40": (pa.decimal256(40, 3), "a decimal128 of at most 38 digits"),
    "string_view": (pa.string_view(), "string"),
    "binary_view": (pa.binary_view(), "binary"),
    "month_day_nano_interval": (pa.month_day_nano_interval(), "a duration"),
    "null": (pa.null(), "the type its values will have"),
    "dictionary": (pa.dictionary(pa.int32(), pa.string()), "string"),
    "list_view": (pa.list_view(pa.int64()), "list<item: int64>"),
    "large_list_view": (pa.large_list_view(pa.int64()), "large_list<item: int64>"),
    "dense_union": (pa.dense_union(_UNION), "a struct"),
    "sparse_union": (pa.sparse_union(_UNION), "a struct"),
    "run_end_encoded": (pa.run_end_encoded(pa.int32(), pa.int64()), "int64"),
    "uuid": (pa.uuid(), "fixed_size_binary[16]"),
    "json": (pa.json_(), "string"),
    "bool8": (pa.bool8(), "bool"),
    "opaque": (pa.opaque(pa.int64(), "point", "example.com"), "int64"),
    "list_of_dictionary": (pa.list_(pa.dictionary(pa.int8(), pa.string())), "string"),
    "struct_of_float16": (pa.struct([("x", pa.float16())]), "float32"),
}

COMPARABLE = ("integer", "floating", "decimal", "string", "large_string", "boolean", "date", "timestamp")
"""Types filters compare with literals (docs/expressions.md, "Binding"); every type takes IS NULL."""


def comparable(dtype: pa.DataType) -> bool:
    return any(getattr(pa.types, f"is_{kind}")(dtype) for kind in COMPARABLE)


def values(dtype: pa.DataType, ids: range | list[int]) -> pa.Array:
    """Distinct values of a supported ``dtype``, ordered like ``ids``."""
    t = pa.types
    if t.is_boolean(dtype):
        return pa.array([i % 2 == 1 for i in ids])
    if t.is_integer(dtype):  # unsigned: past the signed range
        offset = 2 ** (dtype.bit_width - 1) if t.is_unsigned_integer(dtype) else -50
        return pa.array([offset + 3 * i for i in ids], dtype)
    if t.is_floating(dtype):
        return pa.array([i / 3 - 2 for i in ids], dtype)
    if t.is_decimal(dtype):
        return pa.array([Decimal(f"{i - 2}.{i:02d}") for i in ids], dtype)
    if t.is_string(dtype) or t.is_large_string(dtype):
        return pa.array([f"s{i:03d}é" for i in ids], dtype)
    if t.is_fixed_size_binary(dtype):
        return pa.array([b"\x00%03d" % i for i in ids], dtype)
    if t.is_binary(dtype) or t.is_large_binary(dtype):
        return pa.array([b"\xff%03d" % i for i in ids], dtype)
    if t.is_date32(dtype):
        return pa.array([19_000 + i for i in ids], pa.int32()).cast(dtype)
    if t.is_date64(dtype):
        return pa.array([(19_000 + i) * 86_400_000 for i in ids], pa.int64()).cast(dtype)
    if t.is_time(dtype):
        n = _PER_SECOND[dtype.unit]
        storage = pa.int32() if t.is_time32(dtype) else pa.int64()
        return pa.array([3600 * n + i * (n + 1) for i in ids], storage).cast(dtype)
    if t.is_timestamp(dtype):  # across the repeated hour of 2024-10-27 in Berlin
        n = _PER_SECOND[dtype.unit]
        return pa.array([1_729_990_800 * n + i * (1200 * n + 1) for i in ids], pa.int64()).cast(dtype)
    if t.is_duration(dtype):
        return pa.array([i * (_PER_SECOND[dtype.unit] + 1) for i in ids], pa.int64()).cast(dtype)
    if t.is_fixed_size_list(dtype) or t.is_list(dtype) or t.is_large_list(dtype):
        flat = values(dtype.value_type, [j for i in ids for j in (i, i + 1)])
        offsets = pa.array(range(0, 2 * len(ids) + 1, 2), pa.int32())
        if t.is_fixed_size_list(dtype):
            return pa.FixedSizeListArray.from_arrays(flat, type=dtype)
        make = pa.ListArray if t.is_list(dtype) else pa.LargeListArray
        return make.from_arrays(offsets.cast(pa.int64()) if t.is_large_list(dtype) else offsets, flat, type=dtype)
    if t.is_struct(dtype):
        return pa.StructArray.from_arrays([values(f.type, ids) for f in dtype], fields=list(dtype))
    if t.is_map(dtype):
        return pa.array([[(f"k{i}", v)] for i, v in zip(ids, values(dtype.item_type, ids).to_pylist())], dtype)
    raise NotImplementedError(f"no values for {dtype}")


def refused_values(dtype: pa.DataType, n: int) -> pa.Array:
    """Some values of a refused ``dtype`` (what a DataFrame or a Table could hold)."""
    t = pa.types
    if isinstance(dtype, pa.BaseExtensionType):
        if dtype.extension_name == "arrow.uuid":
            storage = pa.array([uuid.UUID(int=i).bytes for i in range(n)], dtype.storage_type)
        elif dtype.extension_name == "arrow.json":
            storage = pa.array([f'{{"i": {i}}}' for i in range(n)], dtype.storage_type)
        else:
            storage = pa.array([i % 2 for i in range(n)], dtype.storage_type)
        return pa.ExtensionArray.from_storage(dtype, storage)
    if t.is_null(dtype):
        return pa.nulls(n)
    if t.is_float16(dtype):
        return pa.array(range(n), pa.float32()).cast(dtype)
    if t.is_decimal(dtype) or t.is_interval(dtype):
        return pa.array([pa.MonthDayNano([i, i, i]) for i in range(n)] if t.is_interval(dtype)
                        else [Decimal(i) for i in range(n)], dtype)
    if t.is_string_view(dtype) or t.is_binary_view(dtype):
        return pa.array([f"v{i}" for i in range(n)], pa.string()).cast(dtype)
    if t.is_dictionary(dtype):
        return pa.array([f"d{i % 2}" for i in range(n)], dtype.value_type).dictionary_encode().cast(dtype)
    if t.is_list_view(dtype) or t.is_large_list_view(dtype):
        return pa.array([[i] for i in range(n)], dtype)
    if t.is_union(dtype):
        children = [pa.array(range(n), pa.int64()), pa.array([str(i) for i in range(n)])]
        kinds = pa.array([i % 2 for i in range(n)], pa.int8())
        if dtype.mode == "dense":
            return pa.UnionArray.from_dense(kinds, pa.array([i for i in range(n)], pa.int32()), children, ["i", "s"])
        return pa.UnionArray.from_sparse(kinds, children, ["i", "s"])
    if t.is_run_end_encoded(dtype):
        runs = pa.array([i // 2 for i in range(n)], dtype.value_type)
        return pc.run_end_encode(runs, run_end_type=dtype.run_end_type)
    if t.is_list(dtype):
        return pa.array([[f"d{i}"] for i in range(n)], pa.list_(pa.string())).cast(dtype)
    if t.is_struct(dtype):
        return pa.StructArray.from_arrays([refused_values(f.type, n) for f in dtype], fields=list(dtype))
    raise NotImplementedError(f"no values for {dtype}")

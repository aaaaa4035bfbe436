"""Which Arrow types a table's columns may have, the form Parquet keeps them in, and which
types convert into a column's type: the three rules of safe conversion live here, each named
after the one place that applies it (``widens``: schema evolution; ``appendable``: data
appended to a table; ``assignable``: values an update computes), with ``cast_safely``.

A type is supported when every part of the table handles it: writing and statistics, our
own segments, filters, deletes, updates, compaction, and the readers of docs/interop.md and
docs/spark.md. The others are refused when a column is made (``create_table``,
``add_column``, ``append(schema_mode="merge")``, the CLI), naming the column, the type and
what to use instead; docs/writing.md ("Column types") lists every type with its outcome.

Parquet has no second-unit timestamps or times and no 64-bit dates: pyarrow stores them as
milliseconds and days and reads them back so, whatever ``coerce_timestamps`` or
``store_schema`` say (the ``ARROW:schema`` it stores restores zones, durations, large and
view types and dictionaries, not these units). ``parquet_form`` is that storage form; it is
lossless, and readers of our own Parquet cast it back to the declared type."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as pat

from ..lazy import lazy

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")


@dataclass(frozen=True)
class Refusal:
    """Why a new column may not have a type, and what to use instead. ``appendable``: tables
    of release 0.2.0 with such a column (which it let one create) took appends, and still do."""

    reason: str
    instead: str
    appendable: bool = False


def _decimal_instead(dtype: pa.DataType) -> str:
    if dtype.precision <= 38:
        return f"decimal128({dtype.precision}, {dtype.scale})"
    return "a decimal128 of at most 38 digits, or a string"


_RULES: tuple[tuple[Callable[[pa.DataType], bool], Callable[[pa.DataType], Refusal]], ...] = (
    (
        lambda t: isinstance(t, pa.BaseExtensionType),
        lambda t: Refusal(
            "an extension type: Spark cannot read it, and filters and statistics do not know it",
            "bool" if t.extension_name == "arrow.bool8" else str(t.storage_type),
        ),
    ),
    (
        pat.is_dictionary,
        lambda t: Refusal(
            "dictionary encoding is a layout of the values, and filters cannot compare it "
            "(dictionary-encoded data appends to a column of the value type)",
            str(t.value_type),
            appendable=True,
        ),
    ),
    (pat.is_run_end_encoded, lambda t: Refusal("Parquet cannot store run-end encoded columns", str(t.value_type))),
    (
        lambda t: pat.is_string_view(t) or pat.is_binary_view(t),
        lambda t: Refusal(
            "Arrow cannot filter, sort or take the minimum of view types (view data appends to a "
            "column of the plain type)",
            "string" if pat.is_string_view(t) else "binary",
        ),
    ),
    (
        lambda t: pat.is_list_view(t) or pat.is_large_list_view(t),
        lambda t: Refusal(
            "Polars cannot read list views",
            str(pa.list_(t.value_field) if pat.is_list_view(t) else pa.large_list(t.value_field)),
            appendable=True,
        ),
    ),
    (
        pat.is_null,
        lambda t: Refusal("a column of type null can hold nothing but nulls", "the type its values will have"),
    ),
    (pat.is_float16, lambda t: Refusal("Arrow has no minimum or maximum of half floats", "float32")),
    (
        lambda t: pat.is_decimal32(t) or pat.is_decimal64(t),
        lambda t: Refusal(
            "Arrow has no minimum or maximum of 32- and 64-bit decimals", f"decimal128({t.precision}, {t.scale})"
        ),
    ),
    (
        pat.is_decimal256,
        lambda t: Refusal(
            "DuckDB cannot read 256-bit decimals, and DuckDB, Polars and Spark hold at most 38 digits",
            _decimal_instead(t),
            appendable=True,
        ),
    ),
    (
        pat.is_interval,
        lambda t: Refusal("Parquet cannot store intervals", "a duration, or a struct of months, days and nanoseconds"),
    ),
    (pat.is_union, lambda t: Refusal("Parquet cannot store unions", "a struct with one nullable field per member")),
)


def refusal(dtype: pa.DataType) -> tuple[pa.DataType, Refusal] | None:
    """The first type inside ``dtype`` (itself included) that a column may not have, with why."""
    for applies, refuse in _RULES:
        if applies(dtype):
            return dtype, refuse(dtype)
    for child in _children(dtype):
        found = refusal(child)
        if found is not None:
            return found
    return None


def plain_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with dictionaries and string and binary views decoded, at any depth: the type
    of what the values are, for a schema taken from data (``schema_mode="merge"``, ``create
    --like``); such data appends to it by a cast. (Not list views: pyarrow 26 casts them to
    lists of invalid offsets; nor run-end encoding, which Arrow does not cast.)"""
    if pat.is_dictionary(dtype):
        return plain_type(dtype.value_type)
    if pat.is_string_view(dtype):
        return pa.string()
    if pat.is_binary_view(dtype):
        return pa.binary()
    return rebuilt(dtype, plain_type)


def parquet_form(dtype: pa.DataType) -> pa.DataType:
    """The type pyarrow reads back from Parquet it wrote from ``dtype``, at any depth:
    second units as milliseconds, ``date64`` as ``date32``; every other type as itself."""
    if pat.is_timestamp(dtype) and dtype.unit == "s":
        return pa.timestamp("ms", dtype.tz)
    if pat.is_time32(dtype) and dtype.unit == "s":
        return pa.time32("ms")
    if pat.is_date64(dtype):
        return pa.date32()
    return rebuilt(dtype, parquet_form)


def _children(dtype: pa.DataType) -> list[pa.DataType]:
    if pat.is_map(dtype):
        return [dtype.key_type, dtype.item_type]
    if pat.is_struct(dtype):
        return [f.type for f in dtype]
    if pat.is_list(dtype) or pat.is_large_list(dtype) or pat.is_fixed_size_list(dtype):
        return [dtype.value_type]
    return []


def holds(dtype: pa.DataType, kind: Callable[[pa.DataType], bool]) -> bool:
    """Whether ``dtype`` is of ``kind``, or holds a type of it at any depth (list items, struct
    fields, map keys and values)."""
    return kind(dtype) or any(holds(child, kind) for child in _children(dtype))


def rebuilt(dtype: pa.DataType, change: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """A nested ``dtype`` (list, struct, map) with ``change`` applied to its children; a flat
    one as it is."""
    if pat.is_map(dtype):
        return pa.map_(
            dtype.key_field.with_type(change(dtype.key_type)),
            dtype.item_field.with_type(change(dtype.item_type)),
            dtype.keys_sorted,
        )
    if pat.is_struct(dtype):
        return pa.struct([f.with_type(change(f.type)) for f in dtype])
    if pat.is_fixed_size_list(dtype):
        return pa.list_(dtype.value_field.with_type(change(dtype.value_type)), dtype.list_size)
    if pat.is_list(dtype) or pat.is_large_list(dtype):
        make = pa.list_ if pat.is_list(dtype) else pa.large_list
        return make(dtype.value_field.with_type(change(dtype.value_type)))
    return dtype


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of ``old`` is exactly a value of ``new`` (the same type included)."""
    if old == new:
        return True
    if pat.is_signed_integer(old) and pat.is_signed_integer(new):
        return new.bit_width > old.bit_width
    if pat.is_float32(old) and pat.is_float64(new):
        return True
    if pat.is_decimal(old) and pat.is_decimal(new):
        return new.scale == old.scale and new.precision >= old.precision and new.bit_width >= old.bit_width
    return False


def appendable(source: pa.DataType, target: pa.DataType) -> bool:
    """Data of type ``source`` appends to a column of type ``target`` by a checked cast: the
    casts that keep the meaning of every value (range is checked by the cast), in the same
    family (integers, floats, strings, ...), integers into floats, nested types member by
    member (fixed-size lists of one size; maps by keys and values), dictionaries by their
    value type."""
    t = pa.types
    if source == target:
        return True
    if (t.is_list(source) or t.is_large_list(source)) and (t.is_list(target) or t.is_large_list(target)):
        return appendable(source.value_type, target.value_type)
    if t.is_fixed_size_list(source) and t.is_fixed_size_list(target):
        return source.list_size == target.list_size and appendable(source.value_type, target.value_type)
    if t.is_map(source) and t.is_map(target):
        return appendable(source.key_type, target.key_type) and appendable(source.item_type, target.item_type)
    if t.is_struct(source) and t.is_struct(target):
        return [f.name for f in source] == [f.name for f in target] and all(
            appendable(a.type, b.type) for a, b in zip(source, target)
        )
    families = [
        lambda x: t.is_integer(x),
        lambda x: t.is_floating(x),
        lambda x: t.is_string(x) or t.is_large_string(x) or t.is_string_view(x),
        lambda x: t.is_binary(x) or t.is_large_binary(x) or t.is_binary_view(x),
        lambda x: t.is_timestamp(x),
        lambda x: t.is_date(x),
        lambda x: t.is_decimal(x),
    ]
    if t.is_null(source) or (t.is_integer(source) and t.is_floating(target)):
        return True
    if t.is_dictionary(source):
        return appendable(source.value_type, target)
    return any(family(source) and family(target) for family in families)


def assignable(value: pa.DataType, column: pa.DataType) -> bool:
    """A value ``update`` computed (``price * 1.1``) is stored into a column of type
    ``column`` by a checked cast: a number into any number column (a fraction into an
    integer column fails the cast), a null anywhere, a string into a string column, a
    timestamp into a timestamp column; never a number into a string column or a string
    parsed into a date, which SQL engines disagree on. Looser than ``appendable`` between
    numbers, since SQL's SET converts a number to the column's numeric type."""
    t = pa.types
    kinds = (
        lambda x: t.is_integer(x) or t.is_floating(x) or t.is_decimal(x),
        lambda x: t.is_string(x) or t.is_large_string(x),
        t.is_timestamp,
        t.is_date,
    )
    return t.is_null(value) or any(kind(value) and kind(column) for kind in kinds)


def cast_safely(
    column: pa.ChunkedArray,
    dtype: pa.DataType,
    allowed: Callable[[pa.DataType, pa.DataType], bool],
    error: type[Exception],
    message: str,
) -> pa.ChunkedArray:
    """``column`` as ``dtype`` by a checked cast, if ``allowed`` (one of the rules above) lets
    its type convert; else ``error(message)``, with why appended when a value does not fit."""
    if not allowed(column.type, dtype):
        raise error(message)
    try:
        cast = column.cast(dtype, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise error(f"{message}: {exc}") from None
    overflow = _float_overflow(column, cast)
    if overflow is not None:
        raise error(f"{message}: {overflow!r} is beyond the range of float32 (±3.4028235e38)")
    return cast


def _float_overflow(before: pa.Array | pa.ChunkedArray, after: pa.Array | pa.ChunkedArray) -> float | None:
    """A finite value that became infinite in a cast to a narrower float (Arrow's "safe"
    cast rounds 1e39 to float32's infinity), at any depth; None if there is none. Infinities
    and NaN given as such stay as given."""
    for source, result in _float_leaves(before, after):
        lost = pc.and_(pc.is_finite(source), pc.invert(pc.is_finite(result)))
        if pc.any(lost).as_py():
            return float(pc.filter(source, lost)[0].as_py())
    return None


def _is_list(dtype: pa.DataType) -> bool:
    return pat.is_list(dtype) or pat.is_large_list(dtype) or pat.is_fixed_size_list(dtype)


def with_doubles(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with float32 as float64 at any depth: the type to build Python floats in
    before a checked cast to ``dtype`` (``pa.array([1e39], pa.float32())`` is infinity)."""
    return pa.float64() if pat.is_float32(dtype) else rebuilt(dtype, with_doubles)


def _float_leaves(source: Any, result: Any) -> Iterator[tuple[Any, Any]]:
    """Pairs of the float arrays (or chunked arrays) inside a cast's source and result."""
    kind = result.type
    if pat.is_floating(kind) and pat.is_floating(source.type) and kind.bit_width < source.type.bit_width:
        yield source, result
    elif _is_list(kind) and _is_list(source.type):
        yield from _float_leaves(pc.list_flatten(source), pc.list_flatten(result))
    elif pat.is_struct(kind) and pat.is_struct(source.type):
        for pair in zip(source.flatten(), result.flatten()):
            yield from _float_leaves(*pair)
    elif pat.is_map(kind) and pat.is_map(source.type):
        yield from _float_leaves(map_entries(source), map_entries(result))


def map_entries(maps: Any) -> Any:
    """A map array (or chunked array) as the list of (key, value) structs it is, which Arrow
    can flatten and code that knows lists and structs can descend."""
    kind = maps.type
    return maps.cast(pa.list_(pa.struct([kind.key_field, kind.item_field])))

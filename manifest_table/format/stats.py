"""Per-column min / max / null count: collected while writing, stored in manifests,
and read back as ``ColumnStats`` for pruning.

Stats are kept only for types with a total order that JSON can carry exactly, and in the
order SQL engines use (docs/expressions.md). NaN sorts above every number, so a float column
holding NaN has no max (unknown: no upper bound) but keeps the min of its numbers. Timestamps
with a time zone are instants: their bounds are UTC datetimes, because Python compares two
datetimes of one zone by wall clock and a repeated daylight-saving hour would order them
wrongly. Long strings are dropped rather than truncated, so a stored max is always a true
upper bound. Each bound is kept or dropped on its own.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..lazy import lazy

if TYPE_CHECKING:
    import decimal

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import pyarrow.types as pat

    from .stored_schema import StoredSchema
else:
    decimal = lazy("decimal")
    pa = lazy("pyarrow")
    pc = lazy("pyarrow.compute")
    pq = lazy("pyarrow.parquet")
    pat = lazy("pyarrow.types")

MAX_STRING_STAT = 256


@dataclass(frozen=True)
class ColumnStats:
    """What a file or row group says about one column; None means unknown. min/max are Python
    values of the column's type (over non-null values), comparable with bound literals."""

    min: Any = None
    max: Any = None
    null_count: int | None = None
    row_count: int | None = None
    may_contain: Callable[[Any], bool] | None = dataclasses.field(default=None, compare=False, repr=False)
    """A membership test (a row group's bloom filter): False only if no row holds the value."""


def has_stats(dtype: pa.DataType) -> bool:
    return (
        pat.is_integer(dtype)
        or pat.is_floating(dtype)
        or pat.is_boolean(dtype)
        or pat.is_string(dtype)
        or pat.is_large_string(dtype)
        or pat.is_date(dtype)
        or pat.is_timestamp(dtype)
        or pat.is_decimal(dtype)
    )


def table_stats(table: pa.Table | pa.RecordBatch) -> dict[str, ColumnStats]:
    """Exact stats of every column of ``table`` (min/max None when unknown)."""
    stats = {}
    for field, column in zip(table.schema, table.columns):
        lo = hi = None
        if has_stats(field.type) and len(column) > column.null_count:
            column = column.cast(instant_type(field.type))  # zoned: instants, not wall clocks
            minmax = pc.min_max(column)  # skips NaN
            lo, hi = minmax["min"].as_py(), minmax["max"].as_py()
            if pat.is_floating(field.type) and pc.any(pc.is_nan(column)).as_py():
                hi = None  # NaN is the max; the min of the numbers stands (if there are any)
                lo = None if lo != lo else lo
            if isinstance(lo, str) and isinstance(hi, str) and (len(lo) > MAX_STRING_STAT or len(hi) > MAX_STRING_STAT):
                lo = hi = None
        stats[field.name] = ColumnStats(lo, hi, column.null_count, len(column))
    return stats


class FooterGaps:
    """What a Parquet footer cannot tell, gathered from the rows as they are written: which
    float columns hold NaN (writers leave NaN out of min/max), min/max of strings in row
    groups holding long values (writers drop a row group's string stats past a size limit,
    4 KiB in pyarrow, where a shorter file-wide min/max may still exist), and the top-level
    null counts of nested columns (the footer counts nulls per leaf)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.nan: set[str] = set()
        self.long_strings: dict[str, tuple[str, str]] = {}
        self.nested_nulls = {f.name: 0 for f in schema if pat.is_nested(f.type)}

    def add(self, table: pa.Table | pa.RecordBatch) -> None:
        for field, column in zip(table.schema, table.columns):
            if field.name in self.nested_nulls:
                self.nested_nulls[field.name] += column.null_count
            elif column.null_count == len(column):
                continue
            elif pat.is_floating(field.type) and field.name not in self.nan and pc.any(pc.is_nan(column)).as_py():
                self.nan.add(field.name)
            elif (pat.is_string(field.type) or pat.is_large_string(field.type)) and pc.max(
                pc.binary_length(column)
            ).as_py() > MAX_STRING_STAT:
                minmax = pc.min_max(column)
                lo, hi = minmax["min"].as_py(), minmax["max"].as_py()
                seen = self.long_strings.get(field.name)
                self.long_strings[field.name] = (min(lo, seen[0]), max(hi, seen[1])) if seen else (lo, hi)


def stats_from_parquet(metadata: pq.FileMetaData, schema: pa.Schema, gaps: FooterGaps) -> dict[str, ColumnStats]:
    """What ``table_stats`` of all the rows of a file gives, read from the footer its writer
    produced (``gaps``: what the footer cannot tell, gathered from the same rows).
    Recomputing min/max cost ~11% of an append (profile of a 5M-row append, issue 14).
    Per row group, Parquet min/max are exact for every type ``has_stats`` accepts: strings
    compare as UTF-8 bytes (code point order, as Arrow does) and timestamps are read as raw
    integers in the file's unit."""
    stats, leaves = {}, leaf_columns(schema)
    groups = [g for g in (metadata.row_group(i) for i in range(metadata.num_row_groups)) if g.num_rows]
    for field in schema:
        if pat.is_nested(field.type):
            stats[field.name] = ColumnStats(None, None, gaps.nested_nulls[field.name], metadata.num_rows)
            continue
        leaf = leaves[field.name]
        found = [_footer_stats(g.column(leaf), field, g.num_rows) for g in groups]
        pieces = [p for p in found if p is not None]
        if len(pieces) < len(found):  # a writer that wrote no stats
            stats[field.name] = ColumnStats(None, None, None, metadata.num_rows)
            continue
        covered = gaps.long_strings.get(field.name)
        nan = field.name in gaps.nan  # a row group of NaN alone has no min/max in the footer
        extremes = [(p.min, p.max) for p in pieces if p.null_count < p.row_count and p.min is not None]
        known = has_stats(field.type) and all(
            p.null_count == p.row_count or p.min is not None or covered or nan for p in pieces
        )
        lo = hi = None
        if known and (extremes or covered):
            extremes += [covered] if covered else []
            value_type = instant_type(field.type)
            lo = _as_value(min(e[0] for e in extremes), value_type)
            hi = None if nan else _as_value(max(e[1] for e in extremes), value_type)
            if isinstance(lo, str) and isinstance(hi, str) and (len(lo) > MAX_STRING_STAT or len(hi) > MAX_STRING_STAT):
                lo = hi = None
        stats[field.name] = ColumnStats(lo, hi, sum(p.null_count for p in pieces), metadata.num_rows)
    return stats


_PLAIN = {int: "is_integer", float: "is_floating", str: "is_string", bool: "is_boolean"}
"""Footer values that already are what ``pa.scalar(value, dtype).as_py()`` returns, by the
``pyarrow.types`` test of the column types they stand for (by name: importing this module
must not import pyarrow, which ``manifest-table count`` never loads)."""


def _as_value(value: Any, dtype: pa.DataType) -> Any:
    """``value`` (a footer's bound) as a Python value of ``dtype``: raw timestamps become
    datetimes, decimals take the column's scale. Integers, floats, strings and booleans
    are kept as read (20 round trips through a scalar were a tenth of a 1-row file's write)."""
    plain = _PLAIN.get(type(value))
    return value if plain is not None and getattr(pat, plain)(dtype) else pa.scalar(value, dtype).as_py()


def instant_type(dtype: pa.DataType) -> pa.DataType:
    """Zoned timestamps as UTC instants, as ``table_stats`` records them: wall clocks of a
    repeated daylight-saving hour do not order like the instants they name."""
    if pat.is_timestamp(dtype) and dtype.tz is not None:
        return pa.timestamp(dtype.unit, "UTC")
    return dtype


class _Chunk(NamedTuple):
    """One row group's stats of one column, as its footer has them."""

    min: Any
    max: Any
    null_count: int
    row_count: int


def _footer_stats(chunk: pq.ColumnChunkMetaData, field: pa.Field, rows: int) -> _Chunk | None:
    """One row group's stats of one flat column, min/max as values ``pa.scalar(v, field.type)``
    takes; None when the writer wrote no stats."""
    s = chunk.statistics
    if s is None or not s.has_null_count:
        return None
    lo = hi = None
    if s.has_min_max and has_stats(field.type):
        if pat.is_timestamp(field.type):  # seconds are stored as milliseconds
            scale = _UNITS[json.loads(s.logical_type.to_json())["timeUnit"]] // _UNITS[field.type.unit]
            lo, hi = s.min_raw // scale, s.max_raw // scale
        else:
            lo, hi = s.min, s.max
    return _Chunk(lo, hi, s.null_count, rows)


_UNITS = {
    "s": 1,
    "ms": 1000,
    "us": 10**6,
    "ns": 10**9,
    "milliseconds": 1000,
    "microseconds": 10**6,
    "nanoseconds": 10**9,
}


def leaf_columns(schema: pa.Schema) -> dict[str, int]:
    """Each flat top-level column of ``schema`` -> the index of its Parquet leaf column (its
    ``ColumnChunkMetaData``). Found by position, never by ``path_in_schema``: a column named
    ``a.b`` and the field ``b`` of a struct ``a`` have the same dotted path, and looking stats
    up by it gave one column the other's bounds."""
    leaves, leaf = {}, 0
    for field in schema:
        if not pat.is_nested(field.type):
            leaves[field.name] = leaf
        leaf += _nested_leaves(field.type)
    return leaves


def _nested_leaves(dtype: pa.DataType) -> int:
    """How many Parquet leaf columns a nested Arrow type becomes."""
    if pat.is_struct(dtype):
        return sum(_nested_leaves(f.type) for f in dtype)
    if pat.is_map(dtype):
        return _nested_leaves(dtype.key_type) + _nested_leaves(dtype.item_type)
    if pat.is_nested(dtype):
        return _nested_leaves(dtype.value_type)
    return 1


def merge_stats(a: ColumnStats, b: ColumnStats) -> ColumnStats:
    """Stats of the concatenation of two pieces of one column."""

    def merged(x: Any, y: Any, pick: Any) -> Any:
        return None if x is None or y is None else pick(x, y)

    assert (
        a.null_count is not None and b.null_count is not None and a.row_count is not None and b.row_count is not None
    ), "merged pieces have counts"
    # A piece with only nulls has no min/max yet does not make the merge unknown.
    if a.row_count == a.null_count:
        lo, hi = b.min, b.max
    elif b.row_count == b.null_count:
        lo, hi = a.min, a.max
    else:
        lo, hi = merged(a.min, b.min, min), merged(a.max, b.max, max)
    return ColumnStats(lo, hi, a.null_count + b.null_count, a.row_count + b.row_count)


def encode_stats(stats: Mapping[str, ColumnStats], schema: pa.Schema) -> dict[str, dict[str, Any]]:
    out = {}
    for field in schema:
        s = stats.get(field.name)
        if s is None:
            continue
        entry: dict[str, Any] = {"null_count": s.null_count}
        for key, bound in (("min", s.min), ("max", s.max)):
            encoded = None if bound is None else _encode_value(bound, field.type)
            if encoded is not None:
                entry[key] = encoded
        out[field.name] = entry
    return out


class StoredStats(Mapping[str, ColumnStats]):
    """One file's stats as a manifest stores them, decoded column by column on first use:
    committing or scanning without a filter never looks at them, and a big manifest would
    otherwise spend most of its parse time building values nobody reads."""

    __slots__ = ("_raw", "_schema", "_rows", "_decoded")

    def __init__(self, raw: Mapping[str, dict[str, Any]], schema: StoredSchema, rows: int) -> None:
        """``raw``: keyed by column name (``StoredSchema.by_name``); ``schema``: the version's."""
        self._raw, self._schema, self._rows = raw, schema, rows
        self._decoded: dict[str, ColumnStats] = {}

    def __getitem__(self, name: str) -> ColumnStats:
        found = self._decoded.get(name)
        if found is None:
            entry, dtype = self._raw[name], self._schema.types[name]
            lo = _decode_value(entry["min"], dtype) if "min" in entry else None
            hi = _decode_value(entry["max"], dtype) if "max" in entry else None
            found = self._decoded[name] = ColumnStats(lo, hi, entry.get("null_count"), self._rows)
        return found

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._raw if name in self._schema.types)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _encode_value(value: Any, dtype: pa.DataType) -> Any:
    if pat.is_floating(dtype):
        return value if value == value and abs(value) != float("inf") else None
    if pat.is_date32(dtype):
        return (value - dt.date(1970, 1, 1)).days
    if pat.is_timestamp(dtype) or pat.is_date64(dtype):
        # The physical integer: exact for every unit, nanoseconds included. (``.value`` is
        # that integer, without the cost of a cast kernel: it matters in big manifests.)
        return pa.scalar(value, dtype).value
    if pat.is_decimal(dtype):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _decode_value(value: Any, dtype: pa.DataType) -> Any:
    if pat.is_timestamp(dtype) and dtype.tz is not None:
        dtype = pa.timestamp(dtype.unit, "UTC")  # the same instant, compared as one
    if pat.is_timestamp(dtype) or pat.is_date64(dtype):
        return pa.scalar(value, dtype).as_py()  # an int is taken as the physical value
    if pat.is_date32(dtype):
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if pat.is_decimal(dtype):
        return decimal.Decimal(value)
    return value

"""The column types of the differential read-path test (tests/reads/test_differential.py): how each
makes its Arrow type, the values rows draw from, and the filter literals that probe it.

`KINDS` is the one list to extend: a new type is one `Kind` line (and, when filters can
compare it, a literal function). Each column gets a small pool of values (edges of its range,
NaN and signed zeros, awkward Unicode, instants around daylight-saving changes and before
1970), so that equality filters hit and statistics are narrow enough to prune. Literals are
drawn around the pool: the values themselves and their neighbours, fractions finer than the
column's unit (`id < 1.5` on an integer, half a second on `timestamp[s]`), and values beyond
the column's range (negative on unsigned, beyond int64, years outside nanoseconds' range).

The list holds every type a table supports (docs/writing.md, "Column types"); the types
refused when a column is made (float16, decimal256, views, dictionaries, `null`, unions, ...)
are left out: tests/reads/test_column_types.py checks that they are refused.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Context, Decimal, localcontext
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tests.filter_generator import FilterColumn, Text, like_pattern, quoted_name, same, string_literal

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1)
_IDENTS = itertools.count()
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham"]


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    kind: Kind
    pool: tuple[Any, ...]
    """Non-null values that rows draw from (Python values ``pa.array`` takes)."""
    nullable: bool = True
    null_rate: float = 0.15
    ident: int = field(default_factory=lambda: next(_IDENTS), compare=False)
    """Model-only: the column through renames and widenings (as its field id is the table's)."""

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, self.nullable)

    def filter_column(self) -> FilterColumn:
        quoted = quoted_name(self.name)
        literal = self.kind.literal
        pattern = self.kind.like
        return FilterColumn(quoted, self.kind.duck_ref(quoted),
                            (lambda rng: literal(rng, self)) if literal else None,  # type: ignore[misc]
                            (lambda rng: pattern(rng, self)) if pattern else None,  # type: ignore[misc]
                            integer=pa.types.is_integer(self.type))

    def value(self, rng: random.Random) -> Any:
        return None if (self.nullable and rng.random() < self.null_rate) or not self.pool else rng.choice(self.pool)


@dataclass(frozen=True)
class Kind:
    label: str
    make: Callable[[random.Random, list[Kind]], pa.DataType]
    """The type (nested types draw their children from the kinds given)."""
    pool: Callable[[random.Random, pa.DataType], list[Any]]
    literal: Callable[[random.Random, Column], Text] | None = None
    """Filter literals (None: only IS [NOT] NULL filters this column)."""
    like: Callable[[random.Random, Column], str] | None = None
    duck_ref: Callable[[str], str] = lambda name: name
    """How DuckDB names the column's values in a filter (nanoseconds: as an integer)."""
    spark: bool = True
    """Spark reads it (the Spark sample draws only from these)."""
    widen: Callable[[pa.DataType], list[pa.DataType]] = lambda t: []
    """Types ``update_schema().widen`` may move a column of this type to."""
    scalar: bool = True
    """Usable as a child of a nested type and as an ``update`` value."""

    def column(self, rng: random.Random, name: str, kinds: list[Kind]) -> Column:
        arrow_type = self.make(rng, kinds)
        return Column(name, arrow_type, self, tuple(self.pool(rng, arrow_type)),
                      null_rate=rng.choice([0.0, 0.1, 0.3, 0.6]))


# --- integers --------------------------------------------------------------------------------
def int_range(t: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min), int(info.max)


def int_pool(rng: random.Random, t: pa.DataType) -> list[int]:
    lo, hi = int_range(t)
    center = rng.choice([0, lo + 3, hi - 3, rng.randint(lo, hi), rng.randint(-1000, 1000)])
    values = {min(hi, max(lo, center + rng.randint(-4, 4))) for _ in range(6)}
    return sorted(values | ({lo, hi} if rng.random() < 0.4 else set()))


EXACT = Context(prec=100)
"""Decimal arithmetic on literals without rounding (the default context keeps 28 digits)."""


def plain(value: Decimal) -> str:
    return format(value, "f")


def int_literal(rng: random.Random, column: Column) -> Text:
    lo, hi = int_range(column.type)
    v = rng.choice(column.pool)
    roll = rng.random()
    if roll < 0.4:
        return same(str(v + rng.choice([0, 0, -1, 1])))
    if roll < 0.7:  # a fraction: id < 1.5 must keep id = 1 (issue 18 item 2)
        return same(plain(EXACT.add(Decimal(v), rng.choice([Decimal("0.5"), Decimal("-0.5"), Decimal("0.001")]))))
    if roll < 0.8:  # a double: the column compares as doubles
        return same(f"{v}.5e0" if rng.random() < 0.5 else f"{v}e0")
    return same(rng.choice([str(lo - 1), str(hi + 1), "-1", str(2**64), str(-(2**63) - 1), str(10**20),
                            f"{hi}.5", f"{lo}.5", "-0.5"]))


def signed_wider(t: pa.DataType) -> list[pa.DataType]:
    return [w for w in (pa.int16(), pa.int32(), pa.int64()) if w.bit_width > t.bit_width]


# --- floats ------------------------------------------------------------------------------------
SPECIAL_FLOATS = [float("nan"), -0.0, 0.0, float("inf"), float("-inf")]


def float_pool(rng: random.Random, t: pa.DataType) -> list[float]:
    center = rng.choice([0.0, 1.0, rng.uniform(-1e6, 1e6), 1e300, -3.4e38])
    values = [center + rng.choice([0.0, 0.1, 0.5, 1.5, -2.5, 1e-7]) for _ in range(5)]
    values += rng.sample(SPECIAL_FLOATS, 3)
    if t == pa.float32():
        with np.errstate(over="ignore"):  # 1e300 as float32 is infinity
            return [float(np.float32(v)) for v in values]
    return values


def float_literal(rng: random.Random, column: Column) -> Text:
    finite = [v for v in column.pool if v == v and abs(v) != float("inf")] or [0.0]
    v = rng.choice(finite)
    text = repr(v)
    roll = rng.random()
    if roll < 0.15:
        return same(rng.choice(["0", "-0.0", "0.0e0", "-0.0e0", "1", "1.5e0", "1e300", "-1e300"]))
    if roll < 0.55 and "e" not in text and "inf" not in text and len(text) <= 18:
        if column.type == pa.float32() and rng.random() < 0.5:
            text = str(np.float32(v))  # the shortest text that casts back to this float32
        return same(text)  # an exact literal: cast to float32 on a float32 column (DuckDB too)
    return same(text if "e" in text else text + "e0")  # a double


# --- decimals ------------------------------------------------------------------------------------
def decimal_type(rng: random.Random, kinds: list[Kind]) -> pa.DataType:
    precision = rng.choice([1, 5, 10, 18, 19, 30, 38])
    return pa.decimal128(precision, rng.randint(0, min(precision, 10)))


def decimal_pool(rng: random.Random, t: pa.DataType) -> list[Decimal]:
    with localcontext(EXACT):
        return decimal_values(rng, t)


def decimal_values(rng: random.Random, t: pa.DataType) -> list[Decimal]:
    unit = Decimal(1).scaleb(-t.scale)
    top = Decimal(10 ** t.precision - 1).scaleb(-t.scale)
    center = rng.choice([0, rng.randint(-(10 ** t.precision) + 1, 10 ** t.precision - 1)])
    values = {max(-top, min(top, Decimal(center + rng.randint(-3, 3)).scaleb(-t.scale))) for _ in range(5)}
    values |= {top, -top} if rng.random() < 0.4 else set()
    return sorted(v.quantize(unit) for v in values)


def decimal_literal(rng: random.Random, column: Column) -> Text:
    with localcontext(EXACT):
        return decimal_text(rng, column.type, rng.choice(column.pool))


def decimal_text(rng: random.Random, t: pa.DataType, v: Decimal) -> Text:
    unit = Decimal(1).scaleb(-t.scale)
    roll = rng.random()
    if roll < 0.4:
        near = v + rng.choice([0, 0, unit, -unit])  # one unit past a 38-digit edge is 39 digits: DuckDB
        return same(plain(near if len(near.as_tuple().digits) <= 38 else v))  # makes that a double
    if roll < 0.6 and t.precision < 37:  # finer than the scale
        return same(plain(v + rng.choice([unit / 2, -unit / 10])))
    if roll < 0.7 and t.precision < 37:
        return same(plain(v) + ("0" if t.scale else ".0"))  # trailing zeros: the same value
    if roll < 0.8 and t.precision <= 30:  # a double; DuckDB's doubles of 38-digit decimals can be off by one
        return same(f"{float(v)!r}e0" if "e" not in repr(float(v)) else repr(float(v)))  # ulp (9 in 2,000)
    if t.precision > 36:  # DuckDB's decimals stop at 38 digits: it refuses (or rounds) literals beyond them
        return same(plain(v))
    return same(plain(rng.choice([Decimal(10) ** (t.precision - t.scale), -(Decimal(10) ** (t.precision - t.scale)),
                                  Decimal(10) ** (t.precision - t.scale) - unit / 2])))


# --- strings and binaries --------------------------------------------------------------------------
AWKWARD_STRINGS = [
    "", "a", "ab", "A", "a%b", "a_b", "a\\b", "\\", "%", "_", "it's", 'say "hi"', "ä", "äb", "a\u0308", "e\u0301",
    "日本語", "😀", "😀x", "\u200b", "x\ny", "\t", " lead", "trail ", "שלום", "\U0010ffff", "\x7f", "ß", "ẞ", "a\x00b",
    "z" * 300, "a" * 257 + "b",
]


def string_pool(rng: random.Random, t: pa.DataType) -> list[str]:
    return rng.sample(AWKWARD_STRINGS, 5) + ["".join(rng.choice("abcxyzä") for _ in range(rng.randint(1, 4)))]


def string_literal_of(rng: random.Random, column: Column) -> Text:
    v = rng.choice(column.pool) if rng.random() < 0.7 else rng.choice(AWKWARD_STRINGS)
    if rng.random() < 0.2:
        v = v[: rng.randint(0, len(v))]  # a prefix: below the value
    return same(string_literal(v))


def like_escape(value: str) -> str:
    return "".join("\\" + c if c in "%_\\" else c for c in value)


def string_like(rng: random.Random, column: Column) -> str:
    if rng.random() < 0.4:
        return like_pattern(rng)
    v = rng.choice(column.pool)
    return like_escape(v[: rng.randint(0, len(v))]) + rng.choice(["%", "_%", "", "%a", "_"])


def binary_pool(rng: random.Random, t: pa.DataType) -> list[bytes]:
    size = t.byte_width if pa.types.is_fixed_size_binary(t) else None
    return [bytes(rng.randrange(256) for _ in range(size if size is not None else rng.randint(0, 5)))
            for _ in range(5)]


# --- dates, times, timestamps --------------------------------------------------------------------------
def date_pool(rng: random.Random, t: pa.DataType) -> list[dt.date]:
    center = rng.choice([dt.date(1970, 1, 1), dt.date(2024, 2, 28), dt.date(1900, 1, 1),
                         dt.date(rng.randint(1600, 2400), 1, 1)])
    values = {center + dt.timedelta(days=rng.randint(-3, 3)) for _ in range(5)}
    return sorted(values | ({dt.date(1, 1, 1), dt.date(9999, 12, 31)} if rng.random() < 0.3 else set()))


def date_literal(rng: random.Random, column: Column) -> Text:
    day = rng.choice(column.pool)
    try:
        day += dt.timedelta(days=rng.choice([0, 0, 1, -1]))
    except OverflowError:
        pass
    return same(f"DATE '{day.isoformat()}'")


PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
DST_CHANGES = [dt.datetime(2024, 10, 27, 1), dt.datetime(2024, 3, 31, 1), dt.datetime(2024, 11, 3, 6),
               dt.datetime(2024, 4, 6, 15)]  # Berlin back and forward, New York back, Lord Howe back (UTC)


def timestamp_type(unit: str, zoned: bool) -> Callable[[random.Random, list[Kind]], pa.DataType]:
    return lambda rng, kinds: pa.timestamp(unit, tz=rng.choice(ZONES) if zoned else None)


def timestamp_pool(rng: random.Random, t: pa.DataType) -> list[Any]:
    """Values as integers of the unit around a centre (before 1970 too), then Python values:
    ``pandas.Timestamp`` for nanoseconds (a ``datetime`` stops at microseconds)."""
    per = PER_SECOND[t.unit]
    lowest, highest = (1678, 2261) if t.unit == "ns" else (1, 9998)
    center = rng.choice(DST_CHANGES + [EPOCH, dt.datetime(1969, 12, 31, 23, 59, 59),
                                       dt.datetime(rng.randint(lowest, highest), 6, 1)])
    base = (center - EPOCH) // dt.timedelta(seconds=1) * per
    steps = [per * 900, per * 60, per, max(1, per // 1000), 1]  # 15 minutes .. one unit
    values = {base + rng.choice([-1, 1]) * rng.choice(steps) * rng.randint(0, 3) for _ in range(6)}
    if t.unit != "ns" and rng.random() < 0.3:
        values |= {(dt.datetime(1, 1, 1) - EPOCH) // dt.timedelta(seconds=1) * per}
    return [timestamp_value(v, t) for v in sorted(values)]


def timestamp_value(count: int, t: pa.DataType) -> Any:
    if t.unit == "ns":
        return pd.Timestamp(count, unit="ns", tz="UTC" if t.tz else None)
    moment = EPOCH + dt.timedelta(microseconds=count * (1_000_000 // PER_SECOND[t.unit]))
    return moment.replace(tzinfo=UTC) if t.tz else moment


def epoch_us(value: Any) -> int:
    if isinstance(value, pd.Timestamp):
        return value.value // 1000  # floor: a literal has microseconds at most
    return (value.replace(tzinfo=None) - EPOCH) // dt.timedelta(microseconds=1)


SUB_UNIT_US = {"s": [500_000, -500_000, 1, -1, 1_000_000], "ms": [500, -500, 1, -1, 1_000], "us": [1, -1],
               "ns": [1, -1]}


def timestamp_literal(rng: random.Random, column: Column) -> Text:
    """Around a pool value (a fraction of the unit off, issue 18 item 2), or far outside the
    range. Zoned columns take naive (UTC) literals and literals with an offset; DuckDB reads
    them as TIMESTAMPTZ in a UTC session. On nanosecond columns DuckDB compares the epoch
    nanoseconds as integers: its TIMESTAMP_NS refuses literals beyond 2262 and TIMESTAMPTZ_NS
    will not compare with TIMESTAMPTZ."""
    t = column.type
    roll = rng.random()
    if roll < 0.1:
        moment = rng.choice([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                             dt.datetime(2300, 1, 1)])
    else:
        moment = EPOCH + dt.timedelta(microseconds=epoch_us(rng.choice(column.pool)))
        try:
            moment += dt.timedelta(microseconds=rng.choice(SUB_UNIT_US[t.unit]) if roll < 0.6 else 0)
        except OverflowError:  # year 1 minus half a second
            pass
    if t.unit == "ns":
        duck = str((moment - EPOCH) // dt.timedelta(microseconds=1) * 1000)
        if t.tz is None and rng.random() < 0.15 and moment.time() == dt.time(0):
            return Text(f"DATE '{moment.date().isoformat()}'", duck)
        return Text(f"TIMESTAMP '{moment.isoformat(sep=' ')}'", duck)
    if t.tz is None:
        if rng.random() < 0.1:
            return same(f"DATE '{moment.date().isoformat()}'")
        return same(f"TIMESTAMP '{moment.isoformat(sep=' ')}'")
    hours = rng.choice([None, 0, 1, 5.5, -5, 12.75])
    shown = moment.isoformat(sep=" ")
    if hours is not None:
        try:
            shown = moment.replace(tzinfo=UTC).astimezone(dt.timezone(dt.timedelta(hours=hours))).isoformat(sep=" ")
        except OverflowError:
            pass
    return Text(f"TIMESTAMP '{shown}'", f"TIMESTAMPTZ '{shown}'")


def epoch_ns_ref(name: str) -> str:
    return f"epoch_ns({name})"


def time_pool(rng: random.Random, t: pa.DataType) -> list[dt.time]:
    fraction = {"s": 0, "ms": 1000}.get(t.unit, 1)
    return [dt.time(rng.randrange(24), rng.randrange(60), rng.randrange(60), rng.randrange(1000) * fraction)
            for _ in range(4)] + [dt.time(0), dt.time(23, 59, 59)]


def duration_pool(rng: random.Random, t: pa.DataType) -> list[dt.timedelta]:
    micro = {"s": 0, "ms": 1000}.get(t.unit, 1)
    return [dt.timedelta(seconds=rng.randint(-10**6, 10**6), microseconds=rng.randrange(1000) * micro)
            for _ in range(5)]


# --- nested ------------------------------------------------------------------------------------------
def nested_children(rng: random.Random, count: int, kinds: list[Kind]) -> list[Column]:
    chosen = [k for k in kinds if k.scalar]
    return [rng.choice(chosen).column(rng, f"f{n}", kinds) for n in range(count)]


def struct_type(rng: random.Random, kinds: list[Kind]) -> pa.DataType:
    return pa.struct([c.field for c in nested_children(rng, rng.randint(1, 3), kinds)])


def list_type(factory: Callable[..., pa.DataType], *size: int) -> Callable[[random.Random, list[Kind]], pa.DataType]:
    return lambda rng, kinds: factory(nested_children(rng, 1, kinds)[0].type, *size)


def map_type(rng: random.Random, kinds: list[Kind]) -> pa.DataType:
    return pa.map_(pa.string(), nested_children(rng, 1, kinds)[0].type)


def child_column(rng: random.Random, t: pa.DataType, name: str = "f") -> Column:
    kind = kind_of(t)
    return Column(name, t, kind, tuple(kind.pool(rng, t)), null_rate=0.2)


def struct_pool(rng: random.Random, t: pa.DataType) -> list[dict[str, Any]]:
    children = [child_column(rng, f.type, f.name) for f in t]
    return [{c.name: c.value(rng) for c in children} for _ in range(5)]


def list_pool(rng: random.Random, t: pa.DataType) -> list[list[Any]]:
    child = child_column(rng, t.value_type)
    sizes = [t.list_size] if pa.types.is_fixed_size_list(t) else [0, 1, 2, 3]
    return [[child.value(rng) for _ in range(rng.choice(sizes))] for _ in range(5)]


def map_pool(rng: random.Random, t: pa.DataType) -> list[list[tuple[str, Any]]]:
    values = child_column(rng, t.item_type)
    return [[(key, values.value(rng)) for key in rng.sample(AWKWARD_STRINGS[:12], rng.randint(0, 3))]
            for _ in range(5)]


# --- the list ------------------------------------------------------------------------------------------
def fixed(t: pa.DataType) -> Callable[[random.Random, list[Kind]], pa.DataType]:
    return lambda rng, kinds: t


def integer(t: pa.DataType, widen: bool = False) -> Kind:
    return Kind(str(t), fixed(t), int_pool, int_literal, widen=signed_wider if widen else lambda t: [])


def timestamp(unit: str, zoned: bool) -> Kind:
    ns = unit == "ns"
    return Kind(f"timestamp[{unit}]{'+tz' if zoned else ''}", timestamp_type(unit, zoned), timestamp_pool,
                timestamp_literal, duck_ref=epoch_ns_ref if ns else (lambda name: name))


ALL_KINDS: list[Kind] = [
    integer(pa.int8(), widen=True), integer(pa.int16(), widen=True), integer(pa.int32(), widen=True),
    integer(pa.int64()), integer(pa.uint8()), integer(pa.uint32()), integer(pa.uint64()),
    Kind("float32", fixed(pa.float32()), float_pool, float_literal, widen=lambda t: [pa.float64()]),
    Kind("float64", fixed(pa.float64()), float_pool, float_literal),
    Kind("decimal128", decimal_type, decimal_pool, decimal_literal,
         widen=lambda t: [pa.decimal128(min(38, t.precision + 3), t.scale)]),
    Kind("string", fixed(pa.string()), string_pool, string_literal_of, string_like),
    Kind("large_string", fixed(pa.large_string()), string_pool, string_literal_of, string_like),
    Kind("binary", fixed(pa.binary()), binary_pool),
    Kind("large_binary", fixed(pa.large_binary()), binary_pool),
    Kind("fixed_size_binary", fixed(pa.binary(3)), binary_pool),
    Kind("bool", fixed(pa.bool_()), lambda rng, t: [True, False], lambda rng, c: same(rng.choice(["TRUE", "FALSE"]))),
    Kind("date32", fixed(pa.date32()), date_pool, date_literal),
    Kind("date64", fixed(pa.date64()), date_pool, date_literal),
    *[timestamp(unit, zoned) for unit in ("s", "ms", "us", "ns") for zoned in (False, True)],
    Kind("time32", lambda rng, kinds: pa.time32(rng.choice(["s", "ms"])), time_pool),
    Kind("time64", lambda rng, kinds: pa.time64(rng.choice(["us", "ns"])), time_pool),
    Kind("duration", lambda rng, kinds: pa.duration(rng.choice(["s", "ms", "us", "ns"])), duration_pool),
    Kind("struct", struct_type, struct_pool, scalar=False),
    Kind("list", list_type(pa.list_), list_pool, scalar=False),
    Kind("large_list", list_type(pa.large_list), list_pool, scalar=False),
    Kind("fixed_size_list", list_type(pa.list_, 2), list_pool, scalar=False),
    Kind("map", map_type, map_pool, scalar=False),
]
BY_LABEL = {k.label: k for k in ALL_KINDS}
SKIPPED = {label.strip() for label in os.environ.get("MT_DIFF_SKIP_KINDS", "").split(",") if label.strip()}
"""Labels left out of every schema and schema change (to look past a known bug)."""
assert SKIPPED <= set(BY_LABEL), f"MT_DIFF_SKIP_KINDS names unknown types {SKIPPED - set(BY_LABEL)}"
KINDS = [k for k in ALL_KINDS if k.label not in SKIPPED]


def kind_of(t: pa.DataType) -> Kind:
    """The kind of an Arrow type (a nested child's, or a widened column's)."""
    if pa.types.is_timestamp(t):
        return BY_LABEL[f"timestamp[{t.unit}]{'+tz' if t.tz else ''}"]
    if pa.types.is_integer(t):
        return BY_LABEL[str(t)]
    return next(BY_LABEL[label] for test, label in TYPE_TESTS if test(t))


TYPE_TESTS = [(getattr(pa.types, f"is_{name}"), label) for name, label in [
    ("float32", "float32"), ("float64", "float64"), ("decimal128", "decimal128"), ("string", "string"),
    ("large_string", "large_string"), ("binary", "binary"), ("large_binary", "large_binary"),
    ("fixed_size_binary", "fixed_size_binary"), ("boolean", "bool"), ("date32", "date32"), ("date64", "date64"),
    ("time32", "time32"), ("time64", "time64"), ("duration", "duration"), ("struct", "struct"),
    ("large_list", "large_list"), ("fixed_size_list", "fixed_size_list"), ("list", "list"), ("map", "map")]]


def widened(column: Column, new_type: pa.DataType) -> Column:
    return replace(column, type=new_type, kind=kind_of(new_type))


ID = Column("id", pa.int64(), BY_LABEL["int64"], (0, 1, 2, 5, 10, 20, 50, 100, 200, 400), nullable=False)
"""Every table's first column: unique, never null, the key of upserts and updates."""

AWKWARD_NAMES = ["naïve", "with space", 'say "x"', "select", "AND", "日本", "x-y", "9lives", "dot.ted", "Größe"]


@dataclass(frozen=True)
class Shape:
    """What the tables of a run may look like."""

    kinds: list[Kind]
    """Column types (nested children and columns added later included)."""
    always: tuple[str, ...] = ()
    """Labels of kinds every table has a column of."""
    nullable_id: bool = False
    """Declare ``ID`` nullable (Spark's native writer writes only nullable columns)."""
    collisions: bool = True
    """Sometimes a struct ``a{b}`` beside a column named ``a.b`` whose values differ (their
    statistics must not collide: issue 18 item 6)."""


def random_columns(rng: random.Random, chosen: list[Kind], shape: Shape) -> list[Column]:
    """``ID`` and a column of each of ``chosen`` (and of ``shape.always``)."""
    columns = [replace(ID, nullable=shape.nullable_id)]
    taken = {"id"}
    for n, kind in enumerate(chosen + [BY_LABEL[label] for label in shape.always]):
        name = rng.choice(AWKWARD_NAMES) if rng.random() < 0.2 else f"c{n}"
        name = name if name.lower() not in taken else f"c{n}"
        taken.add(name.lower())
        columns.append(kind.column(rng, name, shape.kinds))
    if shape.collisions and rng.random() < 0.25 and "a" not in taken and "a.b" not in taken:
        inner = Column("b", pa.int64(), BY_LABEL["int64"], tuple(range(0, 10)))
        pair = [Column("a", pa.struct([inner.field]), BY_LABEL["struct"], tuple({"b": v} for v in inner.pool)),
                Column("a.b", pa.int64(), BY_LABEL["int64"], tuple(range(100, 110)))]
        for column in pair if rng.random() < 0.5 else pair[::-1]:  # which comes first matters
            columns.insert(rng.randint(1, len(columns)), column)
    return columns


def random_rows(rng: random.Random, columns: list[Column], ids: list[int]) -> pa.Table:
    """Rows with these ids; sometimes sorted by one column (narrow statistics per file and
    row group)."""
    rows = [list(ids)] + [[c.value(rng) for _ in ids] for c in columns[1:]]
    if len(columns) > 1 and rng.random() < 0.3:
        sorted_by = rng.randrange(1, len(columns))
        order = sorted(range(len(ids)), key=lambda i: sort_key(rows[sorted_by][i]))
        rows = [rows[0]] + [[values[i] for i in order] for values in rows[1:]]
    schema = pa.schema([c.field for c in columns])
    return pa.Table.from_arrays([pa.array(values, c.type) for values, c in zip(rows, columns)], schema=schema)


def sort_key(value: Any) -> tuple[int, str]:
    return (value is None, repr(value))

"""Literals and types: what a filter may compare with, how it is written as text, and how a
literal becomes the Python value of a column's Arrow type when an expression is bound."""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..arguments import did_you_mean
from ..errors import InvalidFilterError

Value = bool | int | float | str | Decimal | dt.date | dt.datetime
"""A literal. `bool` is its own kind: TRUE never stands for 1 against an integer column."""

BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
RESERVED = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ILIKE", "BETWEEN", "TRUE", "FALSE"})
"""Words that cannot be bare column names. DATE and TIMESTAMP are not here: they only start a
literal when a string follows, so columns called `date` need no quoting."""

OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
INVERSE = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}

MAX_DIGITS = 1000
"""Digits an integer or decimal literal may have: far beyond any column type, and short of
Python's limit on int <-> str conversion (4,300 digits), which renders literals as text."""


def filter_error(message: str, position: int | None = None) -> InvalidFilterError:
    """An InvalidFilterError carrying `.position` (index into the filter text, or None)."""
    error = InvalidFilterError(message)
    error.position = position  # type: ignore[attr-defined]
    return error


QUOTE_HINT = " (string literals take single quotes, as in name = 'DE'; double quotes name a column)"


def unknown_column(name: str, names: list[str]) -> InvalidFilterError:
    """The error for a column the schema lacks: the nearest name if one is near, else the
    hint a SQL user needs when ``country = "DE"`` made ``DE`` a column name."""
    hint = did_you_mean([name], names) or (
        f" (if {name!r} is a string, write it in single quotes: {render_literal(name)}; double quotes name a column)"
    )
    return filter_error(f"unknown column {name!r}{hint}; available columns: {', '.join(names) or '(none)'}")


def literal(value: Any) -> Value:
    """Validate a literal; numpy scalars become Python values so they render and compare."""
    if type(value).__module__ == "numpy":
        value = value.item()
    if value is None:
        raise filter_error("NULL is not a value to compare with; use IS NULL / IS NOT NULL")
    if isinstance(value, str):
        return checked_text(value)
    if isinstance(value, dt.datetime) and type(value) is not dt.datetime:
        return _plain_datetime(value)
    if isinstance(value, bool | dt.date):
        return value
    if isinstance(value, int):
        if value.bit_length() > MAX_DIGITS * 10 // 3:  # > 10**MAX_DIGITS
            raise filter_error(f"integer literal of {value.bit_length()} bits is too large")
        return int(value)
    if isinstance(value, float | Decimal):
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        if not finite:
            raise filter_error(f"literal {value!r} is not a finite number")
        if isinstance(value, Decimal) and (
            len(value.as_tuple().digits) > MAX_DIGITS or abs(value.adjusted()) > MAX_DIGITS
        ):
            raise filter_error(f"decimal literal {value:.6e} has more than {MAX_DIGITS} digits")
        return float(value) if isinstance(value, float) else value
    raise filter_error(f"unsupported literal {value!r} of type {type(value).__name__}")


def _plain_datetime(value: dt.datetime) -> dt.datetime:
    """A datetime subclass (pandas' ``Timestamp``) as a ``datetime``, refused when it holds
    nanoseconds: literals are Python datetimes (microseconds), and a dropped nanosecond
    compares another instant (``t > 00:00:01.0000005`` would select 00:00:01.0000004)."""
    if getattr(value, "nanosecond", 0):
        raise filter_error(f"timestamp literal {value} is finer than a microsecond, the precision of literals")
    return dt.datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        value.tzinfo,
        fold=value.fold,
    )


def timestamp_from_text(text: str) -> dt.datetime:
    """ISO 8601 text as a datetime; ValueError for a fraction finer than a microsecond
    (Python's parser silently drops the digits past the sixth)."""
    fraction = _FRACTION.search(text)
    if fraction and fraction.group(1)[6:].strip("0"):
        raise ValueError("a fraction finer than a microsecond, the precision of literals")
    return dt.datetime.fromisoformat(text)


_FRACTION = re.compile(r"[.,]([0-9]+)")


def checked_text(value: str) -> str:
    """A string literal or pattern, refused when it is not Unicode that UTF-8 (Arrow's
    strings) can hold: a lone surrogate would fail deep inside Arrow instead."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise filter_error(f"string {value!r} is not valid Unicode ({error.reason})") from None
    return value


def quote_name(name: str) -> str:
    """A column name as filter text: bare when it can be, else double-quoted."""
    if BARE_NAME.fullmatch(name) and name.upper() not in RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def render_literal(value: Value) -> str:
    """A literal as filter text that `parse()` reads back to the same value."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):  # always with an exponent, so that it reads back as a float
        text = float.__repr__(value)
        return text if "e" in text else text + "e0"
    return str(value)


def convert(arrow_type: pa.DataType, value: Value) -> Value:
    """`value` as the Python type of `arrow_type`, exact: SQL compares an integer or decimal
    literal with a column by value, never through a binary float. TypeError/ValueError when
    incompatible. The roundings are SQL's own: an exact literal against a float32 column is
    cast to float32, as DuckDB does (`f32 = 0.1` matches the float32 nearest 0.1; Spark and
    PostgreSQL widen the column instead, docs/expressions.md), while a float literal (`0.1e0`,
    a Python float) compares as a double, widening a float32 or integer column."""
    types = pa.types
    if types.is_boolean(arrow_type) and isinstance(value, bool):
        return value
    if isinstance(value, bool):
        raise TypeError
    if types.is_integer(arrow_type) and isinstance(value, int | float | Decimal):
        if isinstance(value, float):
            return value  # a double: the column is compared as doubles, as SQL engines do
        return int(value) if value == int(value) else value  # a fraction stays an exact Decimal
    if types.is_floating(arrow_type) and isinstance(value, int | float | Decimal):
        if isinstance(value, float) or types.is_float64(arrow_type):
            return float(value)
        return to_float32(float(value))
    if types.is_decimal(arrow_type) and isinstance(value, int | float | Decimal):
        return value if isinstance(value, float) else Decimal(value)  # a double compares as doubles
    if is_string(arrow_type) and isinstance(value, str):
        return value
    if types.is_timestamp(arrow_type):
        return _to_timestamp(value, arrow_type.tz)
    if types.is_date(arrow_type) and not isinstance(value, dt.datetime):
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            return dt.date.fromisoformat(value)
    raise TypeError


def to_float32(value: float) -> float:
    """The float32 nearest `value` (as a Python float); OverflowError beyond float32's range."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _to_timestamp(value: Value, tz: str | None) -> dt.datetime:
    """Against a zoned column, a literal is an instant, bound in UTC: a naive literal is taken
    as UTC. (Python compares two datetimes of one zone by wall clock, so the second 02:30 of a
    repeated daylight-saving hour would equal the first; in UTC, instants compare as instants.)
    Against a naive column, a literal with an offset is an error rather than a guess."""
    if isinstance(value, str):
        value = timestamp_from_text(value)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise TypeError
    if tz is None:
        if value.tzinfo is not None:
            raise TypeError("the column has no time zone; drop the offset from the literal")
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def is_string(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)

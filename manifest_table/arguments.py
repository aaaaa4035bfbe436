"""Checking the arguments of public calls, in one place, so that a caller's mistake is an
``InvalidArgumentError`` naming the argument and the value, raised before anything is read
or written, never a ``TypeError`` from deep inside (``'<' not supported between ...``)."""

from __future__ import annotations

import difflib
import math
import numbers
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, overload

from .errors import InvalidArgumentError


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_int(name: str, value: Any, minimum: int | None = None) -> int:
    """An integer (numpy integers too; not a bool, float or string) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} must be an integer, not {_describe(value)}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, not {value}")
    return int(value)


def check_number(name: str, value: Any, minimum: float = 0.0, *, positive: bool = False) -> float:
    """A finite real number (not a bool or string) of at least ``minimum`` (above 0 when
    ``positive``). NaN is refused: every comparison with it is false, so a NaN limit would
    silently mean no limit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InvalidArgumentError(f"{name} must be a finite number, not {_describe(value)}")
    if value < minimum or (positive and value <= 0):
        raise InvalidArgumentError(f"{name} must be {'above 0' if positive else f'at least {minimum}'}, not {value}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """``True`` or ``False``: a string such as ``"no"`` would otherwise count as true."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, not {_describe(value)}")
    return value


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.IGNORECASE)
_DURATION_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
    **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")},
}


Duration = timedelta | str | float
"""A ``timedelta``, a duration string (``"7d"``, ``"36h"``) or a number of seconds."""
Seconds = float | timedelta | str
"""Seconds as a number, a ``timedelta`` or a duration string (``"30s"``)."""
Size = int | str
"""Bytes as an integer or a size string (``"128MiB"``)."""


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``24h``, ``7d``, ``2w`` or ``0``: the one parser of durations, for the
    CLI and the Python API alike."""
    if text.strip() == "0":
        return timedelta(0)
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise InvalidArgumentError(f"not a duration: {text!r} (use e.g. 90s, 30m, 24h, 7d, 2w)")
    try:
        return timedelta(**{_DURATION_UNITS[match[2].lower()]: float(match[1])})
    except OverflowError:
        raise InvalidArgumentError(f"duration {text!r} is too long (at most {timedelta.max.days} days)") from None


def format_duration(value: timedelta) -> str:
    """``value`` as ``parse_duration`` reads it, in the largest unit that holds it exactly
    (``6h``, ``90m``, ``2.5s``; days from two on: ``24h``, ``7d``): how durations are stored
    and shown."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit == "d" else 1) and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s" if seconds else "0"


def parse_size(text: str) -> int:
    """Bytes: ``134217728``, ``128MiB``, ``64MB``, ``1GiB``: the one parser of sizes."""
    match = _SIZE.fullmatch(text.strip())
    if not match or float(match[1]) <= 0:
        raise InvalidArgumentError(f"not a positive size: {text!r} (use e.g. 128MiB, 64MB, 1GiB)")
    return int(float(match[1]) * _SIZE_UNITS[(match[2] or "").lower()])


@overload
def check_duration(name: str, value: Any, optional: Literal[False] = False) -> timedelta: ...
@overload
def check_duration(name: str, value: Any, optional: bool) -> timedelta | None: ...
def check_duration(name: str, value: Any, optional: bool = False) -> timedelta | None:
    """A non-negative ``datetime.timedelta``, a string ``parse_duration`` reads (``"7d"``), a
    number of seconds (``0``, ``90``, ``1.5``: ``timedelta(seconds=n)``, the unit of every
    other time in seconds here), or None when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            value = timedelta(seconds=check_number(name, value, minimum=-math.inf))
        except OverflowError:
            raise InvalidArgumentError(
                f"{name} is too long: {value} seconds (at most {timedelta.max.days} days)"
            ) from None
    if not isinstance(value, timedelta):
        raise InvalidArgumentError(
            f"{name} must be a datetime.timedelta (e.g. timedelta(days=7)), a number of seconds or "
            f"a duration such as '7d'{' or None' if optional else ''}, not {_describe(value)}"
        )
    if value < timedelta(0):
        raise InvalidArgumentError(f"{name} cannot be negative, not {value}")
    return value


def check_seconds(name: str, value: Any, *, positive: bool = False) -> float:
    """Seconds: a number, a ``timedelta`` or a duration string (``"30s"``, ``"2m"``)."""
    if isinstance(value, str | timedelta):
        value = check_duration(name, value).total_seconds()
    return check_number(name, value, positive=positive)


def check_size(name: str, value: Any) -> int:
    """Bytes: an integer of at least 1, or a size string ``parse_size`` reads (``"128MiB"``)."""
    if isinstance(value, str):
        return parse_size(value)
    return check_int(name, value, minimum=1)


def check_string(name: str, value: Any) -> str:
    """A non-empty string of valid Unicode (``check_unicode``)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{name} must be a non-empty string, not {_describe(value)}")
    return check_unicode(name, value)


def check_unicode(name: str, value: str) -> str:
    """``value`` if UTF-8 can encode it. A lone surrogate (``"\\ud800"``, what a decoder with
    ``surrogateescape`` makes of bytes that are not UTF-8) cannot: it would fail deep inside a
    write, or be stored as JSON that strict readers refuse."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{name} is not valid Unicode: {value!r} holds the lone surrogate "
            f"{value[exc.start]!r} at position {exc.start} (from bytes that are not "
            "UTF-8?)"
        ) from None
    return value


def check_location(value: Any) -> str:
    """A table location: a path, ``file://`` or ``s3://`` URI, as text. An empty or blank one
    is refused (the empty path is the current directory: ``create_table("")`` made a table
    wherever the process ran), and so is one with surrounding blanks (``"/data/t "`` would be
    another directory than ``/data/t``): ``"."`` names the current directory on purpose."""
    if not isinstance(value, str | os.PathLike) or not isinstance(text := os.fspath(value), str):
        raise InvalidArgumentError(f"the table location must be a string or a path, not {_describe(value)}")
    if not text.strip():
        raise InvalidArgumentError(
            f"the table location is {'blank' if text else 'empty'} ({text!r}): give a "
            "directory, file:///path or s3://bucket/prefix ('.' for the current directory)"
        )
    if text != text.strip():
        raise InvalidArgumentError(f"the table location {text!r} starts or ends with blanks")
    if "\0" in text:
        raise InvalidArgumentError(f"the table location {text!r} holds a NUL character")
    return check_unicode("the table location", text)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(f"{name} must be one of {list(choices)}, not {_describe(value)}")
    return value


SCHEMA_MODES = (None, "merge")


def check_schema_mode(value: Any) -> str | None:
    """``schema_mode`` of a write: None (the data's columns must be the table's) or ``"merge"``
    (the data's new columns are added)."""
    if value not in SCHEMA_MODES or not isinstance(value, str | None):
        raise InvalidArgumentError(f"schema_mode must be None or 'merge', not {_describe(value)}")
    return value


def check_columns(value: Any, names: Sequence[str]) -> list[str] | None:
    """A list of distinct column names of the table (None: all of them), or any ordered
    iterable of them. A bare string is refused (iterating it would ask for one column per
    character), and so is a set (its order, the order of the result, would be arbitrary)."""
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping | AbstractSet) or not isinstance(value, Iterable):
        raise InvalidArgumentError(
            f"columns must be a list of column names, not {_describe(value)}"
            + (f"; for one column pass [{value!r}]" if isinstance(value, str) else "")
        )
    columns = list(value)
    wrong = [c for c in columns if not isinstance(c, str)]
    if wrong:
        raise InvalidArgumentError(f"column names must be strings, not {wrong[:5]}")
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise InvalidArgumentError(
            f"unknown columns {unknown}{did_you_mean(unknown, names)}; the table has {list(names)}"
        )
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise InvalidArgumentError(f"columns are repeated: {repeated}")
    return columns


def did_you_mean(unknown: Iterable[str], names: Iterable[str]) -> str:
    """`` (did you mean 'cat'?)`` for the known names nearest the unknown ones (a case-only
    difference first, then ``difflib``'s closest match, as deltalake suggests for a mistyped
    column), or "" when none is near."""
    names = list(names)
    folded = {name.casefold(): name for name in names}
    guesses = []
    for name in unknown:
        if not isinstance(name, str):  # a dict key such as 3: no name is near it
            continue
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        guess = folded.get(name.casefold()) or (close[0] if close else None)
        if guess is not None:
            guesses.append((name, guess))
    if not guesses:
        return ""
    if len(guesses) == 1:
        return f" (did you mean {guesses[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{guess!r} for {name!r}" for name, guess in guesses) + "?)"


def check_version(value: Any) -> int:
    """A version number: an integer, at least 0."""
    return check_int("version", value, minimum=0)


def check_time(value: Any, name: str = "as_of") -> datetime:
    """An instant: an aware ``datetime``, a naive one (UTC), or an ISO 8601 string. A bare
    ``date`` is refused: midnight in which zone would be a guess. ``name``: the argument's,
    for the error."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(f"{name} is not an ISO 8601 time: {value!r}") from None
    elif isinstance(value, date):
        raise InvalidArgumentError(
            f"{name} must be a datetime, not a date ({value}): pass e.g. "
            f"datetime({value.year}, {value.month}, {value.day}, tzinfo=timezone.utc)"
        )
    else:
        raise InvalidArgumentError(f"{name} must be a datetime or an ISO 8601 string, not {_describe(value)}")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)

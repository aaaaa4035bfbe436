"""Schemas on the command line: ``'id:int64,name:string,ts:timestamp[us, tz=UTC]'`` for
``create --schema``, or the schema of a file for ``create --like`` and ``append --create``:
a Parquet or Arrow file's own, or the types pyarrow infers from the first block (1 MiB) of a
CSV or JSON-lines file."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

import pyarrow as pa

from ..arguments import check_unicode
from ..errors import InputFileError, InvalidArgumentError
from ..format.column_types import plain_type
from ..lazy import lazy
from .inputs import CsvDialect, input_kind, open_csv, open_ipc
from .jsonl import to_timestamp
from .options import PROG

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.json as pajson
    import pyarrow.parquet as pq
else:
    pc = lazy("pyarrow.compute")
    pajson = lazy("pyarrow.json")
    pq = lazy("pyarrow.parquet")

_TYPES: dict[str, pa.DataType] = {
    **{f"{sign}int{bits}": getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)},
    "float32": pa.float32(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "date32": pa.date32(),
    "date": pa.date32(),
    "binary": pa.binary(),
}
_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=([^\]]+))?\]")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
# A comma not inside [...] or (...), where a type keeps its own parameters.
_FIELD_SEPARATOR = re.compile(r",(?![^\[(]*[\])])")


def parse_schema(text: str) -> pa.Schema:
    """``'id:int64,name:string,ts:timestamp[us, tz=UTC]'`` -> a schema of nullable fields."""
    check_unicode("the schema", text)
    fields = []
    for item in _FIELD_SEPARATOR.split(text):
        name, sep, type_text = (part.strip() for part in item.partition(":"))
        if not sep or not name:
            raise InvalidArgumentError(f"expected NAME:TYPE in the schema, got {item.strip()!r}")
        fields.append(pa.field(name, parse_type(type_text)))
    return pa.schema(fields)


def parse_type(text: str) -> pa.DataType:
    """One type of the small vocabulary docs/cli.md lists, spelled as Arrow prints it."""
    if text in _TYPES:
        return _TYPES[text]
    if match := _DECIMAL.fullmatch(text):
        try:
            return pa.decimal128(int(match[1]), int(match[2]))
        except ValueError as exc:
            raise InvalidArgumentError(f"bad type {text!r}: {exc}") from None
    if match := _TIMESTAMP.fullmatch(text):
        timestamp = pa.timestamp(match[1], match[2] and match[2].strip())
        try:  # Arrow takes any zone name: resolve it now, not in every later read of the table
            pa.array([0], timestamp).cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise InvalidArgumentError(f"bad type {text!r}: {exc}") from None
        return timestamp
    raise InvalidArgumentError(
        f"unknown type {text!r}; known: {', '.join(_TYPES)}, "
        "timestamp[UNIT] or timestamp[UNIT, tz=ZONE] (UNIT: s, ms, us, ns), decimal(P,S)"
    )


def file_schema(path: str, dialect: CsvDialect = CsvDialect()) -> pa.Schema:
    """The columns of the file at ``path`` (its format told by its extension), typed by what
    their values are: a dictionary-encoded column (a pandas categorical) has its value type
    (format/column_types.py); a column of only nulls in what was read has no type and is an
    ``InputFileError``. Metadata is dropped."""
    kind = input_kind(path)
    try:
        if kind == "parquet":
            found = pq.read_schema(path)
        elif kind == "arrow":
            found = open_ipc(path).schema
        else:
            found = _inferred(path, kind, dialect)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputFileError(f"cannot read the schema of {path}: {exc}") from None
    fields = [f.with_type(plain_type(f.type)) for f in found.remove_metadata()]
    untyped = [f.name for f in fields if pa.types.is_null(f.type)]
    if untyped:
        raise InputFileError(
            f"cannot tell the type of columns {untyped} of {path}: they hold only nulls in its "
            "first block; give the schema with --schema"
        )
    return pa.schema(fields)


def _inferred(path: str, kind: str, dialect: CsvDialect) -> pa.Schema:
    """The schema pyarrow's readers infer from the first block of a CSV or JSON-lines file,
    timestamps in microseconds (an inferred ``timestamp[s]`` would refuse a later fraction of
    a second). pyarrow's JSON reader drops the offsets it parsed (``...Z`` infers a zoneless
    type, which our reader then refuses for holding an offset), so a timestamp inferred from
    JSON lines is zoned UTC, which takes offset-less values as UTC (cli/inputs.py). A column
    Arrow leaves as text whose every value is an ISO 8601 time, with an offset or without
    (Arrow infers a timestamp only when all or none have one), is zoned UTC too; one that
    only looks numeric or temporal stays text, and a note on stderr says so."""
    reader = pajson.open_json(path) if kind == "json" else open_csv(path, dialect)
    first = next(iter(reader), None)
    fields = []
    for f in reader.schema:
        if pa.types.is_timestamp(f.type):
            f = f.with_type(pa.timestamp("us", f.type.tz or ("UTC" if kind == "json" else None)))
        elif pa.types.is_string(f.type) and first is not None:
            f = f.with_type(_text_type(path, f.name, first.column(f.name)))
        fields.append(f)
    return pa.schema(fields)


_NUMBER = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"
_TIME = r"^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?\s*([zZ]|[+-]\d\d(:?\d\d)?)?)?$"


def _text_type(path: str, name: str, values: pa.Array) -> pa.DataType:
    """The type of a column Arrow inferred as text: a zoned timestamp when every value is an
    ISO 8601 time; else text, with a note when most values look like numbers or times."""
    present = values.drop_null()
    if not len(present):
        return pa.string()
    times = pc.match_substring_regex(present, _TIME)
    if pc.all(times).as_py():
        try:
            to_timestamp(present, pa.timestamp("us", "UTC"))
            return pa.timestamp("us", "UTC")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # a date that is no date (2025-02-30): noted below
    for looks, what, matched in (("times", "an ISO 8601 time", times), ("numbers", "a number", None)):
        matched = matched if matched is not None else pc.match_substring_regex(present, _NUMBER)
        share = pc.sum(matched).as_py() or 0
        if share * 2 >= len(present):
            odd = _first_odd(present, matched, looks)
            print(
                f"{PROG}: note: column {name!r} of {path} is read as text: its values look like {looks}, "
                f"but {odd!r} is not {what}; give the types with create --schema to choose another",
                file=sys.stderr,
            )
            break
    return pa.string()


def _first_odd(values: pa.Array, matched: pa.Array, looks: str) -> str:
    """A value that does not parse as what the column looks like."""
    others = values.filter(pc.invert(matched))
    if len(others):
        return str(others[0].as_py())
    for value in values.to_pylist():  # every value has the shape: one does not parse
        try:
            to_timestamp(pa.array([value]), pa.timestamp("us", "UTC"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return str(value)
    return str(values[0].as_py())

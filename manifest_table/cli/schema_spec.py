"""Schemas on the command line: ``'id:int64,name:string,ts:timestamp[us, tz=UTC]'`` for
``create --schema``, or the schema of a Parquet file for ``create --like``."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq

from ..arguments import check_unicode
from ..errors import InputFileError, InvalidArgumentError
from ..format.column_types import plain_type

_TYPES: dict[str, pa.DataType] = {
    **{f"{sign}int{bits}": getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)},
    "float32": pa.float32(), "float64": pa.float64(), "double": pa.float64(),
    "string": pa.string(), "bool": pa.bool_(), "date32": pa.date32(), "date": pa.date32(),
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
    raise InvalidArgumentError(f"unknown type {text!r}; known: {', '.join(_TYPES)}, "
                               "timestamp[UNIT] or timestamp[UNIT, tz=ZONE] (UNIT: s, ms, us, ns), decimal(P,S)")


def parquet_schema(path: str) -> pa.Schema:
    """The columns of a Parquet file, typed by what their values are: a column pyarrow wrote
    from a pandas categorical (dictionary-encoded) has its value type (format/column_types.py)."""
    check_unicode("the file name", path)  # pyarrow opens files by UTF-8 names
    try:
        schema = pq.read_schema(path).remove_metadata()
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read the schema of {path}: {exc}") from None
    return pa.schema([f.with_type(plain_type(f.type)) for f in schema])

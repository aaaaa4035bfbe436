"""Arrow schemas in manifests, and checking data against a table's schema."""

from __future__ import annotations

import base64
import functools
from typing import TYPE_CHECKING

import pyarrow as pa

from ..arguments import did_you_mean
from ..errors import CorruptTableError, InvalidArgumentError, SchemaMismatchError
from ..lazy import lazy
from .column_types import Refusal, appendable, cast_safely, holds, parquet_form, refusal

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    pc = lazy("pyarrow.compute")
    pq = lazy("pyarrow.parquet")

MERGE_HINT = "schema_mode='merge' adds new columns"


def encode_schema(schema: pa.Schema) -> str:
    """Arrow IPC bytes, base64: exact for every Arrow type, including nested and metadata."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
    except (ValueError, pa.ArrowException) as exc:
        raise CorruptTableError(f"manifest schema does not decode: {exc}") from exc


def check_schema(schema: pa.Schema, *, appending: bool = False) -> None:
    """Raise ``InvalidArgumentError`` for a schema the table could not store, before anything
    is created: column names unique and non-empty, and every column of a type the table
    supports (format/column_types.py), naming the column, the type and what to use instead.
    ``appending``: the check of a write to an existing table, which also lets through the
    types release 0.2.0 created tables with and appended to (``Refusal.appendable``)."""
    problem = _schema_problem(schema, appending)
    if problem is not None:
        raise InvalidArgumentError(problem)


@functools.lru_cache(maxsize=64)
def _schema_problem(schema: pa.Schema, appending: bool) -> str | None:
    """What ``check_schema`` refuses ``schema`` for, or None. Kept per schema (field metadata
    aside, which none of the checks reads): every write checks its schema, and building a
    Parquet writer for it was 0.3 ms of a 1-row update."""
    if len(set(schema.names)) != len(schema.names) or not all(schema.names):
        return f"column names must be unique and non-empty: {schema.names}"
    for field in schema:
        found = refusal(field.type)
        if found is not None and not (appending and found[1].appendable):
            return _refused(field, *found)
    problem = _parquet_refuses(schema)  # (one writer for the whole schema: every write checks)
    if problem is not None:
        for field in schema:
            refused = _parquet_refuses(pa.schema([field]))
            if refused is not None:
                return f"column {field.name!r} has type {field.type}, which Parquet cannot store: {refused}"
        return f"the schema cannot be stored in Parquet: {problem}"
    return None


def _parquet_refuses(schema: pa.Schema) -> str | None:
    try:
        pq.ParquetWriter(pa.BufferOutputStream(), schema).close()
    except (pa.ArrowException, OSError) as exc:
        return str(exc)
    return None


def _refused(field: pa.Field, inner: pa.DataType, why: Refusal) -> str:
    part = "" if inner == field.type else f" because of its part {inner}"
    return (
        f"column {field.name!r} has type {field.type}, which tables do not support{part}: {why.reason}; "
        f"use {why.instead}{' in its place' if part else ''}"
    )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``table`` with the table's column order and types, or raise a
    ``SchemaMismatchError`` naming every column that is missing, extra or of the wrong type.
    Only safe casts are applied (int32 -> int64, not float -> int: ``column_types.appendable``)."""
    names = set(table.schema.names)
    missing = [f.name for f in schema if f.name not in names]
    extra = [n for n in table.schema.names if n not in schema.names]
    problems = []
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unknown columns {extra}{did_you_mean(extra, missing)} ({MERGE_HINT})")
    if len(names) != len(table.schema.names):
        problems.append("duplicate column names")
    if problems:
        raise SchemaMismatchError(
            f"data does not match the table schema: {'; '.join(problems)}. Table schema: {_describe(schema)}"
        )
    columns = []
    for field in schema:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise SchemaMismatchError(f"column {field.name!r} is not nullable but has {column.null_count} nulls")
        if column.type != field.type:
            column = cast_safely(
                column,
                field.type,
                appendable,
                SchemaMismatchError,
                f"column {field.name!r} has type {column.type}, the table wants {field.type}",
            )
        _check_parquet_form(field, column)
        if holds(field.type, _has_calendar_unit):  # (no walk of nested columns without dates)
            _check_calendar(field.name, column)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _check_parquet_form(field: pa.Field, column: pa.ChunkedArray) -> None:
    """Refuse values Parquet would change: it stores ``date64`` as days and second units as
    milliseconds (format/column_types.py), so a date64 holding a time of day, or a second
    count past the milliseconds' range, would not read back."""
    stored = parquet_form(field.type)
    if stored != field.type:
        try:
            column.cast(stored, safe=True)
        except pa.ArrowInvalid as exc:
            raise SchemaMismatchError(
                f"column {field.name!r} ({field.type}) holds a value Parquet would store "
                f"as another ({stored} in the file): {exc}"
            ) from None


def _check_calendar(name: str, column: pa.ChunkedArray | pa.Array) -> None:
    """Refuse a date or timestamp outside the years 1-9999 (UTC for a zoned one), Delta's and
    Spark's range: Arrow and Parquet hold more, but a table's statistics, filters and exports
    go through Python's ``datetime``, which does not (``OverflowError`` from a 1-row append).
    Nested values are checked too (a null parent's children are not values)."""
    for array in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        arrow_type = array.type
        if pa.types.is_struct(arrow_type):
            for field, child in zip(arrow_type, array.flatten()):
                _check_calendar(f"{name}.{field.name}", child)
        elif (
            pa.types.is_list(arrow_type)
            or pa.types.is_large_list(arrow_type)
            or pa.types.is_fixed_size_list(arrow_type)
        ):
            _check_calendar(f"{name}[]", array.flatten())
        elif pa.types.is_map(arrow_type):
            _check_calendar(f"{name} keys", array.keys)
            _check_calendar(f"{name} values", array.items)
        elif (unit := _calendar_unit(arrow_type)) is not None:
            counts = array.cast(pa.int32() if pa.types.is_date32(arrow_type) else pa.int64())
            found = pc.min_max(counts)
            lo, hi = found["min"].as_py(), found["max"].as_py()
            first, last = _CALENDAR[unit]
            if lo is not None and (lo < first or hi > last):
                raise SchemaMismatchError(
                    f"column {name!r} ({arrow_type}) holds {lo if lo < first else hi} ({unit} from "
                    "1970-01-01), outside the years 1-9999 a table's dates and timestamps can hold "
                    "(UTC for a zoned one)"
                )


def _has_calendar_unit(arrow_type: pa.DataType) -> bool:
    return _calendar_unit(arrow_type) is not None


def _calendar_unit(arrow_type: pa.DataType) -> str | None:
    if pa.types.is_timestamp(arrow_type):
        return {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}.get(arrow_type.unit)  # (ns: within)
    if pa.types.is_date32(arrow_type):
        return "days"
    return "milliseconds" if pa.types.is_date64(arrow_type) else None


_FIRST_DAY, _LAST_DAY = -719_162, 2_932_896
"""0001-01-01 and 9999-12-31, in days from 1970-01-01."""
_CALENDAR = {
    unit: (_FIRST_DAY * per_day, (_LAST_DAY + 1) * per_day - 1)
    for unit, per_day in (
        ("days", 1),
        ("seconds", 86_400),
        ("milliseconds", 86_400_000),
        ("microseconds", 86_400_000_000),
    )
}
"""Per unit, the first and last count within the years 1-9999."""


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)

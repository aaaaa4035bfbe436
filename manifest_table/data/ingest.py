"""Turning what users pass to ``append`` into record batches of the table's schema.

Every input obeys the safe-cast rules of ``format.schema.conform``: a value is never
silently changed (1.5 does not become 1 in an integer column). Python values in a list of
dicts are checked by kind before Arrow converts them, because Arrow's own conversion
truncates floats to integers and datetimes to dates."""

from __future__ import annotations

import datetime as dt
import itertools
import numbers
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from ..arguments import did_you_mean
from ..errors import SchemaMismatchError
from ..format.column_types import appendable, cast_safely, with_doubles
from ..format.schema import MERGE_HINT, conform


def arrow_input(data: Any) -> Any:
    """``data`` as what the rest of this module reads: an object of another library that
    exports the Arrow C stream interface (``__arrow_c_stream__``: a Polars DataFrame, a
    DuckDB relation, ...) becomes one ``pyarrow.RecordBatchReader``, streamed, so that its
    schema and its rows come from the same stream (a DuckDB relation runs its query again on
    each export). pyarrow objects, pandas DataFrames and lists are returned as they are."""
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader | list) or _is_pandas(data):
        return data
    if hasattr(data, "__arrow_c_stream__"):
        try:
            return pa.RecordBatchReader.from_stream(data)
        except (pa.ArrowException, TypeError) as exc:
            raise SchemaMismatchError(f"cannot read the Arrow stream of a {type(data).__name__}: {exc}") from None
    return data


def batches_of(data: Any, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of ``data`` conformed to ``schema``: a pyarrow Table, RecordBatch or
    RecordBatchReader (streamed, never materialised whole), any object with
    ``__arrow_c_stream__`` (streamed too), a pandas DataFrame, or a list of dicts. Raises
    ``SchemaMismatchError`` before yielding anything wrong."""
    data = arrow_input(data)
    if isinstance(data, pa.RecordBatchReader):
        conform(data.schema.empty_table(), schema)  # fail before anything is written
        return (b for batch in data for b in conform(pa.Table.from_batches([batch]), schema).to_batches())
    return iter(conform(_to_table(data, schema), schema).to_batches())


def schema_of(data: Any) -> pa.Schema:
    """The Arrow schema of what ``append`` accepts, as the data has it (before conforming)."""
    data = arrow_input(data)
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return data.schema
    if isinstance(data, list):
        if not all(isinstance(row, dict) for row in data):
            raise SchemaMismatchError("a list of rows must hold dicts, one per row")
        names = list(dict.fromkeys(name for row in data for name in row))
        return pa.schema([(name, _inferred_column(data, name).type) for name in names])
    if _is_pandas(data):
        return pa.Schema.from_pandas(data, preserve_index=False)
    raise unsupported_input(data)


def _to_table(data: Any, schema: pa.Schema) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, list):
        return _from_rows(data, schema)
    if _is_pandas(data):
        return _from_pandas(data, schema)
    raise unsupported_input(data)


def unsupported_input(data: Any) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"cannot write a {type(data).__name__}: pass a pyarrow Table, RecordBatch or "
        "RecordBatchReader, an object with __arrow_c_stream__ (a Polars DataFrame, a "
        "DuckDB relation), a pandas DataFrame, or a list of dicts"
    )


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and type(data).__name__ == "DataFrame"


# --- pandas ------------------------------------------------------------------------------
def _from_pandas(frame: Any, schema: pa.Schema) -> pa.Table:
    names = [str(name) for name in frame.columns]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise SchemaMismatchError(f"the DataFrame has duplicate column names {repeated}")
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"the DataFrame does not convert to Arrow: {exc}") from None
    except UnicodeEncodeError as exc:
        raise _not_unicode("the DataFrame", exc) from None
    return _whole_floats_to_integers(table, schema)


def _whole_floats_to_integers(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """pandas holds integers with missing values as float64 with NaN (what ``to_pandas()``
    returns for an int column with nulls, or inside a list or struct column), and
    ``from_pandas`` has turned the NaN into nulls. Such a column goes back to the table's
    integer type when every value is whole and in range; a fraction is refused, as for any
    other input."""
    for index, name in enumerate(table.column_names):
        position = schema.get_field_index(name)
        column = table.column(index)
        if position < 0 or not _floats_for_integers(column.type, schema.field(position).type):
            continue
        target = schema.field(position).type
        try:
            table = table.set_column(index, name, column.cast(target, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"column {name!r} is {column.type} in the DataFrame and the table wants "
                f"{target}: only whole numbers convert ({exc})"
            ) from None
    return table


def _floats_for_integers(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether ``source`` has floats where ``target`` has integers, at any depth."""
    t = pa.types
    if t.is_floating(source) and t.is_integer(target):
        return True
    if (t.is_list(source) or t.is_large_list(source)) and (t.is_list(target) or t.is_large_list(target)):
        return _floats_for_integers(source.value_type, target.value_type)
    if t.is_struct(source) and t.is_struct(target) and [f.name for f in source] == [f.name for f in target]:
        return any(_floats_for_integers(a.type, b.type) for a, b in zip(source, target))
    return False


# --- lists of dicts ----------------------------------------------------------------------
def _from_rows(rows: list[Any], schema: pa.Schema) -> pa.Table:
    if not all(isinstance(row, dict) for row in rows):
        raise SchemaMismatchError("a list passed to append must hold dicts, one per row")
    extra = sorted(set().union(*rows) - set(schema.names), key=repr)
    if extra:
        raise SchemaMismatchError(
            f"data does not match the table schema: unknown columns {extra}{did_you_mean(extra, schema.names)} "
            f"({MERGE_HINT})"
        )
    arrays = []
    for field in schema:
        values = list(map(dict.get, rows, itertools.repeat(field.name)))  # (2x a comprehension)
        arrays.append(column_of(field, values))
    return pa.Table.from_arrays(arrays, schema=schema)


def column_of(field: pa.Field, values: list[Any]) -> pa.Array:
    """Python ``values`` as an array of ``field``'s type, each checked by kind (``_check_kind``)
    and by range (a float beyond a float32 column's range is refused, not made infinite); a
    ``SchemaMismatchError`` names the column and why. Appends of lists of dicts and the plain
    values of ``update(values=...)`` convert through it."""
    _check_column(field.name, values, field.type)
    built = with_doubles(field.type)
    built = built if appendable(built, field.type) else field.type
    try:
        array = pa.array(values, type=built)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise SchemaMismatchError(f"column {field.name!r} ({field.type}): {exc}") from None
    except UnicodeEncodeError as exc:
        raise _not_unicode(f"column {field.name!r}", exc) from None
    if built == field.type:
        return array
    return cast_safely(array, field.type, appendable, SchemaMismatchError, f"column {field.name!r} ({field.type})")


def _inferred_column(rows: list[dict[str, Any]], name: str) -> pa.Array:
    """Column ``name`` of ``rows`` typed as Arrow infers it, with the errors Arrow raises
    as Python's (an integer beyond int64, a lone surrogate) turned into ``SchemaMismatchError``."""
    values = [row.get(name) for row in rows]
    try:
        return pa.array(values)
    except UnicodeEncodeError as exc:
        raise _not_unicode(f"column {name!r}", exc) from None
    except OverflowError:
        big = next((v for v in _integers(values) if not -(2**63) <= v < 2**63), None)
        raise SchemaMismatchError(
            f"column {name!r} holds the integer {big}, beyond int64, the type Arrow infers for "
            "Python integers: create the table with a uint64 or decimal column, or pass a pyarrow "
            "Table of that type"
        ) from None
    except (pa.ArrowException, TypeError, AttributeError) as exc:
        raise SchemaMismatchError(f"column {name!r} does not convert to Arrow: {exc}") from None


def _integers(values: Any) -> Iterator[int]:
    """Every int in ``values``, inside lists and dicts too."""
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            yield value
        elif isinstance(value, list | tuple | dict):
            yield from _integers(value.values() if isinstance(value, dict) else value)


def _not_unicode(where: str, exc: UnicodeEncodeError) -> SchemaMismatchError:
    """A string Arrow cannot hold: one with a lone surrogate (``"\\ud800"``), which UTF-8
    cannot encode."""
    return SchemaMismatchError(
        f"{where} holds a string that is not valid Unicode: {exc.object!r} has the lone "
        f"surrogate {exc.object[exc.start : exc.end]!r}"
    )


def _check_column(column: str, values: list[Any], arrow_type: pa.DataType) -> None:
    """``_check_kind`` of every value. For a column of scalars the verdict depends only on
    each value's type, so each distinct type is judged once: checking value by value made
    ingesting a list of dicts ~25x slower than ``pa.Table.from_pylist`` (10 columns)."""
    if pa.types.is_nested(arrow_type):
        for number, value in enumerate(values):
            _check_kind(column, number, value, arrow_type)
        return
    wrong = {kind for kind in set(map(type, values)) if kind is not type(None) and _wrong_kind(kind, arrow_type)}
    if wrong:
        number = next(i for i, value in enumerate(values) if type(value) in wrong)
        _check_kind(column, number, values[number], arrow_type)


def _kinds(arrow_type: pa.DataType) -> tuple[type, ...] | None:
    """The Python types whose values convert exactly to ``arrow_type`` (None: any, Arrow checks)."""
    t = pa.types
    if t.is_boolean(arrow_type):
        return (bool, np.bool_)
    if t.is_integer(arrow_type):
        return (numbers.Integral,)
    if t.is_floating(arrow_type):
        return (numbers.Real,)
    if t.is_decimal(arrow_type):
        return (numbers.Integral, Decimal)
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or t.is_string_view(arrow_type):
        return (str,)
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return (bytes, bytearray, memoryview)
    if t.is_timestamp(arrow_type):
        return (dt.datetime,)
    if t.is_date(arrow_type):
        return (dt.date,)
    if t.is_time(arrow_type):
        return (dt.time,)
    if t.is_duration(arrow_type):
        return (dt.timedelta,)
    return None


def _check_kind(column: str, row: int, value: Any, arrow_type: pa.DataType) -> None:
    """Refuse a value Arrow would convert with loss (a float to an int column, a datetime to
    a date column, a bool to a number column), naming the column and the row."""
    if value is None:
        return
    t = pa.types
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        if isinstance(value, list | tuple):
            for item in value:
                _check_kind(column, row, item, arrow_type.value_type)
        return
    if t.is_struct(arrow_type):
        if isinstance(value, dict):
            for field in arrow_type:
                _check_kind(f"{column}.{field.name}", row, value.get(field.name), field.type)
        return
    if t.is_map(arrow_type):  # a dict, or (key, value) pairs, as pyarrow takes them
        entries = list(value.items()) if isinstance(value, dict) else value
        if isinstance(entries, list | tuple):
            for entry in entries:
                if isinstance(entry, list | tuple) and len(entry) == 2:  # (Arrow refuses the others)
                    _check_kind(f"{column}.key", row, entry[0], arrow_type.key_type)
                    _check_kind(f"{column}.value", row, entry[1], arrow_type.item_type)
        return
    if _wrong_kind(type(value), arrow_type):
        raise SchemaMismatchError(
            f"column {column!r} has type {arrow_type} but row {row} holds "
            f"{value!r} ({type(value).__name__}), which would not convert exactly"
        )


def _wrong_kind(kind: type, arrow_type: pa.DataType) -> bool:
    """Whether values of Python type ``kind`` would not convert exactly to a scalar ``arrow_type``."""
    t = pa.types
    kinds = _kinds(arrow_type)
    return (
        (kinds is not None and not issubclass(kind, kinds))
        or (issubclass(kind, bool) and not t.is_boolean(arrow_type))
        or (issubclass(kind, dt.datetime) and t.is_date(arrow_type))
    )

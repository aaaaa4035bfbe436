"""Turning what users pass to ``append`` into record batches of the table's schema."""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from .errors import SchemaMismatchError
from .format.schema import conform


def batches_of(data: Any, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of ``data`` conformed to ``schema``: a pyarrow Table, RecordBatch or
    RecordBatchReader (streamed, never materialised whole), a pandas DataFrame, or a list
    of dicts. Raises ``SchemaMismatchError`` before yielding anything wrong."""
    if isinstance(data, pa.RecordBatchReader):
        conform(data.schema.empty_table(), schema)  # fail before anything is written
        return (b for batch in data for b in conform(pa.Table.from_batches([batch]), schema).to_batches())
    return iter(conform(_to_table(data, schema), schema).to_batches())


def _to_table(data: Any, schema: pa.Schema) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, list):
        return _from_rows(data, schema)
    if type(data).__module__.startswith("pandas") and type(data).__name__ == "DataFrame":
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(f"the DataFrame does not convert to Arrow: {exc}") from None
    raise SchemaMismatchError(f"cannot write a {type(data).__name__}: pass a pyarrow Table, RecordBatch or "
                              "RecordBatchReader, a pandas DataFrame, or a list of dicts")


def _from_rows(rows: list[Any], schema: pa.Schema) -> pa.Table:
    if not all(isinstance(row, dict) for row in rows):
        raise SchemaMismatchError("a list passed to append must hold dicts, one per row")
    extra = sorted({key for row in rows for key in row} - set(schema.names))
    if extra:
        raise SchemaMismatchError(f"data does not match the table schema: unknown columns {extra}")
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"rows do not match the table schema: {exc}") from None

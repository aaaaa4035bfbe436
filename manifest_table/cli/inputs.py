"""Files given to ``append`` and ``overwrite``: Parquet, CSV, JSON lines and Arrow IPC,
streamed batch by batch and parsed as the table's column types rather than guessed.

Timestamps follow one rule everywhere (the Python API, filters, ``--as-of``, these files):
**a timestamp without an offset is UTC**. Into a column with a time zone, ``2025-10-04
12:00`` is taken as 12:00 UTC and ``2025-10-04 14:00+02:00`` is the same instant; a column
without a zone keeps wall-clock times and refuses a value with an offset rather than guess.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds

from ..arguments import check_unicode
from ..errors import InputFileError
from .jsonl import from_json, is_binary, read_json_lines, to_timestamp

INPUT_FORMATS = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".feather": "arrow",
}


def format_of(path: str) -> str | None:
    return INPUT_FORMATS.get(Path(path).suffix.lower())


@dataclass(frozen=True)
class CsvDialect:
    """How CSV files are read and written (``--delimiter``, ``--null-value``). Only the
    listed texts, unquoted, are null: pyarrow's default list (``NA``, ``NULL``, ``N/A``,
    ``NaN``, ...) turned Namibia's country code and every NaN into nulls."""

    delimiter: str = ","
    null_values: tuple[str, ...] = ("",)


def read_input(path: str, schema: pa.Schema, dialect: CsvDialect = CsvDialect()) -> pa.RecordBatchReader:
    """Open one file (its format told by its extension) as a stream of the table's columns.
    Opening reads the header or footer, so a missing or malformed file fails here, before
    anything is written; a bad value further in fails while streaming, naming the file."""
    check_unicode("the file name", path)  # pyarrow opens files by UTF-8 names
    kind = format_of(path)
    if kind == "json":
        source = open(path, "rb")
        return pa.RecordBatchReader.from_batches(schema, _closing(source, read_json_lines(path, source, schema)))
    try:
        if kind == "parquet":
            reader = ds.dataset(path, format="parquet").scanner().to_reader()
        elif kind == "arrow":
            reader = open_ipc(path)
        elif kind == "csv":
            reader = _open_csv(path, schema, dialect)
        else:
            raise InputFileError(
                f"cannot tell the format of {path}: name it {', '.join(f'*{s}' for s in INPUT_FORMATS)}"
            )
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    return pa.RecordBatchReader.from_batches(reader.schema, _reported(path, reader))


def _open_csv(path: str, schema: pa.Schema, dialect: CsvDialect) -> Iterator[pa.RecordBatch]:
    """CSV parsed as the table's types, except what Arrow's CSV reader cannot parse exactly:
    zoned timestamps (offset-less ones are UTC, ``to_timestamp``) and binary (base64, as
    ``scan --format csv`` writes it) are read as text and converted."""
    special = {f.name: f.type for f in schema if is_binary(f.type) or (pa.types.is_timestamp(f.type) and f.type.tz)}
    reader = pacsv.open_csv(
        path,
        parse_options=pacsv.ParseOptions(delimiter=dialect.delimiter),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: pa.string() if f.name in special else f.type for f in schema},
            null_values=list(dialect.null_values),
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    if not special:
        return reader
    names = reader.schema.names
    out = pa.schema([pa.field(n, special[n]) if n in special else reader.schema.field(n) for n in names])
    return pa.RecordBatchReader.from_batches(
        out,
        (
            pa.RecordBatch.from_arrays(
                [_from_text(c, special[n]) if n in special else c for n, c in zip(names, b.columns)], schema=out
            )
            for b in reader
        ),
    )


def _from_text(column: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    return from_json(column.to_pylist(), arrow_type) if is_binary(arrow_type) else to_timestamp(column, arrow_type)


def _closing(source: BinaryIO, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    with source:
        yield from batches


def open_ipc(path: str) -> pa.RecordBatchReader:
    """The Arrow IPC stream format (what ``scan --format arrow`` writes), else the file format."""
    try:
        return pa.ipc.open_stream(pa.memory_map(path))
    except pa.ArrowInvalid:
        file = pa.ipc.open_file(pa.memory_map(path))
        batches = (file.get_batch(i) for i in range(file.num_record_batches))
        return pa.RecordBatchReader.from_batches(file.schema, batches)


def _reported(path: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A bad value further into a file only shows while streaming: name the file then too."""
    try:
        yield from batches
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None

"""Files given to ``append`` and ``overwrite``: Parquet, CSV, JSON lines and Arrow IPC,
streamed batch by batch and parsed as the table's column types rather than guessed.

Timestamps follow one rule everywhere (the Python API, filters, ``--as-of``, these files):
**a timestamp without an offset is UTC**. Into a column with a time zone, ``2025-10-04
12:00`` is taken as 12:00 UTC and ``2025-10-04 14:00+02:00`` is the same instant; a column
without a zone keeps wall-clock times and refuses a value with an offset rather than guess.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from ..arguments import check_unicode
from ..errors import InputFileError
from ..format.column_types import with_doubles
from ..lazy import lazy
from .jsonl import from_json, is_binary, read_json_lines, to_timestamp
from .options import CsvDialect

if TYPE_CHECKING:
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds
else:
    pacsv = lazy("pyarrow.csv")
    ds = lazy("pyarrow.dataset")

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


def input_kind(path: str) -> str:
    """The format of the input file at ``path``, told by its extension; ``InputFileError`` if
    its name is not UTF-8 (pyarrow opens files by UTF-8 names), names no format, or names no
    file (pyarrow's error for a missing Parquet file was the bare path)."""
    check_unicode("the file name", path)
    kind = INPUT_FORMATS.get(Path(path).suffix.lower())
    if kind is None:
        raise InputFileError(f"cannot tell the format of {path}: name it {', '.join(f'*{s}' for s in INPUT_FORMATS)}")
    if not os.path.isfile(path):
        raise InputFileError(f"cannot read {path}: {'a directory' if os.path.isdir(path) else 'no such file'}")
    return kind


def read_input(path: str, schema: pa.Schema, dialect: CsvDialect = CsvDialect()) -> pa.RecordBatchReader:
    """Open one file (its format told by its extension) as a stream of the table's columns.
    Opening reads the header or footer, so a missing or malformed file fails here, before
    anything is written; a bad value further in fails while streaming, naming the file."""
    kind = input_kind(path)
    if kind == "json":
        source = open(path, "rb")
        return pa.RecordBatchReader.from_batches(schema, _closing(source, read_json_lines(path, source, schema)))
    try:
        if kind == "parquet":
            reader = ds.dataset(path, format="parquet").scanner().to_reader()
        elif kind == "arrow":
            reader = open_ipc(path)
        else:
            reader = _open_csv(path, schema, dialect)
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    return pa.RecordBatchReader.from_batches(reader.schema, _reported(path, reader))


def _open_csv(path: str, schema: pa.Schema, dialect: CsvDialect) -> pa.RecordBatchReader:
    """CSV parsed as the table's types, except what Arrow's CSV reader cannot parse exactly:
    zoned timestamps (offset-less ones are UTC, ``to_timestamp``) and binary (base64, as
    ``scan --format csv`` writes it) are read as text and converted; float32 as float64, so
    that ``append`` narrows it by a checked cast (Arrow's own parse makes 1e39 infinity)."""
    special = {f.name: f.type for f in schema if is_binary(f.type) or (pa.types.is_timestamp(f.type) and f.type.tz)}
    types = {f.name: pa.string() if f.name in special else with_doubles(f.type) for f in schema}
    reader = open_csv(path, dialect, types)
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


_BLOCK = 1 << 20
_MAX_BLOCK = 1 << 30


def open_csv(
    path: str, dialect: CsvDialect, column_types: dict[str, pa.DataType] | None = None
) -> pa.RecordBatchReader:
    """A CSV file as a stream of batches (``column_types`` as given, the other columns as
    Arrow infers them from the first block), read the one way every command reads CSV:
    values may hold newlines inside quotes (what ``scan --format csv`` writes for them), a row
    may be longer than Arrow's 1 MiB block (the file is read again with blocks four times as
    large, up to 1 GiB, past the rows already read), and the header must be UTF-8 names,
    each given once (``InputFileError`` otherwise)."""
    parse = pacsv.ParseOptions(delimiter=dialect.delimiter, newlines_in_values=True)
    convert = pacsv.ConvertOptions(
        column_types=column_types or {},
        null_values=list(dialect.null_values),
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )

    def opened(block: int) -> tuple[pa.RecordBatchReader, int]:
        while True:
            try:
                return pacsv.open_csv(path, pacsv.ReadOptions(block_size=block), parse, convert), block
            except pa.ArrowInvalid as exc:
                if not _straddles(exc, block):
                    raise
                block *= 4

    def batches(reader: pa.RecordBatchReader, block: int) -> Iterator[pa.RecordBatch]:
        done = 0
        while True:
            try:
                for batch in _after(reader, done):
                    yield batch
                    done += batch.num_rows
                return
            except pa.ArrowInvalid as exc:
                if not _straddles(exc, block):
                    raise
                reader, block = opened(block * 4)

    reader, block = opened(_BLOCK)
    _check_header(path, reader.schema)
    return pa.RecordBatchReader.from_batches(reader.schema, batches(reader, block))


def _straddles(exc: pa.ArrowInvalid, block: int) -> bool:
    """A row longer than the block (Arrow: "straddling object straddles two block boundaries")."""
    return "straddl" in str(exc) and block < _MAX_BLOCK


def _after(reader: pa.RecordBatchReader, skip: int) -> Iterator[pa.RecordBatch]:
    """The batches of ``reader`` past its first ``skip`` rows (read already, with smaller blocks)."""
    for batch in reader:
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        yield batch.slice(skip) if skip else batch
        skip = 0


def _check_header(path: str, schema: pa.Schema) -> None:
    try:
        names = schema.names
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"the header of {path} is not UTF-8 (byte {exc.object[exc.start : exc.start + 1]!r} in a "
            "column name): save the file as UTF-8"
        ) from None
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputFileError(f"the header of {path} names columns {repeated} more than once")
    if not all(names):
        raise InputFileError(f"the header of {path} has an empty column name (column {names.index('') + 1})")


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

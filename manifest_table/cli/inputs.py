"""Files given to ``append`` and ``overwrite``: Parquet, CSV, JSON lines and Arrow IPC,
streamed batch by batch and parsed as the table's column types rather than guessed.

Timestamps follow one rule everywhere (the Python API, filters, ``--as-of``, these files):
**a timestamp without an offset is UTC**. Into a column with a time zone, ``2025-10-04
12:00`` is taken as 12:00 UTC and ``2025-10-04 14:00+02:00`` is the same instant; a column
without a zone keeps wall-clock times and refuses a value with an offset rather than guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson

from ..arguments import check_unicode
from ..errors import InputFileError

INPUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json",
                 ".arrow": "arrow", ".arrows": "arrow", ".feather": "arrow"}
# An offset after a time of day: "…12:00Z", "…12:00:00.5+02:00", "…12:00 -0130".
_OFFSET = r"\d:\d\d(:\d\d(\.\d*)?)?\s*([zZ]|[+-]\d\d(:?\d\d)?)$"


def format_of(path: str) -> str | None:
    return INPUT_FORMATS.get(Path(path).suffix.lower())


def read_input(path: str, schema: pa.Schema) -> pa.RecordBatchReader:
    """Open one file (its format told by its extension) as a stream of the table's columns.
    Opening reads the header or footer, so a missing or malformed file fails here, before
    anything is written; a bad value further in fails while streaming, naming the file."""
    check_unicode("the file name", path)  # pyarrow opens files by UTF-8 names
    kind = format_of(path)
    zoned = {f.name: f.type for f in schema if pa.types.is_timestamp(f.type) and f.type.tz}
    as_text = {f.name: pa.string() if f.name in zoned else f.type for f in schema}
    try:
        if kind == "parquet":
            reader = ds.dataset(path, format="parquet").scanner().to_reader()
        elif kind == "arrow":
            reader = _open_ipc(path)
        elif kind == "csv":
            reader = pacsv.open_csv(path, convert_options=pacsv.ConvertOptions(
                column_types=as_text, strings_can_be_null=True, quoted_strings_can_be_null=False))
        elif kind == "json":
            reader = pajson.open_json(path, parse_options=pajson.ParseOptions(
                explicit_schema=pa.schema([pa.field(n, t) for n, t in as_text.items()])))
        else:
            raise InputFileError(f"cannot tell the format of {path}: name it "
                                 f"{', '.join(f'*{s}' for s in INPUT_FORMATS)}")
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    if kind not in ("csv", "json") or not zoned:
        return pa.RecordBatchReader.from_batches(reader.schema, _reported(path, reader))
    names = reader.schema.names
    out_schema = pa.schema([pa.field(n, zoned[n]) if n in zoned else reader.schema.field(n) for n in names])
    batches = (pa.RecordBatch.from_arrays([to_timestamp(c, zoned[n]) if n in zoned else c
                                           for n, c in zip(names, b.columns)], schema=out_schema)
               for b in reader)
    return pa.RecordBatchReader.from_batches(out_schema, _reported(path, batches))


def to_timestamp(text: pa.Array, target: pa.TimestampType) -> pa.Array:
    """ISO 8601 strings as instants of a zoned timestamp type: with an offset as written,
    without one as UTC (Arrow alone refuses offset-less strings for a zoned type)."""
    has_offset = pc.match_substring_regex(text, _OFFSET)
    utc = pa.timestamp(target.unit, "UTC")
    aware = pc.cast(pc.if_else(has_offset, text, None), utc)
    naive = pc.cast(pc.cast(pc.if_else(has_offset, None, text), pa.timestamp(target.unit)), utc)
    return pc.if_else(has_offset, aware, naive).cast(target)


def _open_ipc(path: str) -> pa.RecordBatchReader:
    """The Arrow IPC stream format (what ``scan --format arrow`` writes), else the file format."""
    try:
        return pa.ipc.open_stream(pa.memory_map(path))
    except pa.ArrowInvalid:
        file = pa.ipc.open_file(pa.memory_map(path))
        return pa.RecordBatchReader.from_batches(file.schema, (file.get_batch(i) for i in range(file.num_record_batches)))


def _reported(path: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A bad value further into a file only shows while streaming: name the file then too."""
    try:
        yield from batches
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None

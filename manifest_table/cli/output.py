"""Writing scanned rows: an aligned text table for people, and CSV, JSON lines, Parquet and
Arrow IPC for programs. Every writer takes batches as they come and keeps none: the file
formats go through pyarrow's own writers, the text table renders a chunk at a time.
pyarrow, numpy and jsonl.py load with the first writer that runs: the read commands'
options name the formats (``WRITERS``), and ``count`` imports this module without writing
(docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO

from ..errors import InvalidArgumentError
from ..lazy import lazy

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    Writer = Callable[[Iterable[pa.RecordBatch], pa.Schema, BinaryIO], None]
else:
    np = lazy("numpy")
    pa = lazy("pyarrow")
    pc = lazy("pyarrow.compute")
    pacsv = lazy("pyarrow.csv")
    pq = lazy("pyarrow.parquet")
OUTPUT_FORMATS = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".json": "jsonl",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".txt": "table",
}
_FIRST_ROWS = 1000  # the text table's column widths come from the header and these first rows
_CHUNK_ROWS = 65536  # rows formatted at a time after them
_GAP = 2


def write_table(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """Aligned columns, ``null`` for nulls, newlines and tabs escaped, and on a terminal
    (or with ``COLUMNS`` set) values cut with an ellipsis so that a row fits its width.
    Widths come from the header and the first chunk of rows; later rows are cut to them.

    Padding and cutting are Arrow compute kernels over whole columns: rich's ``Table``
    rendered about 1,000 rows/s here (50,000 rows in 53 s, loaded machine), far too slow to
    stream millions of rows. rich still measures what Arrow cannot: the terminal cells of
    non-ASCII text (wide CJK characters, emoji)."""
    limit = _terminal_width(sink)
    widths: list[int] | None = None
    for chunk in _chunks(batches, schema):
        if widths is None:
            natural = [max(len(name), _widest(column)) for name, column in zip(schema.names, chunk)]
            widths = _fit(natural, limit) if limit else natural
            header = [pa.array([name, "-" * min(len(name), w)]) for name, w in zip(schema.names, widths)]
            sink.write(_lines(header, widths))
        if chunk and len(chunk[0]):
            sink.write(_lines(chunk, widths))


def _lines(columns: list[pa.Array], widths: list[int]) -> memoryview:
    """Rows of cells fitted to ``widths``, joined by the gap, trailing blanks dropped, one
    per line: built by Arrow kernels and handed over as one buffer, no Python string per row.
    Offsets are 64-bit: a chunk of wide values, uncut in a pipe, may pass 2 GiB."""
    text = pa.large_string()
    cells = [_fitted(column, width).cast(text) for column, width in zip(columns, widths)]
    rows = pc.utf8_rtrim_whitespace(pc.binary_join_element_wise(*cells, pa.scalar(" " * _GAP, text)))
    lines = pc.binary_join_element_wise(rows, pa.scalar("", text), pa.scalar("\n", text))  # row + newline
    offsets = np.frombuffer(lines.buffers()[1], np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return memoryview(lines.buffers()[2])[offsets[0] : offsets[-1]]


def _widest(column: pa.Array) -> int:
    """The most terminal cells a value of ``column`` takes."""
    if not len(column):
        return 0
    ascii_only = pc.string_is_ascii(column)
    widest = pc.max(pc.utf8_length(pc.filter(column, ascii_only))).as_py() or 0
    if not pc.all(ascii_only).as_py():
        from rich.cells import cell_len

        widest = max(widest, *(cell_len(v) for v in pc.filter(column, pc.invert(ascii_only)).to_pylist()))
    return widest


def _fitted(column: pa.Array, width: int) -> pa.Array:
    """Each value padded to ``width`` cells, or cut to it with an ellipsis."""
    if pc.all(pc.string_is_ascii(column)).as_py() is not False:
        long = pc.greater(pc.utf8_length(column), width)
        cut = pc.binary_join_element_wise(pc.utf8_slice_codeunits(column, 0, width - 1), "…", "")
        return pc.utf8_rpad(pc.if_else(long, cut, column), width)
    from rich.cells import cell_len, set_cell_size

    return pa.array(
        [
            set_cell_size(v, width - 1) + "…" if cell_len(v) > width else set_cell_size(v, width)
            for v in column.to_pylist()
        ],
        pa.string(),
    )


def _terminal_width(sink: BinaryIO) -> int | None:
    """The width to fit: the terminal's, or ``COLUMNS`` when set; None (no cutting) for a
    pipe or a file, where a cut value would be lost."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        return shutil.get_terminal_size().columns if os.isatty(sink.fileno()) else None
    except (AttributeError, OSError, ValueError):  # not a real file
        return None


def _chunks(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[list[pa.Array]]:
    """Columns of display strings: ``_FIRST_ROWS`` rows first (the widths come from them),
    then up to ``_CHUNK_ROWS`` at a time whatever the batch sizes; at least one chunk, maybe
    empty, so that the header is printed."""
    pending: list[pa.RecordBatch] = []
    rows, size, yielded = 0, _FIRST_ROWS, False
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            piece = batch.slice(offset, size - rows)
            pending.append(piece)
            rows += piece.num_rows
            offset += piece.num_rows
            if rows == size:
                yield [_display(c) for c in pa.Table.from_batches(pending, schema).combine_chunks().columns]
                pending, rows, size, yielded = [], 0, _CHUNK_ROWS, True
    if pending or not yielded:
        yield [_display(c) for c in pa.Table.from_batches(pending, schema).combine_chunks().columns]


def _display(column: pa.ChunkedArray) -> pa.Array:
    """Display strings of a column, cast by Arrow where it can (fast), by Python otherwise."""
    try:
        text = pc.cast(column, pa.string()) if not pa.types.is_binary(column.type) else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        text = None
    if text is None:
        text = pa.chunked_array([pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())])
    for raw, escaped in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        text = pc.replace_substring(text, raw, escaped)
    return pc.fill_null(text, "null").combine_chunks()


def _fit(natural: list[int], total: int) -> list[int]:
    """Column widths that fit ``total`` characters with the gaps: the widest columns are
    cut to a common level first, none below 4 characters (one and an ellipsis)."""
    room = total - _GAP * (len(natural) - 1)
    if sum(natural) <= room:
        return natural
    lo, hi = 4, max(natural)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sum(min(w, mid) for w in natural) <= room else (lo, mid - 1)
    return [min(w, lo) for w in natural]


def csv_writer(schema: pa.Schema, delimiter: str = ",") -> Writer:
    """``write_csv`` for ``schema``, or an ``InvalidArgumentError`` now, before an output file
    is opened, if a column is nested: CSV has no form for lists, structs or maps."""
    nested = [f"{f.name} ({f.type})" for f in schema if pa.types.is_nested(f.type)]
    if nested:
        raise InvalidArgumentError(
            f"CSV cannot hold the nested columns {nested}: use --format jsonl, parquet "
            "or arrow, or --columns to leave them out"
        )
    return functools.partial(write_csv, delimiter=delimiter)


def write_csv(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO, delimiter: str = ",") -> None:
    """pyarrow's CSV writer: strings quoted, nulls empty and unquoted, NaN and infinities as
    ``nan``, ``inf``, ``-inf`` (all of which ``append`` reads back as they were). Binary is
    written in base64 (raw bytes need not be text: pyarrow refuses them), zoned timestamps as
    ``timestamp_text`` writes them (a historical offset with seconds would be cut)."""
    from .jsonl import is_binary, timestamp_text, to_json

    binary = {i for i, f in enumerate(schema) if is_binary(f.type)}
    zoned = {i for i, f in enumerate(schema) if pa.types.is_timestamp(f.type) and f.type.tz}
    text = pa.schema([f.with_type(pa.string()) if i in binary | zoned else f for i, f in enumerate(schema)])
    with pacsv.CSVWriter(sink, text, write_options=pacsv.WriteOptions(delimiter=delimiter)) as writer:
        for batch in batches:
            for i in binary:
                batch = batch.set_column(i, text.field(i), pa.array(to_json(batch.column(i)), pa.string()))
            for i in zoned:
                batch = batch.set_column(i, text.field(i), timestamp_text(batch.column(i)))
            writer.write_batch(batch)


def write_json_lines(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """One JSON object per row, in the mapping of ``jsonl`` (strict JSON that ``append``
    reads back exactly). pyarrow has no JSON writer, so rows go through Python."""
    from .jsonl import json_lines

    for batch in batches:
        sink.write(json_lines(batch).encode())


def write_parquet(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    with pq.ParquetWriter(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def write_arrow(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """The Arrow IPC stream format (``pyarrow.ipc.open_stream``, ``polars.read_ipc_stream``)."""
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


WRITERS: dict[str, Writer] = {
    "table": write_table,
    "csv": write_csv,
    "jsonl": write_json_lines,
    "json": write_json_lines,
    "parquet": write_parquet,
    "arrow": write_arrow,
}

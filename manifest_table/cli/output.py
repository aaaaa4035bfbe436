"""Writing scanned rows: an aligned text table for people, and CSV, JSON lines, Parquet and
Arrow IPC for programs. Every writer takes batches as they come and keeps none: the file
formats go through pyarrow's own writers, the text table renders a chunk at a time."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

Writer = Callable[[Iterable[pa.RecordBatch], pa.Schema, BinaryIO], None]
OUTPUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "jsonl", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".arrow": "arrow", ".arrows": "arrow", ".txt": "table"}
_CHUNK_ROWS = 1000  # rows rendered per text-table chunk: column widths come from the first
_GAP = 2


def write_table(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """Aligned columns, ``null`` for nulls, newlines and tabs escaped, and on a terminal
    (or with ``COLUMNS`` set) values cut with an ellipsis so that a row fits its width.
    Widths come from the header and the first chunk of rows; later rows are cut to them."""
    from rich.console import Console

    text = io.TextIOWrapper(sink, encoding="utf-8", newline="\n", write_through=True)
    limit = _terminal_width(sink)
    console: Console | None = None
    widths: list[int] | None = None
    for chunk in _chunks(batches, schema):
        if widths is None:
            natural = [max([len(n), *map(len, c)]) for n, c in zip(schema.names, chunk)]
            widths = _fit(natural, limit) if limit else natural
            console = Console(file=text, width=max(limit or 0, sum(widths) + _GAP * len(widths)), markup=False,
                              highlight=False, emoji=False, color_system=None, soft_wrap=False)
            chunk = [[n, "-" * min(len(n), w), *c] for n, w, c in zip(schema.names, widths, chunk)]
        if chunk and chunk[0]:
            with console.capture() as captured:  # one chunk, to drop the cells' trailing padding
                console.print(_grid(widths, chunk))
            text.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    text.flush()
    text.detach()


def _terminal_width(sink: BinaryIO) -> int | None:
    """The width to fit: the terminal's, or ``COLUMNS`` when set; None (no cutting) for a
    pipe or a file, where a cut value would be lost."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        return shutil.get_terminal_size().columns if os.isatty(sink.fileno()) else None
    except (AttributeError, OSError, ValueError):  # not a real file
        return None


def _grid(widths: list[int], columns: list[list[str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=None, show_header=False, pad_edge=False, padding=(0, _GAP, 0, 0), collapse_padding=True)
    for width in widths:
        grid.add_column(width=width, no_wrap=True, overflow="ellipsis")
    for row in zip(*columns):
        grid.add_row(*(Text(cell) for cell in row))
    return grid


def _chunks(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[list[list[str]]]:
    """Columns of display strings, about ``_CHUNK_ROWS`` rows at a time (at least one chunk,
    maybe empty, so that the header is printed)."""
    pending: list[pa.RecordBatch] = []
    rows, yielded = 0, False
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= _CHUNK_ROWS:
            yield [_display(c) for c in pa.Table.from_batches(pending, schema).columns]
            pending, rows, yielded = [], 0, True
    if pending or not yielded:
        yield [_display(c) for c in pa.Table.from_batches(pending, schema).columns]


def _display(column: pa.ChunkedArray) -> list[str]:
    """Display strings of a column, cast by Arrow where it can (fast), by Python otherwise."""
    try:
        text = pc.cast(column, pa.string()) if not pa.types.is_binary(column.type) else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        text = None
    if text is None:
        text = pa.chunked_array([pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())])
    for raw, escaped in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        text = pc.replace_substring(text, raw, escaped)
    return pc.fill_null(text, "null").to_pylist()


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


def write_csv(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    with pacsv.CSVWriter(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def write_json_lines(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """One JSON object per row. pyarrow has no JSON writer, so rows go through Python."""
    for batch in batches:
        sink.write("".join(json.dumps(row, default=_json_value) + "\n" for row in batch.to_pylist()).encode())


def write_parquet(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    with pq.ParquetWriter(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def write_arrow(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    """The Arrow IPC stream format (``pyarrow.ipc.open_stream``, ``polars.read_ipc_stream``)."""
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


WRITERS: dict[str, Writer] = {"table": write_table, "csv": write_csv, "jsonl": write_json_lines,
                              "json": write_json_lines, "parquet": write_parquet, "arrow": write_arrow}


def _json_value(value: Any) -> str:
    """JSON has no times, decimals or bytes: ISO 8601 for times (what ``append`` reads
    back), base64 for bytes, text for the rest."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value.isoformat() if hasattr(value, "isoformat") else str(value)

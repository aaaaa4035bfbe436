"""A selective read of large row groups in two steps: the filter's columns first, then the
other columns only where rows matched, page by page.

pyarrow decodes whole column chunks, so a scan for one row of a 217k-row row group decoded
all ten columns of the group: 17 ms, where the key column alone takes 0.4 ms (10M rows x 10
columns, docs/design/008-point-reads.md). Here the filter's columns are read and evaluated
first (positions exact: row-group start + index), and each other column is read from the
pages holding the matching rows only (``format/parquet_pages.py``), as a one-column file
pyarrow decodes. A column that cannot be read that way (nested, a page layout that does not
add up, a type pyarrow would write differently) is read whole for the row groups that
matched, never wrongly.

Only where byte ranges cost no request: a local file, or one already in memory. On an object
store each extra read is a round trip of tens of ms, more than the decoding it saves."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..format import parquet_pages as pp
from ..lazy import lazy

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
else:  # (the scan imports this module: pyarrow.dataset imports pandas, 0.2 s, docs/benchmarks.md)
    pafs = lazy("pyarrow.fs")
    pq = lazy("pyarrow.parquet")

LARGE_GROUP_ROWS = 40_000
"""Row groups at least this large take the two-step read: two pages of parquet-cpp's
default 20,000 rows. Smaller ones decode whole in about as long as the second step costs."""

FEW_ROWS = 256
"""At most this many matching rows are read page by page; more are read with their row
groups' whole chunks (only the groups that matched)."""


@dataclass(frozen=True)
class Matches:
    """The rows of one file that the filter selected: their columns (file names) and their
    physical positions in the file."""

    table: pa.Table
    positions: np.ndarray


def applies(fragment: ds.ParquetFileFragment, meta: pq.FileMetaData, groups: Sequence[int]) -> bool:
    """Whether a filtered read of ``groups`` should take the two-step route."""
    cheap = fragment.buffer is not None or isinstance(fragment.filesystem, pafs.LocalFileSystem)
    return cheap and any(meta.row_group(g).num_rows >= LARGE_GROUP_ROWS for g in groups)


def read_others(
    fragment: ds.ParquetFileFragment,
    meta: pq.FileMetaData,
    leaves: Mapping[str, int],
    columns: Sequence[str],
    positions: np.ndarray,
    starts: np.ndarray,
) -> pa.Table:
    """File ``columns`` at the physical ``positions`` (ascending), in that order: page by page
    when they are few, else from the whole chunks of the row groups that hold them."""
    groups = np.searchsorted(starts, positions, side="right") - 1
    pieces: dict[str, list[pa.ChunkedArray | pa.Array]] = {c: [] for c in columns}
    for group in (int(g) for g in np.unique(groups)):
        rows = positions[groups == group] - starts[group]
        read = _page_reader(fragment, meta, group) if len(positions) <= FEW_ROWS else None
        paged = {c: read(leaves.get(c), rows) for c in columns} if read is not None else {}
        rest = [c for c in columns if paged.get(c) is None]
        whole = fragment.subset(row_group_ids=[group]).to_table(columns=rest, use_threads=False) if rest else None
        for name in columns:
            column = paged.get(name)
            pieces[name].append(column if column is not None else whole.column(name).take(pa.array(rows)))  # type: ignore[union-attr]
    schema = fragment.physical_schema
    return pa.Table.from_arrays(
        [pa.chunked_array([a for p in pieces[c] for a in _chunks(p)], type=schema.field(c).type) for c in columns],
        names=list(columns),
    )


def _chunks(array: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def _page_reader(
    fragment: ds.ParquetFileFragment, meta: pq.FileMetaData, group: int
) -> Callable[[int | None, np.ndarray], pa.Array | None]:
    """Reads one flat column's values at some rows of ``group`` from their pages; None when
    it cannot (the caller then reads the chunk whole)."""
    source = fragment.open()
    row_group = meta.row_group(group)
    schema = fragment.physical_schema

    def read(leaf: int | None, rows: np.ndarray) -> pa.Array | None:
        if leaf is None:
            return None
        chunk = row_group.column(leaf)
        column = meta.schema.column(leaf)
        if column.max_repetition_level:
            return None
        if column.name not in schema.names:
            return None
        field = schema.field(column.name)
        template = _template(field, str(column))
        if template is None:
            return None
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        end = start + chunk.total_compressed_size
        try:
            pages = pp.walk_pages(_reads(source), start, end, row_group.num_rows, int(rows[-1]))
            meta_fields = pp.column_meta(chunk.physical_type, chunk.encodings, column.name, chunk.compression)
        except (ValueError, KeyError):
            return None
        chosen = pp.pages_for_rows(pages, rows.tolist())
        dictionary = b"".join(source.read_at(p.size, p.offset) for p in pages if p.dictionary)
        body = b"".join(source.read_at(p.size, p.offset) for p in chosen)
        mini = pp.one_column_file(template, meta_fields, dictionary, body, sum(p.rows for p in chosen))
        values = pq.ParquetFile(pa.BufferReader(mini)).read(use_threads=False).column(0)
        if values.type != field.type:
            return None
        before = np.cumsum([0] + [p.rows for p in chosen])
        firsts = np.array([p.first_row for p in chosen], dtype=np.int64)
        page = np.searchsorted(firsts, rows, side="right") - 1
        return values.take(pa.array(before[page] + rows - firsts[page]))

    return read


def _reads(source: pa.NativeFile) -> Callable[[int, int], bytes]:
    return lambda offset, n: source.read_at(n, offset)


@functools.lru_cache(maxsize=256)
def _template(field: pa.Field, column: str) -> pp.Footer | None:
    """The footer of a one-column file pyarrow writes for ``field``, if its Parquet column is
    the one described by ``column`` (a ``ColumnSchema``'s text); None if it differs (a file
    another writer made, with a physical type pyarrow would not choose)."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({field.name: pa.array([], field.type)}, schema=pa.schema([field])), sink)
    data = sink.getvalue().to_pybytes()
    if str(pq.ParquetFile(pa.BufferReader(data)).schema.column(0)) != column:
        return None
    length = int.from_bytes(data[-8:-4], "little")
    return pp.Footer.of(pp.decode_struct(data[-8 - length : -8])[0])

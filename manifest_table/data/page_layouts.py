"""Where a Parquet column chunk's pages are, and their bounds: kept with the file's footer
(``ParquetSource.derived``), so that a long-lived handle finds them once.

Pages are located by the chunk's offset index (``format/page_index.py``): a row group's
offset indexes, which parquet-cpp writes end to end, are read in one piece (``_IndexRun``),
and each chunk's taken where the one before it ends if it describes exactly its chunk, else
searched for in the encoded footer on its own; a chunk without an index has its page headers
walked (``format/parquet_pages.py``). A data page's bounds come from the chunk's column
index, decoded the first time they are asked for (only a filter's columns need them).
``data/point_reads.py`` reads values from these pages; ``data/bloom_probes.py`` shares the
footer's Arrow types (``natural_schema``)."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..format import page_index
from ..format import parquet_pages as pp
from ..format.stats import ColumnStats
from ..storage.fileio import ParquetSource

if TYPE_CHECKING:
    import pyarrow.parquet as pq

_FEW_PLACED = 8
"""At most this many rows are placed in pages one by one (``bisect``), not by numpy."""


@dataclass(frozen=True)
class ChunkPages:
    """Where one column chunk's pages are (its dictionary page first, if any) and, from the
    column index, each data page's bounds."""

    pages: list[pp.Page]
    find_bounds: Callable[[], page_index.PageBounds | None] = dataclasses.field(compare=False, repr=False)
    """Reads and decodes the chunk's column index, the first time ``bounds`` is asked for:
    only the filter's columns need them."""
    column: bytes
    """Its ``ColumnMetaData`` fields a ``pages_file`` keeps, encoded (``pp.column_meta``)."""
    text: str
    """Its Parquet column as pyarrow prints it (``ColumnSchema``), to check the template by."""

    @functools.cached_property
    def bounds(self) -> page_index.PageBounds | None:
        """From the column index, each data page's bounds (None: no index, or one not decoded)."""
        return self.find_bounds()

    @functools.cached_property
    def data(self) -> list[pp.Page]:
        return [p for p in self.pages if not p.dictionary]

    @functools.cached_property
    def firsts(self) -> list[int]:
        return [p.first_row for p in self.data]

    @functools.cached_property
    def _first_rows(self) -> np.ndarray:
        return np.asarray(self.firsts, dtype=np.int64)

    def holding(self, rows: np.ndarray) -> list[pp.Page]:
        """The data pages holding ``rows`` (ascending), in order. A run of consecutive rows
        (a span read whole) or a few rows are placed by their ends or one by one: a
        searchsorted of a whole page's 20,000 rows cost a point read 0.1 ms."""
        if 0 < len(rows) <= _FEW_PLACED:
            return [self.data[i] for i in sorted({bisect.bisect_right(self.firsts, r) - 1 for r in rows.tolist()})]
        if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):  # every page between the ends
            lo, hi = int(rows[0]), int(rows[-1])
            return self.data[bisect.bisect_right(self.firsts, lo) - 1 : bisect.bisect_right(self.firsts, hi)]
        index = np.searchsorted(self._first_rows, rows, side="right") - 1
        first = np.ones(len(index), dtype=bool)
        first[1:] = index[1:] != index[:-1]
        return [self.data[i] for i in index[first].tolist()]

    def stats(self, lo: int, hi: int) -> ColumnStats | None:
        """Bounds of rows ``[lo, hi)`` of the row group, which lie in one data page."""
        if self.bounds is None:
            return None
        i = bisect.bisect_right(self.firsts, lo) - 1
        nulls, page_rows = self.bounds.null_counts[i], self.data[i].rows
        if nulls == page_rows:  # every row null
            return ColumnStats(None, None, hi - lo, hi - lo)
        return ColumnStats(self.bounds.mins[i], self.bounds.maxes[i], 0 if nulls == 0 else None, hi - lo)


def chunk_pages(source: ParquetSource, group: int, leaf: int) -> ChunkPages | None:
    """Where the pages of column chunk (``group``, ``leaf``) are, from its offset index or its
    page headers, with its page bounds if it has a column index; None for a nested column or
    one whose pages do not add up. Found once per file (``ParquetSource.derived``)."""
    key = ("pages", group, leaf)
    if key not in source.derived:
        source.derived[key] = _find_pages(source, group, leaf)
    return source.derived[key]


def _find_pages(source: ParquetSource, group: int, leaf: int) -> ChunkPages | None:
    meta = source.metadata
    row_group, column = meta.row_group(group), meta.schema.column(leaf)
    if column.max_repetition_level:
        return None
    chunk = row_group.column(leaf)
    try:
        encoded = pp.column_meta(chunk.physical_type, chunk.encodings, column.name, chunk.compression)
    except KeyError:  # an encoding or codec newer than this module
        return None
    text = str(column)
    facts = _facts(chunk, row_group.num_rows)
    with source.fragment.open() as file:
        index = _offset_index(source, file, group, leaf, facts) if chunk.has_offset_index else None
        if index is not None:
            pages, index_at = index
            bounds = functools.partial(
                _read_bounds, source, group, leaf, index_at, sum(not p.dictionary for p in pages)
            )
            return ChunkPages(pages, bounds, encoded, text)
        try:
            end = facts.start + facts.total_compressed_size
            reads = lambda offset, n: file.read_at(n, offset)  # noqa: E731
            pages = pp.walk_pages(reads, facts.start, end, facts.rows, facts.rows - 1)
            return ChunkPages(pages, lambda: None, encoded, text)
        except (ValueError, IndexError):
            return None


def _facts(chunk: pq.ColumnChunkMetaData, rows: int) -> page_index.ChunkFacts:
    return page_index.ChunkFacts(
        chunk.data_page_offset,
        chunk.dictionary_page_offset if chunk.has_dictionary_page else None,
        chunk.total_compressed_size,
        rows,
    )


Located = tuple[list[tuple[int, int, int]], int]
"""An offset index's page locations (offset, size, first row), and its file offset."""


def _offset_index(
    source: ParquetSource, file: pa.NativeFile, group: int, leaf: int, facts: page_index.ChunkFacts
) -> tuple[list[pp.Page], int] | None:
    """The chunk's pages from its offset index, and the index's file offset: the one its row
    group's run puts it at (``_IndexRun``), else the first place the footer search finds
    that describes the chunk; None if none does."""
    run = source.derived.get(("offset indexes", group))
    if run is None:
        run = source.derived[("offset indexes", group)] = _IndexRun.of(source, file, group)
    located = run.located(leaf)
    if located is not None:
        pages = page_index.pages_of(located[0], facts)
        if pages is not None:
            return pages, located[1]
    for where in page_index.locate(_footer(source, file), facts):
        offset, length = where.offset_index
        pages = page_index.decode_offsets(file.read_at(length, offset), facts)
        if pages is not None:
            return pages, offset
    return None


MAX_GROUP_INDEX_BYTES = 4 * 1024 * 1024
"""A row group's offset indexes are read in one piece up to this size."""


class _IndexRun:
    """The offset indexes of a row group's chunks, read in one piece. They lie end to end
    (parquet-cpp writes them so): from where the footer says the first one is to the end of
    the last. A chunk's is decoded where the one before it ends, the ones before skipped, not
    decoded; ``pages_of`` judges it against its chunk, and one refused, or past an index that
    does not parse, is searched for on its own. (A point read in a row group not read before
    searched the footer for ten chunks' indexes, read and decoded each: 1.5 ms,
    docs/design/008-point-reads.md, part ten.)"""

    def __init__(self, data: bytes, start: int, row_group: pq.RowGroupMetaData | None) -> None:
        self._data, self._start, self._row_group = data, start, row_group
        self._at: dict[int, int] = {}  # leaf -> where its index starts in data, for those walked past
        self._leaf, self._next = 0, 0  # the next leaf to walk past, where its index would start
        self._lock = threading.Lock()

    @classmethod
    def of(cls, source: ParquetSource, file: pa.NativeFile, group: int) -> _IndexRun:
        """Row ``group``'s run (empty where its first or last index is not found exactly
        once, they are not in that order, or span more than ``MAX_GROUP_INDEX_BYTES``)."""
        row_group = source.metadata.row_group(group)
        leaves = range(row_group.num_columns)
        first, last = _first_indexed(row_group, leaves), _first_indexed(row_group, reversed(leaves))
        if first is None or last is None:
            return cls(b"", 0, None)
        footer = _footer(source, file)
        starts = page_index.locate(footer, _facts(first, row_group.num_rows))
        ends = page_index.locate(footer, _facts(last, row_group.num_rows))
        if len(starts) != 1 or len(ends) != 1:
            return cls(b"", 0, None)
        start, (end, length) = starts[0].offset_index[0], ends[0].offset_index
        if not 0 <= start <= end or end + length - start > MAX_GROUP_INDEX_BYTES:
            return cls(b"", 0, None)
        return cls(file.read_at(end + length - start, start), start, row_group)

    def located(self, leaf: int) -> Located | None:
        """Chunk ``leaf``'s page locations and their file offset, where the run puts them;
        None if it does not reach them."""
        with self._lock:
            while leaf not in self._at and self._row_group is not None and self._leaf < self._row_group.num_columns:
                if self._row_group.column(self._leaf).has_offset_index:
                    self._at[self._leaf] = self._next
                    try:
                        self._next = page_index.offsets_end(self._data, self._next)
                    except (IndexError, ValueError):  # (the run ends here)
                        self._row_group = None
                self._leaf += 1
        at = self._at.get(leaf)
        if at is None:
            return None
        try:
            return page_index.offsets_at(self._data, at)[0], self._start + at
        except (IndexError, KeyError, TypeError, ValueError):
            return None


def _first_indexed(row_group: pq.RowGroupMetaData, leaves: Iterable[int]) -> pq.ColumnChunkMetaData | None:
    """The first of these chunks with an offset index."""
    for leaf in leaves:
        chunk = row_group.column(leaf)
        if chunk.has_offset_index:
            return chunk
    return None


def _read_bounds(
    source: ParquetSource, group: int, leaf: int, index_at: int, pages: int
) -> page_index.PageBounds | None:
    """From the chunk's column index, the bounds of its ``pages`` data pages: the one the
    footer gives with the offset index at ``index_at``."""
    meta = source.metadata
    column, row_group = meta.schema.column(leaf), meta.row_group(group)
    chunk = row_group.column(leaf)
    natural = natural_schema(source).get_field_index(column.path)
    if not chunk.has_column_index or natural < 0:
        return None
    with source.fragment.open() as file:
        for where in page_index.locate(_footer(source, file), _facts(chunk, row_group.num_rows)):
            at, length = where.column_index
            if where.offset_index[0] == index_at and length:
                stored = natural_schema(source).field(natural).type
                return page_index.decode_bounds(file.read_at(length, at), pages, chunk.physical_type, stored)
    return None


def _footer(source: ParquetSource, file: pa.NativeFile) -> bytes:
    """The file's encoded footer (``FileMetaData``), read once."""
    if "footer" not in source.derived:
        size = file.size()
        length = int.from_bytes(file.read_at(8, size - 8)[:4], "little")
        source.derived["footer"] = file.read_at(length, size - 8 - length) if 0 < length <= size - 12 else b""
    return source.derived["footer"]


def natural_schema(source: ParquetSource) -> pa.Schema:
    """The Arrow types of the file's columns as stored (the units of their integers), before
    the casts to the table's types."""
    if "natural" not in source.derived:
        source.derived["natural"] = source.metadata.schema.to_arrow_schema()
    return source.derived["natural"]

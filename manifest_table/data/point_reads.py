"""A selective read of large row groups page by page: the filter's columns only in the pages
whose bounds may match, then the other columns only in the pages holding the matching rows.

pyarrow decodes whole column chunks, so a scan for one row of a 217k-row row group decoded
all ten columns of the group: 17 ms, where the key column alone takes 0.4 ms (10M rows x 10
columns, docs/design/008-point-reads.md). Here:
1. ``candidate_spans``: the rows of each row group whose pages' bounds (the column index,
   ``format/page_index.py``) may match the filter, cut at every page boundary of the filter's
   columns, so each piece lies in one page of each;
2. ``read_spans``: the filter's columns at those rows, read from their pages;
3. the caller evaluates the filter there (positions exact: row-group start + index);
4. ``read_others``: each other column at the matching rows, from the pages holding them:
   read straight from the page where its encoding places a row's value without decoding
   the others (``format/page_values.py``: fixed-width and dictionary values), else decoded
   by pyarrow.
Pages are located by the offset index, or by walking their headers in files without one
(``format/parquet_pages.py``); both are kept with the file's footer
(``ParquetSource.derived``), so a long-lived handle finds them once. The pages of several
columns that hold the same rows are decoded as one file, in one call. A column that cannot be
read this way (nested, a page layout that does not add up, a type pyarrow would write
differently) is read whole for the row groups that matched, never wrongly.

Only where byte ranges cost no request: a local file, or one already in memory. On an object
store each extra read is a round trip of tens of ms, more than the decoding it saves."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..format import page_index, page_values
from ..format import parquet_pages as pp
from ..format.stats import ColumnStats
from ..lazy import lazy
from ..storage.fileio import ParquetSource

if TYPE_CHECKING:
    import pyarrow.parquet as pq
else:  # (the scan imports this module; a count reads no Parquet)
    pq = lazy("pyarrow.parquet")

LARGE_GROUP_ROWS = 40_000
"""Row groups at least this large are read page by page: two pages of parquet-cpp's default
20,000 rows. Smaller ones decode whole in about as long as the page steps cost."""

FEW_ROWS = 256
"""At most this many matching rows are read page by page; more are read with their row
groups' whole chunks (only the groups that matched)."""

_FEW_PLACED = 8
"""At most this many rows are placed in pages one by one (``bisect``), not by numpy."""

Lookup = Callable[[str], ColumnStats | None]
"""A file column's statistics over some rows (None: unknown)."""


def applies(source: ParquetSource, groups: Sequence[int]) -> bool:
    """Whether a filtered read of ``groups`` should take the page route."""
    meta = source.metadata
    return source.local and any(meta.row_group(g).num_rows >= LARGE_GROUP_ROWS for g in groups)


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


def candidate_spans(
    source: ParquetSource,
    groups: Sequence[int],
    starts: np.ndarray,
    leaves: Mapping[str, int],
    may_match: Callable[[Lookup], bool],
) -> list[tuple[int, int]]:
    """The row spans (file positions, ascending) of ``groups`` in which the filter may match,
    judged by ``may_match`` on the page bounds of the filter's columns (``leaves``: file
    column -> leaf); a row group without bounds is one whole span. Once the first
    ``FUTILE_GROUPS`` row groups judged have kept every page, the file's pages are taken not
    to prune (a key the file is not clustered by, every page of which spans its whole range):
    its other groups are whole spans, unjudged (2.7 ms a 5M-row file otherwise)."""
    spans: list[tuple[int, int]] = []
    meta = source.metadata
    futile: int | None = 0  # row groups whose pages ruled nothing out; None once one did
    for group in groups:
        start, rows = int(starts[group]), meta.row_group(group).num_rows
        known = (
            {}
            if rows < LARGE_GROUP_ROWS or futile == FUTILE_GROUPS
            else {name: chunk_pages(source, group, leaf) for name, leaf in leaves.items()}
        )
        bounded = {name: c for name, c in known.items() if c is not None and c.bounds is not None}
        if not bounded:
            spans.append((start, start + rows))
            continue
        cuts = sorted({row for c in bounded.values() for row in c.firsts} | {rows})
        kept = 0
        for lo, hi in zip(cuts, cuts[1:]):
            if may_match(functools.partial(_piece_stats, bounded, lo, hi)):
                kept += 1
                if spans and spans[-1][1] == start + lo:
                    spans[-1] = (spans[-1][0], start + hi)
                else:
                    spans.append((start + lo, start + hi))
        if futile is not None:
            futile = futile + 1 if kept == len(cuts) - 1 else None
    return spans


FUTILE_GROUPS = 2
"""Row groups whose pages all may match before a file's pages are no longer judged."""


def _piece_stats(chunks: Mapping[str, ChunkPages], lo: int, hi: int, name: str) -> ColumnStats | None:
    return chunks[name].stats(lo, hi) if name in chunks else None


def read_spans(
    source: ParquetSource,
    leaves: Mapping[str, int],
    columns: Sequence[str],
    spans: Sequence[tuple[int, int]],
    starts: np.ndarray,
) -> pa.Table | None:
    """File ``columns`` over the rows of ``spans``, in order; None if a column cannot be read
    from its pages (the caller then reads whole row groups)."""
    rows = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in spans])
    found = _read_at(source, leaves, columns, rows, starts)
    if any(found[c] is None for c in columns):
        return None
    return _table(source, columns, {c: [found[c]] for c in columns})


def read_others(
    source: ParquetSource, leaves: Mapping[str, int], columns: Sequence[str], positions: np.ndarray, starts: np.ndarray
) -> pa.Table:
    """File ``columns`` at the physical ``positions`` (ascending), in that order: page by page
    when they are few, else from the whole chunks of the row groups that hold them."""
    if not columns:  # (a table without columns keeps its row count this way)
        return pa.table({"_": pa.nulls(len(positions))}).select([])
    pieces: dict[str, list[pa.ChunkedArray | pa.Array]] = {c: [] for c in columns}
    for group, rows in _by_group(positions, starts):
        paged = _read_at(source, leaves, columns, rows + starts[group], starts) if len(positions) <= FEW_ROWS else {}
        rest = [c for c in columns if paged.get(c) is None]
        if rest:
            whole = source.fragment.subset(row_group_ids=[group]).to_table(columns=rest, use_threads=False)
            paged.update({name: whole.column(name).take(pa.array(rows)) for name in rest})
        for name in columns:
            pieces[name].append(paged[name])
    return _table(source, columns, pieces)


def _by_group(positions: np.ndarray, starts: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(row group, its rows) for the file ``positions`` (ascending), ``starts`` being each
    group's first row and then the file's rows."""
    edges = np.searchsorted(positions, starts)
    return [
        (group, positions[edges[group] : edges[group + 1]] - starts[group])
        for group in np.flatnonzero(edges[1:] > edges[:-1]).tolist()
    ]


def _table(
    source: ParquetSource, columns: Sequence[str], pieces: Mapping[str, list[pa.ChunkedArray | pa.Array]]
) -> pa.Table:
    schema = source.fragment.physical_schema
    return pa.Table.from_arrays(
        [pa.chunked_array([a for p in pieces[c] for a in _chunks(p)], type=schema.field(c).type) for c in columns],
        names=list(columns),
    )


def _chunks(array: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


# --- one row group's pages -------------------------------------------------------------
_Spans = tuple[tuple[int, int], ...]
"""The pages a column's values come from, as (first row, rows) each: columns whose pages
hold the same rows decode together."""


@dataclass(frozen=True)
class _Planned:
    """One column's part of a decode: what to read of it, and how."""

    name: str
    field: pa.Field
    text: str
    """Its Parquet column as pyarrow prints it (``ColumnSchema``), checked against the template."""
    chunk: pp.ChunkBytes
    dictionary_strings: bool
    """Dictionary-encoded strings: decoded as a dictionary, then cast (20k strings are not
    built for the one row wanted)."""


def _read_at(
    source: ParquetSource,
    leaves: Mapping[str, int],
    columns: Sequence[str],
    positions: np.ndarray,
    starts: np.ndarray,
) -> dict[str, pa.Array | None]:
    """File ``columns`` at ``positions`` (ascending) of one or more row groups, from their
    pages; a column that cannot be read that way is None."""
    found: dict[str, list[pa.Array | None]] = {c: [] for c in columns}
    with source.fragment.open() as file:
        for group, rows in _by_group(positions, starts):
            values = _group_reader(source, file, group)([(c, leaves.get(c)) for c in columns], rows)
            for c in columns:
                found[c].append(values.get(c))
    return {c: None if any(v is None for v in found[c]) else _concat(found[c]) for c in columns}


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _group_reader(
    source: ParquetSource, file: pa.NativeFile, group: int
) -> Callable[[list[tuple[str, int | None]], np.ndarray], dict[str, pa.Array]]:
    """Reads flat columns at some rows of ``group``: the values of few rows straight from
    their pages where the encoding allows (``_values_at``), the other columns whose chosen
    pages hold the same rows decoded together by pyarrow, on this thread (a decoder thread
    overlapping the two saved 0.5 ms before part nine of design note 008 and nothing after:
    the handoff cost what the overlap gained). A column missing from the answer cannot be
    read this way."""
    schema = source.fragment.physical_schema

    def plan(name: str, leaf: int | None, rows: np.ndarray) -> tuple[_Spans, _Planned] | None:
        if leaf is None or name not in schema.names:
            return None
        layout = chunk_pages(source, group, leaf)
        field = schema.field(name)
        if layout is None or _template((field,), (layout.text,)) is None:
            return None
        chosen = layout.holding(rows)
        dictionary = _dictionary_page(source, file, group, leaf, layout)
        body = b"".join(file.read_at(p.size, p.offset) for p in chosen)
        strings = bool(dictionary) and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type))
        return tuple((p.first_row, p.rows) for p in chosen), _Planned(
            name, field, layout.text, pp.ChunkBytes(layout.column, dictionary, body), strings
        )

    def planned(columns: list[tuple[str, int | None]], rows: np.ndarray) -> list[tuple[_Spans, list[_Planned]]]:
        together: dict[_Spans, list[_Planned]] = {}
        for name, leaf in columns:
            found = plan(name, leaf, rows)
            if found is not None:
                together.setdefault(found[0], []).append(found[1])
        return list(together.items())

    def read(columns: list[tuple[str, int | None]], rows: np.ndarray) -> dict[str, pa.Array]:
        out: dict[str, pa.Array] = {}
        left: list[tuple[str, int | None]] = []
        for name, leaf in columns:
            values = _values_at(source, file, group, leaf, rows) if len(rows) <= FEW_ROWS and leaf is not None else None
            if values is None:
                left.append((name, leaf))
            else:
                out[name] = values
        for spans, planned_columns in planned(left, rows):
            out.update(_decode(planned_columns, spans, rows))
        return out

    return read


def _values_at(source: ParquetSource, file: pa.NativeFile, group: int, leaf: int, rows: np.ndarray) -> pa.Array | None:
    """The values at ``rows`` of column chunk (``group``, ``leaf``) read straight from their
    pages (``format/page_values.py``), skipping pyarrow's decode of whole pages; None where
    a page's encoding is not one read that way, or does not add up (pyarrow then decodes
    it, and judges it)."""
    chunk = _page_chunk(source, group, leaf)
    layout = chunk_pages(source, group, leaf)
    if chunk is None or layout is None:
        return None
    try:
        entries = _dictionary_entries(source, file, group, leaf, layout, chunk)
        pieces = []
        for page in layout.holding(rows):
            inside = rows[(rows >= page.first_row) & (rows < page.first_row + page.rows)] - page.first_row
            values = page_values.values_at(chunk, entries, file.read_at(page.size, page.offset), inside.tolist())
            if values is None:
                return None
            pieces.append(values)
    except (ValueError, pa.ArrowException):  # (page_values' "does not add up"; text not UTF-8)
        return None
    return _concat(pieces)


def _page_chunk(source: ParquetSource, group: int, leaf: int) -> page_values.Chunk | None:
    """What ``page_values`` needs of the chunk, if it reads the column: flat, of a type
    whose Arrow form in the file is the one its Parquet type maps to, in encodings it may
    decode (kept with the footer)."""
    key = ("page values", group, leaf)
    if key not in source.derived:
        column, chunk = source.metadata.schema.column(leaf), source.metadata.row_group(group).column(leaf)
        natural = natural_schema(source)
        at = natural.get_field_index(column.path)
        schema = source.fragment.physical_schema
        field = schema.field(column.path) if column.path in schema.names else None
        found = None
        if (
            at >= 0
            and field is not None
            and not column.max_repetition_level
            and natural.field(at).type == field.type
            and page_values.supports(chunk.physical_type, chunk.compression, field.type)
            and page_values.may_decode(chunk.physical_type, chunk.encodings, chunk.has_dictionary_page)
        ):
            found = page_values.Chunk(
                chunk.physical_type, chunk.compression, column.max_definition_level > 0, field.type
            )
        source.derived[key] = found
    return source.derived[key]


def _dictionary_entries(
    source: ParquetSource, file: pa.NativeFile, group: int, leaf: int, layout: ChunkPages, chunk: page_values.Chunk
) -> page_values.Entries | None:
    """The chunk's dictionary values (None: no dictionary page, or one not decoded here),
    kept with the footer when its page is."""
    if not layout.pages or not layout.pages[0].dictionary:
        return None
    key = ("dictionary entries", group, leaf)
    if key not in source.derived:
        entries = page_values.dictionary_entries(chunk, _dictionary_page(source, file, group, leaf, layout))
        if entries is not None and ("dictionary", group, leaf) not in source.derived:
            return entries  # (a large page, read at each use: its values are not kept either)
        source.derived[key] = entries
    return source.derived[key]


def _decode(columns: list[_Planned], spans: _Spans, rows: np.ndarray) -> dict[str, pa.Array]:
    """The values at ``rows`` of ``columns``, whose pages hold the row ``spans`` (first row,
    rows), decoded as one file."""
    template = _template(tuple(c.field for c in columns), tuple(c.text for c in columns))
    if template is None:
        return {}
    total = sum(n for _, n in spans)
    data = pp.pages_file(template, [c.chunk for c in columns], total)
    dictionary = [c.name for c in columns if c.dictionary_strings]
    table = pq.ParquetFile(pa.BufferReader(data), read_dictionary=dictionary or None).read(use_threads=False)
    index = _indexes(spans, rows) if len(rows) < total else None  # (all: the spans read whole)
    start = 0 if index is None else int(index[0])
    contiguous = index is None or int(index[-1]) - start + 1 == len(index)
    out = {}
    for i, c in enumerate(columns):
        values = table.column(i)
        values = values.slice(start, len(rows)) if contiguous else values.take(pa.array(index))
        if c.dictionary_strings and pa.types.is_dictionary(values.type):
            values = values.cast(c.field.type)
        if values.type == c.field.type:
            out[c.name] = values.combine_chunks()
    return out


def _indexes(spans: _Spans, rows: np.ndarray) -> np.ndarray:
    """Where ``rows`` are among the rows of the pages of ``spans`` (first row, rows) put end to end."""
    firsts = np.array([first for first, _ in spans], dtype=np.int64)
    before = np.cumsum([0] + [n for _, n in spans])
    page = np.searchsorted(firsts, rows, side="right") - 1
    return before[page] + rows - firsts[page]


@functools.lru_cache(maxsize=256)
def _template(fields: tuple[pa.Field, ...], columns: tuple[str, ...]) -> pp.Footer | None:
    """The footer of a file pyarrow writes for ``fields``, if its Parquet columns are those
    described by ``columns`` (``ColumnSchema`` texts); None if one differs (a file another
    writer made, with a physical type pyarrow would not choose)."""
    sink = pa.BufferOutputStream()
    schema = pa.schema(list(fields))
    pq.write_table(schema.empty_table(), sink)
    data = sink.getvalue().to_pybytes()
    written = pq.ParquetFile(pa.BufferReader(data)).schema
    if tuple(str(written.column(i)) for i in range(len(fields))) != columns:
        return None
    length = int.from_bytes(data[-8:-4], "little")
    return pp.Footer.of(pp.decode_struct(data[-8 - length : -8])[0])


# --- page layouts, kept with the footer --------------------------------------------------
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


def _dictionary_page(source: ParquetSource, file: pa.NativeFile, group: int, leaf: int, layout: ChunkPages) -> bytes:
    """The chunk's dictionary page (empty if none); one of at most ``KEPT_DICTIONARY_BYTES``
    is kept with the footer."""
    key = ("dictionary", group, leaf)
    page = source.derived.get(key)
    if page is None:
        page = b"".join(file.read_at(p.size, p.offset) for p in layout.pages if p.dictionary)
        if len(page) <= KEPT_DICTIONARY_BYTES:
            source.derived[key] = page
    return page


KEPT_DICTIONARY_BYTES = 64 * 1024
"""Larger dictionary pages are read at each use, so that what a footer keeps stays small."""


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

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
Where the pages are, and their bounds, comes from ``data/page_layouts.py`` (the offset and
column indexes, or the page headers), kept with the file's footer. The pages of several
columns that hold the same rows are decoded as one file, in one call. A column that cannot be
read this way (nested, a page layout that does not add up, a type pyarrow would write
differently) is read whole for the row groups that matched, never wrongly.

Only where byte ranges cost no request: a local file, or one already in memory. On an object
store each extra read is a round trip of tens of ms, more than the decoding it saves."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..format import page_values
from ..format import parquet_pages as pp
from ..format.stats import ColumnStats
from ..lazy import lazy
from ..storage.fileio import ParquetSource
from .page_layouts import ChunkPages, chunk_pages, natural_schema

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

Lookup = Callable[[str], ColumnStats | None]
"""A file column's statistics over some rows (None: unknown)."""


def applies(source: ParquetSource, groups: Sequence[int]) -> bool:
    """Whether a filtered read of ``groups`` should take the page route."""
    meta = source.metadata
    return source.local and any(meta.row_group(g).num_rows >= LARGE_GROUP_ROWS for g in groups)


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

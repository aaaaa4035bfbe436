"""A column chunk's page index (Parquet's offset index and column index), found and decoded
without pyarrow, which writes it but exposes neither the index nor where it lies (pyarrow 26).

The footer's ``ColumnChunk`` says where the chunk's two indexes are (fields 4-7). Decoding
the whole footer in Python costs 6-13 ms for a 20 KB footer (16 row groups x 10 columns,
docs/design/008-point-reads.md), more than a point read saves. So the chunk's entry is found
by searching the encoded footer for its own ``ColumnMetaData`` fields 7 and 9
(``total_compressed_size``, ``data_page_offset``: pyarrow reports both), then decoding on from
there: tens of microseconds. The search is only a way to find bytes: what it finds is used
only if the offset index it leads to describes exactly that chunk (first data page at
``data_page_offset``, pages contiguous up to the chunk's end, rows from 0 ascending, no more
than the row group's); else the chunk has no index here, and is read as one without.

Page bounds are decoded for the types whose plain encoding maps onto a Python value without
a conversion of units: integers, floats, dates, timestamps of s/ms/us, booleans and strings.
Zoned timestamps' bounds are UTC instants, as their footer stats and ours are
(``stats.instant_type``). Anything else has unknown bounds (never wrong ones), and so has a
chunk whose bounds are no Python value (a timestamp beyond year 9999)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .parquet_pages import _STOP, _STRUCT, Page, _varint, _zigzag, decode_struct, encoded_int, scan_struct
from .stats import instant_type


@dataclass(frozen=True)
class ChunkFacts:
    """What pyarrow's footer says of one column chunk (``ColumnChunkMetaData``)."""

    data_page_offset: int
    dictionary_page_offset: int | None
    total_compressed_size: int
    rows: int
    """The row group's rows."""

    @property
    def start(self) -> int:
        return self.dictionary_page_offset if self.dictionary_page_offset is not None else self.data_page_offset


@dataclass(frozen=True)
class Locations:
    """Where a chunk's offset index and column index are in the file (length 0: absent)."""

    offset_index: tuple[int, int]
    column_index: tuple[int, int]


def locate(footer: bytes, chunk: ChunkFacts) -> list[Locations]:
    """Candidate locations of ``chunk``'s indexes in the encoded ``footer`` (a
    ``FileMetaData``): one per place its fields 7 and 9 occur, usually exactly one. The caller
    keeps the one whose offset index ``decode_offsets`` accepts."""
    # Field 7 (i64, one after field 6), then field 9 (i64, two after 7: field 8, key-value
    # metadata, is absent from every writer's chunks we know; where present, nothing is found).
    needle = b"\x16" + encoded_int(chunk.total_compressed_size) + b"\x26" + encoded_int(chunk.data_page_offset)
    found: list[Locations] = []
    at = footer.find(needle)
    while at >= 0 and len(found) < 4:
        try:
            end = scan_struct(footer, at + len(needle), {}, last=9)  # the rest of ColumnMetaData
            wanted = {4: -1, 5: -1, 6: -1, 7: -1}
            scan_struct(footer, end, wanted, last=3)  # ColumnChunk after its meta_data (field 3)
        except (IndexError, ValueError):
            wanted = {}
        if wanted.get(4, -1) >= 0 and wanted.get(5, -1) > 0:
            column = (wanted[6], wanted[7]) if wanted[6] >= 0 and wanted[7] > 0 else (0, 0)
            found.append(Locations((wanted[4], wanted[5]), column))
        at = footer.find(needle, at + 1)
    return found


def decode_offsets(data: bytes, chunk: ChunkFacts) -> list[Page] | None:
    """The chunk's pages from its encoded ``OffsetIndex`` (the dictionary page first, if any),
    or None if the index does not describe exactly this chunk."""
    try:
        raw, _ = offsets_at(data, 0)
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    return pages_of(raw, chunk)


def offsets_at(data: bytes, i: int) -> tuple[list[tuple[int, int, int]], int]:
    """Each page's (offset, compressed size, first row) from the ``OffsetIndex`` encoded at
    ``data[i]``, and the offset just past it. Malformed bytes raise. Its ``PageLocation``
    entries, as every writer we know encodes them, are read by a walk of their own (three
    varints in a row: 4 us a chunk of 12 pages, where the generic decoder took 30 us and a
    point read in a row group not read before decodes ten); any other shape the generic way."""
    if data[i] != _LIST_FIELD_1:
        fields, end = decode_struct(data, i)
        return [_location(loc) for loc in fields[1][1][1]], end
    head = data[i + 1]
    i += 2
    count = head >> 4
    if head & 0x0F != _STRUCT:
        raise ValueError("an offset index whose page locations are not structs")
    if count == 15:
        count, i = _varint(data, i)
    raw = []
    for _ in range(count):
        location, i = _location_at(data, i)
        raw.append(location)
    return raw, scan_struct(data, i, {}, last=1)  # (field 2, unencoded sizes, if any)


def offsets_end(data: bytes, i: int) -> int:
    """The offset just past the ``OffsetIndex`` encoded at ``data[i]``, its values not
    decoded: a row group's indexes lie end to end, and a read of one chunk's skips the ones
    before it. Malformed bytes raise."""
    found = _OFFSET_INDEX.match(data, i)
    return found.end() if found is not None else scan_struct(data, i, {})


_VARINT = rb"[\x80-\xff]*[\x00-\x7f]"
_OFFSET_INDEX = re.compile(rb"\x19(?:[\x0c-\xec]|\xfc%b)(?:\x16%b\x15%b\x16%b\x00)*\x00" % ((_VARINT,) * 4), re.DOTALL)
"""An ``OffsetIndex`` of only its page locations, each three varints in a row (what
``offsets_at`` reads by its own walk)."""


_LIST_FIELD_1 = 0x19
"""The header byte of a struct's field 1 holding a list (compact protocol)."""


def _location_at(data: bytes, i: int) -> tuple[tuple[int, int, int], int]:
    """The ``PageLocation`` at ``data[i]`` (fields 1-3 as i64, i32, i64 in order, then the
    struct's end), and the offset past it."""
    if data[i] == 0x16:
        offset, j = _varint(data, i + 1)
        if data[j] == 0x15:
            size, j = _varint(data, j + 1)
            if data[j] == 0x16:
                first, j = _varint(data, j + 1)
                if data[j] == _STOP:
                    return (_zigzag(offset), _zigzag(size), _zigzag(first)), j + 1
    fields, end = decode_struct(data, i)
    return _location(fields), end


def _location(fields: Any) -> tuple[int, int, int]:
    return fields[1][1], fields[2][1], fields[3][1]


def pages_of(raw: Sequence[tuple[int, int, int]], chunk: ChunkFacts) -> list[Page] | None:
    """The chunk's pages (its dictionary page first, if any) from its offset index's page
    locations, or None if they do not describe exactly this chunk: first data page at
    ``data_page_offset``, pages contiguous up to the chunk's end, rows from 0 ascending, no
    more than the row group's."""
    end = chunk.start + chunk.total_compressed_size
    if not raw or raw[0][0] != chunk.data_page_offset or raw[0][2] != 0:
        return None
    pages = []
    if chunk.dictionary_page_offset is not None:
        if not chunk.dictionary_page_offset < chunk.data_page_offset:
            return None
        pages.append(
            Page(chunk.dictionary_page_offset, chunk.data_page_offset - chunk.dictionary_page_offset, 0, 0, True)
        )
    for i, (offset, size, first) in enumerate(raw):
        following = raw[i + 1] if i + 1 < len(raw) else (end, 0, chunk.rows)
        if size <= 0 or offset + size != following[0] or not first < following[2] <= chunk.rows:
            return None
        pages.append(Page(offset, size, first, following[2] - first, False))
    return pages


@dataclass(frozen=True)
class PageBounds:
    """Per data page of a chunk: its min and max (None: unknown), its nulls (None: unknown)."""

    mins: Sequence[Any]
    maxes: Sequence[Any]
    null_counts: Sequence[int | None]


def decode_bounds(data: bytes, pages: int, physical: str, natural: pa.DataType) -> PageBounds | None:
    """The bounds in an encoded ``ColumnIndex`` of ``pages`` data pages, as Python values of
    ``natural`` (the Arrow type of the Parquet column as stored, without the table's
    casts); None where they cannot be decoded exactly."""
    try:
        fields, _ = decode_struct(data)
        null_pages = fields[1][1][1]
        low, high = fields[2][1][1], fields[3][1][1]
        counts = fields[5][1][1] if 5 in fields else [None] * pages
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    if not len(null_pages) == len(low) == len(high) == len(counts) == pages:
        return None
    mins, maxes = _values(low, null_pages, physical, natural), _values(high, null_pages, physical, natural)
    if mins is None or maxes is None:
        return None
    return PageBounds(mins, maxes, [None if c is None or c < 0 else c for c in counts])


_FIXED = {"INT32": ("<i4", "<u4"), "INT64": ("<i8", "<u8"), "FLOAT": ("<f4",) * 2, "DOUBLE": ("<f8",) * 2}


def _values(raw: list[bytes], null_pages: list[bool], physical: str, natural: pa.DataType) -> list[Any] | None:
    """Plain-encoded values as Python values of ``natural`` (None for an all-null page)."""
    if physical in _FIXED and _exact(natural, physical):
        signed, unsigned = _FIXED[physical]
        width = int(signed[2])
        if any(len(b) != width for b, null in zip(raw, null_pages) if not null):
            return None
        filled = b"".join(bytes(width) if null else b for b, null in zip(raw, null_pages))
        if pa.types.is_integer(natural) or pa.types.is_floating(natural):
            values = np.frombuffer(filled, unsigned if pa.types.is_unsigned_integer(natural) else signed).tolist()
        else:  # dates and timestamps: the stored integers are the Arrow values (of UTC instants)
            try:
                values = pa.Array.from_buffers(
                    instant_type(natural), len(raw), [None, pa.py_buffer(filled)]
                ).to_pylist()
            except (OverflowError, ValueError):  # beyond Python's datetimes
                return None
    elif physical == "BOOLEAN" and pa.types.is_boolean(natural):
        values = [bool(b[0]) if b else None for b in raw]
    elif physical == "BYTE_ARRAY" and (pa.types.is_string(natural) or pa.types.is_large_string(natural)):
        try:
            values = [b.decode() for b in raw]
        except UnicodeDecodeError:  # a truncated bound cut inside a character
            return None
    else:
        return None
    return [None if null else v for v, null in zip(values, null_pages)]


def _exact(t: pa.DataType, physical: str) -> bool:
    """Types whose stored integers or floats are their Arrow values, unit included
    (nanosecond timestamps become pandas objects, or lose digits, as Python values)."""
    if pa.types.is_timestamp(t):
        return t.unit != "ns" and physical == "INT64"
    if pa.types.is_date32(t):
        return physical == "INT32"
    return pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)

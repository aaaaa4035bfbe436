"""The pages of a Parquet column chunk, and a Parquet file made of a few of them.

pyarrow 26 decodes whole column chunks: its reader does not use the page index, and its
Python API exposes neither the index nor where it lies. A point read needs the values of a
few rows, which sit in one page (at most 20,000 rows: parquet-cpp's default) of each column.
So this module finds the pages of a chunk by walking their headers (each states its size and
value count, in every Parquet file ever written, with or without a page index; the page
index, where there is one, is read by ``page_index.py``), and wraps the pages a read needs,
after each chunk's dictionary page, into a valid Parquet file of one row group: pyarrow
decodes that like any other, several columns in one call when their pages hold the same
rows (docs/design/008-point-reads.md).

Everything here is pure bytes: the Thrift compact protocol (the encoding of Parquet's page
headers and footer), as much of it as these two structures need. A malformed header raises
``ValueError``; the caller then reads the chunk the ordinary way."""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)

Fields = dict[int, tuple[int, Any]]
"""A decoded Thrift struct: field id -> (compact type, value). A list is (element type, items)."""


def _varint(data: bytes | memoryview, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(data: bytes | memoryview, i: int, kind: int) -> tuple[Any, int]:
    if kind in (_TRUE, _FALSE):
        return kind == _TRUE, i
    if kind == _BYTE:
        return struct.unpack_from("<b", data, i)[0], i + 1
    if kind in (_I16, _I32, _I64):
        n, i = _varint(data, i)
        return _zigzag(n), i
    if kind == _DOUBLE:
        return struct.unpack_from("<d", data, i)[0], i + 8
    if kind == _BINARY:
        n, i = _varint(data, i)
        if i + n > len(data):
            raise IndexError("binary past the end")
        return bytes(data[i : i + n]), i + n
    if kind in (_LIST, _SET):
        head = data[i]
        i += 1
        count, item = head >> 4, head & 0x0F
        if count == 15:
            count, i = _varint(data, i)
        items = []
        if item in (_I16, _I32, _I64):  # (page indexes: lists of offsets and counts, inlined)
            for _ in range(count):
                n, i = _varint(data, i)
                items.append((n >> 1) ^ -(n & 1))
            return (item, items), i
        for _ in range(count):
            if item in (_TRUE, _FALSE):  # in a list, a bool is one byte
                items.append(data[i] == 1)
                i += 1
            else:
                value, i = _value(data, i, item)
                items.append(value)
        return (item, items), i
    if kind == _STRUCT:
        return decode_struct(data, i)
    raise ValueError(f"unsupported Thrift compact type {kind}")


def field_header(data: bytes | memoryview, head: int, i: int, last: int) -> tuple[int, int, int]:
    """A struct field's compact type and id from its header byte ``head`` (``data[i - 1]``),
    ``last`` being the previous field's id; and the offset of its value."""
    kind, delta = head & 0x0F, head >> 4
    if delta:
        return kind, last + delta, i
    n, i = _varint(data, i)  # a jump of more than 15: the id follows as a zigzag i16
    return kind, _zigzag(n), i


def decode_struct(data: bytes | memoryview, i: int = 0) -> tuple[Fields, int]:
    """The struct starting at ``data[i]``, and the offset just past it."""
    fields: Fields = {}
    last = 0
    while True:
        head = data[i]
        i += 1
        if head == _STOP:
            return fields, i
        kind, last, i = field_header(data, head, i, last)
        value, i = _value(data, i, kind)
        fields[last] = (kind, value)


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def encoded_int(n: int) -> bytes:
    """An i16/i32/i64 value as the compact protocol writes it (zigzag, then varint)."""
    out = bytearray()
    _put_varint(out, _zigzag_encode(n))
    return bytes(out)


def _put_value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (_I16, _I32, _I64):
        _put_varint(out, _zigzag_encode(value))
    elif kind == _BYTE:
        out += struct.pack("<b", value)
    elif kind == _DOUBLE:
        out += struct.pack("<d", value)
    elif kind == _BINARY:
        _put_varint(out, len(value))
        out += value
    elif kind in (_LIST, _SET):
        item, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | item)
        else:
            out.append(0xF0 | item)
            _put_varint(out, len(items))
        for element in items:
            if item in (_TRUE, _FALSE):
                out.append(1 if element else 2)
            else:
                _put_value(out, item, element)
    elif kind == _STRUCT:
        out += value if isinstance(value, bytes) else encode_struct(value)  # bytes: encoded already
    else:
        raise ValueError(f"unsupported Thrift compact type {kind}")


def encode_struct(fields: Fields) -> bytes:
    """The compact encoding of ``fields`` (ids ascending)."""
    return _encode_fields(fields, 0) + bytes([_STOP])


def _encode_fields(fields: Fields, last: int) -> bytes:
    """``fields`` without the closing stop byte, the field before them being ``last``."""
    out = bytearray()
    for fid in sorted(fields):
        kind, value = fields[fid]
        if kind in (_TRUE, _FALSE):
            kind = _TRUE if value else _FALSE
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | kind)
        else:
            out.append(kind)
            _put_value(out, _I16, fid)
        last = fid
        if kind not in (_TRUE, _FALSE):
            _put_value(out, kind, value)
    return bytes(out)


_DICTIONARY_PAGE, _DATA_PAGE, _DATA_PAGE_V2 = 2, 0, 3


@dataclass(frozen=True)
class Page:
    """One page of a column chunk: where its bytes are (header included), and for a data page
    the rows it holds (``first_row`` counted from the row group's start)."""

    offset: int
    size: int
    first_row: int
    rows: int
    dictionary: bool


def _skip(data: bytes | memoryview, i: int, kind: int) -> int:
    """The offset just past a value of ``kind`` at ``data[i]``, nothing built."""
    if kind in (_TRUE, _FALSE):
        return i
    if kind == _BYTE:
        return i + 1
    if kind in (_I16, _I32, _I64):
        while data[i] & 0x80:
            i += 1
        return i + 1
    if kind == _DOUBLE:
        return i + 8
    if kind == _BINARY:
        n, i = _varint(data, i)
        return i + n
    if kind in (_LIST, _SET):
        head = data[i]
        count, item = head >> 4, head & 0x0F
        i += 1
        if count == 15:
            count, i = _varint(data, i)
        for _ in range(count):
            i = i + 1 if item in (_TRUE, _FALSE) else _skip(data, i, item)
        return i
    if kind == _STRUCT:
        return scan_struct(data, i, {})
    raise ValueError(f"unsupported Thrift compact type {kind}")


def scan_struct(data: bytes | memoryview, i: int, wanted: dict[int, int], last: int = 0) -> int:
    """Walk the struct at ``data[i]``, filling ``wanted`` (field id -> 0) with the integer
    (and boolean: 1 or 0) fields it names; a struct field named is read as its first field (``num_values`` of a
    data page header, ``num_values`` of a v2 one's is field 3: see ``_count``). Returns the
    offset just past the struct. ``last``: the id of the field before ``data[i]``, to walk
    the rest of a struct from one of its fields on."""
    while True:
        head = data[i]
        i += 1
        if head == _STOP:
            if i > len(data):
                raise IndexError("a struct past the end")
            return i
        kind, last, i = field_header(data, head, i, last)
        if last in wanted and kind in (_I16, _I32, _I64):
            n, i = _varint(data, i)
            wanted[last] = _zigzag(n)
        elif last in wanted and kind in (_TRUE, _FALSE):
            wanted[last] = int(kind == _TRUE)
        elif last in wanted and kind == _STRUCT:
            inner = {_count(last): -1}
            i = scan_struct(data, i, inner)
            wanted[last] = inner[_count(last)]
        else:
            i = _skip(data, i, kind)


def _count(field: int) -> int:
    """The field holding a page's row count: DataPageHeader.num_values (1; a flat column has
    one value per row), DataPageHeaderV2.num_rows (3)."""
    return 3 if field == 8 else 1


HEADER_BYTES = 256
"""Bytes read for a page header; a longer one (page statistics of long strings) is read again
whole. Files with a page index carry no statistics in their page headers."""


def walk_pages(read: Callable[[int, int], bytes], start: int, end: int, rows: int, until: int) -> list[Page]:
    """The pages of a flat (unrepeated) column chunk stored at ``[start, end)`` of a file
    (``read(offset, n)``: its bytes), holding ``rows`` rows, up to the page holding row
    ``until``. Raises ``ValueError`` if the headers do not add up: a chunk read whole is then
    the safe answer."""
    pages: list[Page] = []
    offset, row = start, 0
    while offset < end and row <= until:
        header = read(offset, min(HEADER_BYTES, end - offset))
        found = {1: -1, 3: -1, 5: -1, 8: -1}
        try:
            body = scan_struct(header, 0, found)
        except IndexError:
            header = read(offset, end - offset)  # a long header: read the rest of the chunk once
            body = scan_struct(header, 0, found)
        kind, size = found[1], found[3]
        if size < 0 or offset + body + size > end:
            raise ValueError("a page header without a size, or past its column chunk")
        if kind == _DICTIONARY_PAGE and not pages:
            pages.append(Page(offset, body + size, 0, 0, True))
        elif kind in (_DATA_PAGE, _DATA_PAGE_V2):
            count = found[5 if kind == _DATA_PAGE else 8]
            if count < 0:
                raise ValueError("a data page without a row count")
            pages.append(Page(offset, body + size, row, count, False))
            row += count
        elif kind == _DICTIONARY_PAGE:
            raise ValueError("a dictionary page after data pages")
        offset += body + size  # (an index page is skipped: no reader uses them)
    if row > rows or (offset >= end and row != rows):
        raise ValueError(f"the pages hold {row} rows, the row group {rows}")
    return pages


@dataclass(frozen=True)
class Footer:
    """A footer with its row count and row group left out: the encoded fields before them
    (version, schema) and after them (key-value metadata with the Arrow schema, created_by,
    column orders), taken from a file pyarrow wrote with the same columns."""

    before: bytes
    after: bytes

    @classmethod
    def of(cls, footer: Fields) -> Footer:
        return cls(
            _encode_fields({k: v for k, v in footer.items() if k < 3}, 0),
            _encode_fields({k: v for k, v in footer.items() if k > 4}, 4) + bytes([_STOP]),
        )


@dataclass(frozen=True)
class ChunkBytes:
    """One column of a ``pages_file``: its ``ColumnMetaData`` fields to keep (type,
    encodings, path, codec), encoded (``column_meta``), its dictionary page (or empty), then
    its data pages, headers included, in order."""

    column: bytes
    dictionary: bytes
    pages: bytes


def pages_file(footer: Footer, chunks: Sequence[ChunkBytes], rows: int) -> bytes:
    """A Parquet file of one row group of ``rows`` rows: the ``chunks``, in the order of the
    footer's columns, whose pages must each hold exactly those rows."""
    entries, offset = [], 4
    for chunk in chunks:
        size = len(chunk.dictionary) + len(chunk.pages)
        meta: Fields = {5: (_I64, rows), 6: (_I64, size), 7: (_I64, size), 9: (_I64, offset + len(chunk.dictionary))}
        if chunk.dictionary:
            meta[11] = (_I64, offset)
        entries.append({2: (_I64, offset), 3: (_STRUCT, chunk.column + _encode_fields(meta, 4) + bytes([_STOP]))})
        offset += size
    group = {1: (_LIST, (_STRUCT, entries)), 2: (_I64, offset - 4), 3: (_I64, rows)}
    encoded = footer.before + _encode_fields({3: (_I64, rows), 4: (_LIST, (_STRUCT, [group]))}, 2) + footer.after
    body = [part for chunk in chunks for part in (chunk.dictionary, chunk.pages)]
    return b"".join([b"PAR1", *body, encoded, struct.pack("<I", len(encoded)), b"PAR1"])


ENCODINGS = {
    "PLAIN": 0,
    "PLAIN_DICTIONARY": 2,
    "RLE": 3,
    "BIT_PACKED": 4,
    "DELTA_BINARY_PACKED": 5,
    "DELTA_LENGTH_BYTE_ARRAY": 6,
    "DELTA_BYTE_ARRAY": 7,
    "RLE_DICTIONARY": 8,
    "BYTE_STREAM_SPLIT": 9,
}
CODECS = {"UNCOMPRESSED": 0, "SNAPPY": 1, "GZIP": 2, "LZO": 3, "BROTLI": 4, "LZ4": 5, "ZSTD": 6, "LZ4_RAW": 7}
PHYSICAL_TYPES = {
    "BOOLEAN": 0,
    "INT32": 1,
    "INT64": 2,
    "INT96": 3,
    "FLOAT": 4,
    "DOUBLE": 5,
    "BYTE_ARRAY": 6,
    "FIXED_LEN_BYTE_ARRAY": 7,
}
"""Parquet's enums by the names pyarrow reports them under."""


@functools.lru_cache(maxsize=1024)
def column_meta(physical_type: str, encodings: Sequence[str], name: str, compression: str) -> bytes:
    """The ``ColumnMetaData`` fields a ``pages_file`` keeps from the original chunk (1-4:
    type, encodings, path, codec), encoded, without the struct's end (kept: every chunk of a
    column in every row group asks the same)."""
    fields = {
        1: (_I32, PHYSICAL_TYPES[physical_type]),
        2: (_LIST, (_I32, [ENCODINGS[e] for e in encodings])),
        3: (_LIST, (_BINARY, [name.encode()])),
        4: (_I32, CODECS[compression]),
    }
    return _encode_fields(fields, 0)

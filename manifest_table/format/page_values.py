"""The values at a few rows of one Parquet data page, decoded here for the encodings where a
value can be found without decoding the ones before it.

pyarrow decodes a page whole: 20,000 values for the one a point read wants, and about 80 us
a column of fixed cost besides (a 500-byte page of dates takes 90 us; ten columns of one row
took 1.2 ms, most of a warm point read, docs/design/008-point-reads.md). Where the value's
place follows from its row, this module reads it directly from the decompressed page:
- ``PLAIN`` values of fixed width (integers, floats, booleans), and ``RLE`` booleans;
- dictionary indexes (``RLE_DICTIONARY``/``PLAIN_DICTIONARY``: runs walked, not expanded),
  into a dictionary page of fixed-width values, or of strings up to ``DICTIONARY_ENTRIES``;
- definition levels of a flat column (at most 1), counted run by run to find where a row's
  value is among the non-null ones;
in data pages of version 1 and 2 and every codec pyarrow reads. Anything else (delta
encodings, plain strings, nested columns, types whose Arrow form needs a cast) answers
None, and the caller decodes the page with pyarrow. A page that does not add up raises
``ValueError``: the caller then reads the chunk the ordinary way."""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .parquet_pages import (
    _DATA_PAGE,
    _DATA_PAGE_V2,
    _DICTIONARY_PAGE,
    _I16,
    _I32,
    _I64,
    _STRUCT,
    _skip,
    _varint,
    _zigzag,
    field_header,
    scan_struct,
)

DICTIONARY_ENTRIES = 4096
"""A dictionary page of strings with more entries than this is left to pyarrow: its entries
are found one length prefix after another."""

_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8
_WIDTHS = {"INT32": "<i4", "INT64": "<i8", "FLOAT": "<f4", "DOUBLE": "<f8"}
_TYPES = {
    "INT32": (pa.int32(), pa.date32()),
    "INT64": (pa.int64(),),
    "FLOAT": (pa.float32(),),
    "DOUBLE": (pa.float64(),),
    "BOOLEAN": (pa.bool_(),),
    "BYTE_ARRAY": (pa.string(), pa.binary()),
}
"""The Arrow types built here from each physical type, without a cast (timestamps too: see
``supports``)."""


@dataclass(frozen=True)
class Chunk:
    """What decoding a page of a column chunk needs: its physical type, codec (pyarrow's
    name), whether it is nullable (definition levels of width 1) and its Arrow type."""

    physical: str
    codec: str
    nullable: bool
    arrow_type: pa.DataType


def supports(physical: str, codec: str, arrow_type: pa.DataType) -> bool:
    """Whether values of ``physical`` type compressed with ``codec`` and read as
    ``arrow_type`` (the file's Arrow type, which must also be what the Parquet column maps
    to) can be decoded here."""
    if codec not in CODECS:
        return False
    if physical == "INT64" and pa.types.is_timestamp(arrow_type):
        return True
    return arrow_type in _TYPES.get(physical, ())


def may_decode(physical: str, encodings: Sequence[str], dictionary: bool) -> bool:
    """Whether a chunk whose footer lists ``encodings`` (and a dictionary page or not) may
    have pages decoded here: not when it uses an encoding this module leaves to pyarrow, nor
    for strings without a dictionary (each page says its own encoding: a page that falls
    back from the dictionary to plain strings still answers None)."""
    if not set(encodings) <= _CHUNK_ENCODINGS:
        return False
    return physical != "BYTE_ARRAY" or dictionary


_CHUNK_ENCODINGS = frozenset({"PLAIN", "RLE", "RLE_DICTIONARY", "PLAIN_DICTIONARY", "BIT_PACKED"})


Entries = list[bytes] | np.ndarray
"""A dictionary page's values: fixed-width ones as an array, strings as their bytes."""


def values_at(chunk: Chunk, dictionary: Entries | None, page: bytes, rows: list[int]) -> pa.Array | None:
    """The values at ``rows`` (ascending, counted from the page's first row) of the data
    ``page`` (header included), as an Arrow array of ``chunk.arrow_type``; ``dictionary``:
    the chunk's dictionary entries (``dictionary_entries``; None if it has none, or they
    are not decoded here). None where this module does not decode the page's encoding."""
    try:
        return _values_at(chunk, dictionary, page, rows)
    except _TooManyRuns:
        return None
    except (IndexError, struct.error) as exc:
        raise ValueError(f"a page that does not add up: {exc}") from exc


def _values_at(chunk: Chunk, dictionary: Entries | None, page: bytes, rows: list[int]) -> pa.Array | None:
    kind, size, compressed, start, fields = _header(page)
    body = page[start : start + compressed]
    if len(body) != compressed:
        raise ValueError(f"a page of {compressed} bytes cut to {len(body)}")
    if kind == _DATA_PAGE:
        count, encoding = fields[1], fields[2]
        if not _decoded(chunk, encoding, dictionary) or (chunk.nullable and fields[3] != _RLE):
            return None  # (definition levels: the deprecated BIT_PACKED)
        data = _decompress(chunk.codec, body, size)
        if chunk.nullable:
            length = struct.unpack_from("<I", data, 0)[0]
            levels, values = data[4 : 4 + length], data[4 + length :]
        else:
            levels, values = b"", data
    elif kind == _DATA_PAGE_V2:
        count, encoding, defined, repeated = fields[3], fields[4], fields[5], fields[6]
        if not _decoded(chunk, encoding, dictionary) or repeated or defined < 0:
            return None
        levels, values = body[:defined], body[defined:]
        if fields[7] != 0:  # (is_compressed: true unless stated)
            values = _decompress(chunk.codec, values, size - defined)
    else:
        raise ValueError(f"page type {kind} where a data page should be")
    if rows and rows[-1] >= count:
        raise ValueError(f"row {rows[-1]} of a page of {count}")
    valid, places = _places(levels, count, rows) if chunk.nullable else ([True] * len(rows), rows)
    found: Entries
    if encoding == _PLAIN:
        found = _plain(chunk, values, places)
    elif encoding == _RLE:  # booleans (in data pages of version 2)
        found = np.array(_hybrid_at(values, 4, 1, places), dtype=bool)
    else:
        assert dictionary is not None
        found = _from_dictionary(dictionary, values, places)
    return _array(chunk.arrow_type, found, valid)


def _header(page: bytes) -> tuple[int, int, int, int, dict[int, int]]:
    """A page header's type, uncompressed and compressed sizes, its length, and the integer
    fields of its data or dictionary page header (v1 or v2 data; -1 where absent);
    statistics are skipped."""
    top = {1: -1, 2: -1, 3: -1}
    inner = {1: -1, 2: -1, 3: -1, 4: -1, 5: -1, 6: -1, 7: -1}
    i = last = 0
    while (head := page[i]) != 0:
        kind, last, i = field_header(page, head, i + 1, last)
        if last in (5, 7, 8) and kind == _STRUCT:
            i = scan_struct(page, i, inner)
        elif last in top and kind in (_I16, _I32, _I64):
            n, i = _varint(page, i)
            top[last] = _zigzag(n)
        else:
            i = _skip(page, i, kind)
    return top[1], top[2], top[3], i + 1, inner


def _decoded(chunk: Chunk, encoding: int, dictionary: Entries | None) -> bool:
    """Whether values of ``encoding`` in ``chunk`` are decoded here."""
    if encoding == _PLAIN:
        return chunk.physical in _WIDTHS or chunk.physical == "BOOLEAN"
    if encoding == _RLE:
        return chunk.physical == "BOOLEAN"
    return encoding in (_PLAIN_DICTIONARY, _RLE_DICTIONARY) and dictionary is not None


def _decompress(codec: str, data: bytes, size: int) -> bytes:
    if codec == "UNCOMPRESSED":
        return data
    return _codec(codec).decompress(data, decompressed_size=size, asbytes=True)


@functools.cache
def _codec(name: str) -> pa.Codec:
    return pa.Codec(name.lower())


CODECS = frozenset({"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "BROTLI", "LZ4_RAW"})
"""The codecs (pyarrow's names) of the chunks decoded here. pyarrow names both of Parquet's
LZ4 codecs ``LZ4``, one of them framed the Hadoop way: those pages are left to pyarrow."""


def _places(levels: bytes, count: int, rows: list[int]) -> tuple[list[bool], list[int]]:
    """For each of ``rows``: whether its value is present; and for those present, their
    indexes among the page's present values (definition levels of width 1, RLE/bit-packed
    hybrid)."""
    valid: list[bool] = []
    places: list[int] = []
    want = iter(rows)
    row = next(want, None)
    if row is None:
        return valid, places
    seen = present = 0  # levels walked, and the 1s among them
    i = 0
    for _ in range(MAX_RUNS):
        if seen >= count:
            raise ValueError("the definition levels end before the page's values")
        header, i = _varint(levels, i)
        if header & 1:  # bit-packed: (header >> 1) groups of 8 levels, one bit each
            n = (header >> 1) * 8
            if i + n // 8 > len(levels):
                raise ValueError("a bit-packed run of levels past their end")
            bits = int.from_bytes(levels[i : i + n // 8], "little")
            i += n // 8
            while row is not None and row < seen + n:
                below = bits & ((1 << (row - seen)) - 1)
                valid.append(bool(bits >> (row - seen) & 1))
                if valid[-1]:
                    places.append(present + below.bit_count())
                row = next(want, None)
            present += bits.bit_count()
        else:  # a run of (header >> 1) equal levels, stored in one byte
            n = header >> 1
            if i >= len(levels):
                raise ValueError("a run of levels past their end")
            level = levels[i]
            i += 1
            if level not in (0, 1):
                raise ValueError(f"definition level {level} of a flat column")
            while row is not None and row < seen + n:
                valid.append(level == 1)
                if level:
                    places.append(present + row - seen)
                row = next(want, None)
            present += n * level
        seen += n
        if row is None:
            return valid, places
    raise _TooManyRuns


MAX_RUNS = 128
"""Runs of levels or dictionary indexes walked in one page before it is left to pyarrow, for
which one more column of a page costs about 0.1 ms: a run takes 0.3 us here, and a column in
sorted order has a run every few rows (300 to a row in mid-page), one with 10% of its values
null scattered about 2,000 in a page of 20,000 (560 us to walk); one without nulls has one."""


class _TooManyRuns(Exception):
    """A walk past ``MAX_RUNS``: the page is left to pyarrow."""


def _plain(chunk: Chunk, values: bytes, places: list[int]) -> np.ndarray:
    if chunk.physical == "BOOLEAN":
        if places and places[-1] >= len(values) * 8:
            raise ValueError("a boolean past the page's end")
        return np.array([values[p >> 3] >> (p & 7) & 1 for p in places], dtype=bool)
    return _fixed(values, _WIDTHS[chunk.physical], places)


def _fixed(values: bytes, width: str, places: list[int]) -> np.ndarray:
    array = np.frombuffer(values, dtype=width, count=len(values) // np.dtype(width).itemsize)
    if places and places[-1] >= len(array):
        raise ValueError("a value past the page's end")
    return array[places]


def _from_dictionary(entries: Entries, values: bytes, places: list[int]) -> list[Any] | np.ndarray:
    if not places:
        return entries[:0]
    width = values[0]
    if width > 32:
        raise ValueError(f"dictionary indexes of {width} bits")
    indexes = _hybrid_at(values, 1, width, places)
    if indexes and max(indexes) >= len(entries):
        raise ValueError("a dictionary index past the dictionary's end")
    if isinstance(entries, np.ndarray):
        return entries[indexes]
    return [entries[k] for k in indexes]


def _hybrid_at(data: bytes, i: int, width: int, places: list[int]) -> list[int]:
    """The values at ``places`` (ascending) of the RLE/bit-packed hybrid run at ``data[i:]``
    of ``width``-bit values, walking the runs up to the last place."""
    found: list[int] = []
    want = iter(places)
    place = next(want, None)
    if place is None:
        return found
    seen = 0
    stored = (width + 7) // 8
    mask = (1 << width) - 1
    for _ in range(MAX_RUNS):
        if i >= len(data):
            raise ValueError("the dictionary indexes end before the page's values")
        header, i = _varint(data, i)
        if header & 1:
            n = (header >> 1) * 8
            run = data[i : i + n * width // 8]
            if len(run) < n * width // 8:
                raise ValueError("a bit-packed run past the page's end")
            i += n * width // 8
            while place is not None and place < seen + n:
                bit = (place - seen) * width
                found.append(int.from_bytes(run[bit >> 3 : (bit + width + 7) >> 3], "little") >> (bit & 7) & mask)
                place = next(want, None)
        else:
            n = header >> 1
            if i + stored > len(data):
                raise ValueError("a run's value past the page's end")
            value = int.from_bytes(data[i : i + stored], "little")
            i += stored
            while place is not None and place < seen + n:
                found.append(value)
                place = next(want, None)
        seen += n
        if place is None:
            return found
    raise _TooManyRuns


def dictionary_entries(chunk: Chunk, page: bytes) -> Entries | None:
    """The values of a dictionary page (header included); None for strings of more than
    ``DICTIONARY_ENTRIES`` entries, or a type not decoded here."""
    kind, size, compressed, start, fields = _header(page)
    if kind != _DICTIONARY_PAGE or fields[1] < 0:
        raise ValueError("a dictionary page expected")
    count = fields[1]
    if chunk.physical not in _WIDTHS and (chunk.physical != "BYTE_ARRAY" or count > DICTIONARY_ENTRIES):
        return None
    data = _decompress(chunk.codec, page[start : start + compressed], size)
    if chunk.physical in _WIDTHS:
        return np.frombuffer(data, dtype=_WIDTHS[chunk.physical], count=count)
    out, i = [], 0
    for _ in range(count):
        n = struct.unpack_from("<I", data, i)[0]
        out.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    if i > len(data):
        raise ValueError("dictionary entries past the page's end")
    return out


def _array(arrow_type: pa.DataType, values: list[Any] | np.ndarray, valid: list[bool]) -> pa.Array:
    mask = None if all(valid) else ~np.array(valid, dtype=bool)
    if isinstance(values, np.ndarray) and values.dtype.kind != "b":
        if mask is not None:
            filled = np.zeros(len(valid), dtype=values.dtype)
            filled[~mask] = values
            values = filled
        return _fixed_width_array(arrow_type, values, mask)
    items = values.tolist() if isinstance(values, np.ndarray) else values
    if mask is not None:
        it = iter(items)
        items = [next(it) if v else None for v in valid]
    return pa.array(items, type=arrow_type)


def _fixed_width_array(arrow_type: pa.DataType, values: np.ndarray, mask: np.ndarray | None) -> pa.Array:
    """An Arrow array over the buffer of ``values`` (little-endian, of ``arrow_type``'s width:
    what ``_fixed`` and a dictionary of fixed-width entries give): ``pa.array`` of an ndarray
    costs 20 us a call in its pandas checks, 2 us this way, and a point read makes six."""
    if values.dtype.itemsize * 8 != arrow_type.bit_width:
        raise ValueError(f"values of {values.dtype} read as {arrow_type}")
    native = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    validity = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(arrow_type, len(native), [validity, pa.py_buffer(native)])

"""Parquet's split-block bloom filters, probed without pyarrow (which writes them but reads
none, pyarrow 26): whether a column chunk may hold a value.

The format (parquet-format's BloomFilter.md): a ``BloomFilterHeader`` (Thrift compact), then
the bitset, ``numBytes`` bytes of 32-byte blocks. A value is hashed with XXH64 (seed 0) of
its plain encoding; the hash's upper 32 bits choose the block, its lower 32 bits, times eight
salts, one bit in each of the block's eight 32-bit words. A value is absent when one of those
bits is clear; a set of bits says only "maybe" (a false positive at the rate the writer chose).

Only values whose plain encoding is certain are probed: signed integers and dates (stored as
INT32/INT64), strings and binary (BYTE_ARRAY). Floats are not (0.0 and -0.0 are equal but
hash apart), nor timestamps and decimals (their stored units and widths vary by writer):
for those, and for any header this module does not recognise, the answer is "maybe"."""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .parquet_pages import decode_struct

_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (
    0x9E3779B185EBCA87,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5,
)
_SALTS = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)
BLOCK_BYTES = 32
HEADER_BYTES = 64
"""Enough to hold any header a writer emits (pyarrow's takes 15-17 bytes)."""
_EPOCH = datetime.date(1970, 1, 1)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the reference algorithm; the values probed are a few bytes long)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while i + 32 <= n:
            v = [_round(acc, lane) for acc, lane in zip(v, struct.unpack_from("<4Q", data, i), strict=True)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for acc in v:
            h = ((h ^ _round(0, acc)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (struct.unpack_from("<I", data, i)[0] * _P1 & _M64), 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _M64), 11) * _P1) & _M64
        i += 1
    h = ((h ^ (h >> 33)) * _P2) & _M64
    h = ((h ^ (h >> 29)) * _P3) & _M64
    return h ^ (h >> 32)


def probed_type(dtype: pa.DataType) -> bool:
    """Whether a column of Arrow type ``dtype`` has filters this module probes (the writer
    keeps them only for those)."""
    return (
        pa.types.is_signed_integer(dtype)
        or pa.types.is_date32(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
    )


def plain_bytes(value: Any, physical_type: str, stored: pa.DataType) -> bytes | None:
    """``value``'s plain encoding in a column of ``physical_type`` whose values are of Arrow
    type ``stored`` (as the file stores them), or None when it cannot be known for sure."""
    if isinstance(value, bool):
        return None
    if physical_type in ("INT32", "INT64") and isinstance(value, int):
        signed = pa.types.is_signed_integer(stored)
        return _packed(value, physical_type) if signed else None
    if physical_type == "INT32" and pa.types.is_date32(stored) and type(value) is datetime.date:
        return _packed((value - _EPOCH).days, physical_type)
    if physical_type == "BYTE_ARRAY":
        if isinstance(value, str) and (pa.types.is_string(stored) or pa.types.is_large_string(stored)):
            return value.encode("utf-8", "surrogatepass")
        if isinstance(value, bytes) and (pa.types.is_binary(stored) or pa.types.is_large_binary(stored)):
            return value
    return None


def _packed(value: int, physical_type: str) -> bytes | None:
    fmt, bits = ("<i", 32) if physical_type == "INT32" else ("<q", 64)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        return None  # (no stored value equals it: the caller's range checks say so)
    return struct.pack(fmt, value)


@dataclass(frozen=True)
class SplitBlockFilter:
    """Where a chunk's bitset lies in its file."""

    offset: int
    size: int

    @classmethod
    def of(cls, head: bytes, offset: int, length: int | None, file_size: int) -> SplitBlockFilter | None:
        """The filter whose header is at the start of ``head`` (read at ``offset``; ``length``:
        header and bitset together, if the footer says), or None if it is not one this module
        can probe: another algorithm, hash or compression, or sizes that do not fit."""
        try:
            fields, end = decode_struct(head)
            size = fields[1][1]
            known = all(_only_first(fields[i][1]) for i in (2, 3, 4))
        except (IndexError, KeyError, TypeError, ValueError):
            return None
        fits = length is None or end + size <= length
        if not (known and isinstance(size, int) and size > 0 and size % BLOCK_BYTES == 0 and fits):
            return None
        if offset + end + size > file_size:
            return None
        return cls(offset + end, size)

    def block_at(self, hashed: int) -> int:
        """The file offset of the block ``hashed`` falls in."""
        blocks = self.size // BLOCK_BYTES
        return self.offset + ((hashed >> 32) * blocks >> 32) * BLOCK_BYTES


def _only_first(union: Any) -> bool:
    """A Thrift union holding its first member (SPLIT_BLOCK, XXHASH, UNCOMPRESSED)."""
    return isinstance(union, dict) and list(union) == [1]


def block_may_contain(block: bytes, hashed: int) -> bool:
    """Whether the 32-byte ``block`` a value's hash chose has all eight of its bits set."""
    key = hashed & 0xFFFFFFFF
    words = struct.unpack("<8I", block)
    return all(word >> (((key * salt) & 0xFFFFFFFF) >> 27) & 1 for word, salt in zip(words, _SALTS, strict=True))

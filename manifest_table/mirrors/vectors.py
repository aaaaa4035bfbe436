"""Our deletion bitmaps in the framing both mirrors read (docs/mirrors.md, "Deletion vectors").

Iceberg v3's ``deletion-vector-v1`` blob and Delta's on-disk deletion vector are the same
bytes: a 4-byte big-endian length, the magic ``D1 D3 39 64`` (Delta's 1681511377 little
endian), a 64-bit portable roaring bitmap (bucket count, then each bucket's 32-bit key and
portable 32-bit bitmap) and a big-endian CRC-32 of the magic and bitmap. Our bitmaps hold
positions below 2^32, so each is one bucket with key 0 around our own serialisation.

Each tombstone object gets one mirror file per format, holding a blob for every bitmap of the
tombstone in the same order (puffin.py, delta_dv.py). A blob's offset there then follows from
the bitmap's offset and rank in the tombstone: ``header + (offset - 8) + 24 * rank``. The
rank comes from the tombstone's layout, read once per object and cached."""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict

from pyroaring import BitMap

from ..data.tombstones import MAGIC
from ..errors import CorruptTableError
from ..format.manifest import DeletionVector
from ..storage import ObjectStore

BLOB_MAGIC = bytes.fromhex("d1d33964")
FRAMING = 24
"""Bytes a blob adds around our serialisation: length, magic, bucket count, key, CRC."""
_CACHED = 256
"""Tombstone objects kept by one sync (layouts, a few ints each, are all kept)."""


def blob(bitmap: bytes) -> bytes:
    """The framed deletion vector of one of our serialised 32-bit bitmaps."""
    vector = BLOB_MAGIC + struct.pack("<QI", 1, 0) + bitmap
    return struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))


def layout(tombstone: bytes, key: str) -> list[tuple[int, int]]:
    """(offset, length) of each bitmap of a tombstone object, in order."""
    if not tombstone.startswith(MAGIC):
        raise CorruptTableError(f"{key} is not a tombstone object (no {MAGIC!r} header)")
    out, offset, view = [], len(MAGIC), memoryview(tombstone)
    while offset < len(tombstone):
        try:
            # The portable format is self-delimiting; a deserialised bitmap keeps its
            # containers, so it serialises back to the same length (pyiceberg relies on it too).
            length = len(BitMap.deserialize(view[offset:]).serialize())  # type: ignore[arg-type]  # (a buffer)
        except (ValueError, IndexError) as exc:
            raise CorruptTableError(f"{key}: the bitmap at offset {offset} does not deserialise ({exc})") from None
        out.append((offset, length))
        offset += length
    return out


class Tombstones:
    """Tombstone objects and their layouts, each fetched once (they are write-once)."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._objects: OrderedDict[str, bytes] = OrderedDict()
        self._layouts: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()

    def object(self, key: str) -> bytes:
        with self._lock:
            found = self._objects.get(key)
        if found is None:
            found = self._store.get(key)
            with self._lock:
                self._objects[key] = found
                while len(self._objects) > _CACHED:
                    self._objects.popitem(last=False)
        return found

    def bitmaps(self, key: str) -> list[tuple[int, int]]:
        return layout(self.object(key), key)

    def blob_offset(self, ref: DeletionVector, header: int) -> int:
        """Where the blob of ``ref``'s bitmap starts in a mirror file of its tombstone whose
        blobs start after ``header`` bytes."""
        with self._lock:
            ranks = self._layouts.get(ref.path)
        if ranks is None:
            ranks = {offset: i for i, (offset, _) in enumerate(self.bitmaps(ref.path))}
            with self._lock:
                self._layouts[ref.path] = ranks
        if ref.offset not in ranks:
            raise CorruptTableError(f"{ref.path}: no bitmap starts at offset {ref.offset}")
        return header + ref.offset - len(MAGIC) + FRAMING * ranks[ref.offset]

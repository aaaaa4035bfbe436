"""Tombstone objects: roaring bitmaps of deleted row positions, one per data file.

A tombstone object is ``MAGIC`` followed by the portable serialisations of one or more
bitmaps back to back; each data file's manifest entry points at its bitmap by
(object, offset, length, cardinality). Each data file has at most one live bitmap: a new
delete on a file writes the union with the old one, so a reader applies one bitmap per file.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping

from pyroaring import BitMap

from ..errors import CorruptTableError
from ..format.keys import TOMBSTONE_PREFIX
from ..format.manifest import DataFile, DeletionVector
from ..storage import ObjectStore

MAGIC = b"MTTOMB01"


def write_tombstone(store: ObjectStore, bitmaps: Mapping[str, BitMap]) -> dict[str, DeletionVector]:
    """Write one create-only object holding every bitmap; return each data file's reference."""
    key = f"{TOMBSTONE_PREFIX}{uuid.uuid4().hex}.roaring"
    chunks, refs, offset = [MAGIC], {}, len(MAGIC)
    for path, bitmap in bitmaps.items():
        blob = bitmap.serialize()
        chunks.append(blob)
        refs[path] = DeletionVector(key, offset, len(blob), len(bitmap))
        offset += len(blob)
    store.put_new(key, b"".join(chunks))
    return refs


class DeletionVectors:
    """Loads the bitmaps a snapshot refers to, fetching each tombstone object once."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load(self, ref: DeletionVector, rows: int | None = None) -> BitMap:
        """The bitmap ``ref`` points at, checked against the object holding it, against the
        manifest's cardinality and, given the data file's ``rows``, against its length."""
        with self._lock:
            blob = self._objects.get(ref.path)
        if blob is None:
            blob = self._store.get(ref.path)
            if not blob.startswith(MAGIC):
                raise CorruptTableError(f"{ref.path} is not a tombstone object (no {MAGIC!r} header)")
            with self._lock:
                self._objects[ref.path] = blob
        where = f"{ref.path} (offset {ref.offset}, length {ref.length})"
        if ref.offset < len(MAGIC) or ref.offset + ref.length > len(blob):
            raise CorruptTableError(
                f"{where}: the bitmap does not lie inside the object's "
                f"{len(blob)} bytes after its header: deletes.offset or deletes.length is wrong"
            )
        try:
            bitmap = BitMap.deserialize(blob[ref.offset : ref.offset + ref.length])
        except (ValueError, IndexError) as exc:
            raise CorruptTableError(f"{where}: the bitmap does not deserialise ({exc})") from None
        if len(bitmap) != ref.cardinality:
            raise CorruptTableError(
                f"{where}: the bitmap has {len(bitmap)} positions, the manifest's "
                f"deletes.cardinality says {ref.cardinality}"
            )
        if rows is not None and bitmap and bitmap.max() >= rows:
            raise CorruptTableError(
                f"{where}: the bitmap deletes position {bitmap.max()}, past the end of its data file of {rows} rows"
            )
        return bitmap

    def of(self, file: DataFile) -> BitMap:
        """The file's deleted positions (empty when it has none)."""
        return self.load(file.deletes, file.rows) if file.deletes else BitMap()

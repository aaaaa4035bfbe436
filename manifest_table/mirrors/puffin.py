"""Iceberg deletion vectors: one Puffin file per tombstone object (docs/mirrors.md).

``tombstones/<id>.roaring`` gets ``tombstones/<id>.puffin``: the magic ``PFA1``, a
``deletion-vector-v1`` blob for every bitmap of the tombstone in its order (vectors.py), and
the footer (JSON payload, its length, flags, magic). The name follows from the tombstone's,
so the file lives and dies with it (garbage collection keeps one while it keeps the other)
and two writers mirroring the same version create the same object. The footer names each
blob's data file (``referenced-data-file``, absolute), as pyiceberg reads it; a bitmap no
version still references (superseded before the mirror was enabled) names none of ours. A
table moved or copied elsewhere brings Puffin files naming its old location: the mirror
replaces each one it needs (``names``, iceberg_manifests.py)."""

from __future__ import annotations

import json
import struct

from pyroaring import BitMap

from .vectors import blob

MAGIC = b"PFA1"
HEADER = len(MAGIC)
ROW_POSITION_FIELD = 2147483645
"""The reserved field id of ``_pos``, which a deletion vector's blob covers."""


def puffin_key(tombstone: str) -> str:
    return tombstone.removesuffix(".roaring") + ".puffin"


def puffin_file(tombstone: bytes, bitmaps: list[tuple[int, int]], referenced: dict[int, str]) -> bytes:
    """The Puffin file of a tombstone object whose bitmaps lie at ``bitmaps`` (offset, length);
    ``referenced``: bitmap offset -> the data file location it deletes from."""
    chunks, blobs, position = [MAGIC], [], HEADER
    for offset, length in bitmaps:
        bitmap = tombstone[offset : offset + length]
        framed = blob(bitmap)
        blobs.append(
            {
                "type": "deletion-vector-v1",
                "fields": [ROW_POSITION_FIELD],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": position,
                "length": len(framed),
                "properties": {
                    "referenced-data-file": referenced.get(offset, f"unreferenced:{offset}"),
                    "cardinality": str(len(BitMap.deserialize(bitmap))),
                },
            }
        )
        chunks.append(framed)
        position += len(framed)
    payload = json.dumps(
        {"blobs": blobs, "properties": {"created-by": "manifest_table"}}, separators=(",", ":")
    ).encode()
    chunks += [MAGIC, payload, struct.pack("<i", len(payload)), bytes(4), MAGIC]
    return b"".join(chunks)


def names(data: bytes) -> set[str]:
    """The data files a Puffin file's footer names (``referenced-data-file`` of its blobs);
    none if it is unreadable (the mirror then replaces it: it is made from the tombstone)."""
    try:
        if data[:HEADER] != MAGIC or data[-HEADER:] != MAGIC:
            return set()
        (length,) = struct.unpack("<i", data[-12:-8])
        blobs = json.loads(data[-12 - length : -12])["blobs"] if 0 <= length <= len(data) - 16 else []
        return {str(b["properties"]["referenced-data-file"]) for b in blobs}
    except (ValueError, TypeError, KeyError, struct.error):
        return set()

"""Delta deletion vectors: one DV file per tombstone object, and the descriptors that point
into it (docs/mirrors.md).

``tombstones/<id>.roaring`` gets ``tombstones/deletion_vector_<id as a UUID>.bin``: the version
byte 1, then a framed vector for every bitmap of the tombstone in its order (vectors.py). A
descriptor of storage type ``u`` names it by the random-prefix-plus-Z85-UUID rule of the
Delta protocol, with the prefix ``tombstones``: the file lives and dies with its tombstone,
and two writers mirroring the same version create the same object."""

from __future__ import annotations

import uuid
from typing import Any

from ..format.manifest import DeletionVector
from .vectors import FRAMING, Tombstones, blob

HEADER = 1
PREFIX = "tombstones"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _tombstone_uuid(tombstone: str) -> uuid.UUID:
    return uuid.UUID(hex=tombstone[len(PREFIX) + 1 :].removesuffix(".roaring"))


def dv_key(tombstone: str) -> str:
    return f"{PREFIX}/deletion_vector_{_tombstone_uuid(tombstone)}.bin"


def dv_file(tombstone: bytes, bitmaps: list[tuple[int, int]]) -> bytes:
    return b"\x01" + b"".join(blob(tombstone[offset : offset + length]) for offset, length in bitmaps)


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ's base 85), which Delta uses for the UUID of a DV file: 16 bytes -> 20 characters."""
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out.append("".join(_Z85[value // 85**k % 85] for k in range(4, -1, -1)))
    return "".join(out)


def descriptor(ref: DeletionVector, tombstones: Tombstones) -> dict[str, Any]:
    """The Delta ``deletionVector`` of a data file whose bitmap ``ref`` points at."""
    return {
        "storageType": "u",
        "pathOrInlineDv": PREFIX + z85(_tombstone_uuid(ref.path).bytes),
        "offset": tombstones.blob_offset(ref, HEADER),
        "sizeInBytes": ref.length + FRAMING - 8,
        "cardinality": ref.cardinality,
    }

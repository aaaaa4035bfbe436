"""``_latest_manifest``: the one mutable object, a hint naming the newest version.

It is advanced by compare-and-swap after a version's manifest is created, never moves
backwards, and may lag behind a commit whose writer died before moving it. Decoding it is
the only way to the etag a compare-and-swap needs, so a pointer this library cannot decode
(including one of a newer format) can never be overwritten by it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .json_fields import MAX_INT64, format_version, integer, load_object

POINTER_KEY = "_latest_manifest"
POINTER_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Pointer:
    version: int
    """The newest version: the one the stored object names, or a later one found past it."""
    etag: str
    """The stored object's etag, for a compare-and-swap."""
    lag: int = 0
    """How many versions the stored object is behind ``version`` (found by probing, on stores
    whose pointer may lag: ``ObjectStore.pointer_may_lag``)."""

    @property
    def stored_version(self) -> int:
        return self.version - self.lag


def encode_pointer(version: int) -> bytes:
    return json.dumps({"format_version": POINTER_FORMAT_VERSION, "version": version}).encode()


def decode_pointer(data: bytes, etag: str) -> Pointer:
    doc = load_object(data, POINTER_KEY)
    format_version(doc, POINTER_KEY, POINTER_FORMAT_VERSION, " and will not overwrite it")
    return Pointer(integer(doc, "version", POINTER_KEY, 0, MAX_INT64), etag)

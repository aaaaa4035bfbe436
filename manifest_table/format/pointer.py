"""``_latest_manifest``: the one mutable object, a hint naming the newest version.

It is advanced by compare-and-swap after a version's manifest is created, never moves
backwards, and may lag behind a commit whose writer died before moving it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import CorruptTableError

POINTER_KEY = "_latest_manifest"


@dataclass(frozen=True)
class Pointer:
    version: int
    etag: str


def encode_pointer(version: int) -> bytes:
    return json.dumps({"format_version": 1, "version": version}).encode()


def decode_pointer(data: bytes, etag: str) -> Pointer:
    try:
        return Pointer(int(json.loads(data)["version"]), etag)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptTableError(f"{POINTER_KEY} does not parse: {exc!r}") from exc

"""An in-process store: fast unit tests, and the reference semantics of the interface."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from ..errors import NotFound, PreconditionFailed
from .base import ObjectInfo, ObjectStore


class MemoryStore(ObjectStore):
    def __init__(self) -> None:
        self._objects: dict[str, tuple[bytes, ObjectInfo]] = {}
        self._lock = threading.Lock()
        self._writes = itertools.count()

    def _info(self, key: str, data: bytes) -> ObjectInfo:
        # A write counter makes every etag unique, so a CAS can never be fooled by a
        # rewrite of equal bytes (the ABA problem).
        import hashlib  # (OpenSSL's: not for a process that never writes to memory)

        etag = f"{hashlib.md5(data).hexdigest()}-{next(self._writes)}"
        return ObjectInfo(key, len(data), etag, datetime.now(UTC))

    def get(self, key: str) -> bytes:
        with self._lock:
            if key not in self._objects:
                raise NotFound(key)
            return self._objects[key][0]

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        with self._lock:
            if key not in self._objects:
                raise NotFound(key)
            data, info = self._objects[key]
            return data, info.etag

    def head(self, key: str) -> ObjectInfo | None:
        with self._lock:
            entry = self._objects.get(key)
            return entry[1] if entry else None

    def put_if_absent(self, key: str, data: bytes) -> str:
        data = bytes(data)
        with self._lock:
            if key in self._objects:
                raise PreconditionFailed(key)
            info = self._info(key, data)
            self._objects[key] = (data, info)
            return info.etag

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        data = bytes(data)
        with self._lock:
            if key not in self._objects:
                raise NotFound(key)
            if self._objects[key][1].etag != etag:
                raise PreconditionFailed(key)
            info = self._info(key, data)
            self._objects[key] = (data, info)
            return info.etag

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        with self._lock:
            infos = [info for key, (_, info) in self._objects.items() if key.startswith(prefix)]
        return iter(sorted(infos, key=lambda info: info.key))

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)

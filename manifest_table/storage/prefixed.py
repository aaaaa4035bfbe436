"""One store seen from a folder under its root: a database's table keeps its objects under
``tables/<id>/`` of the database's store, with the same relative keys (``data/...``,
``segments/...``) as a standalone table, so every table operation works on it unchanged."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..lazy import lazy
from .base import ObjectInfo, ObjectStore

if TYPE_CHECKING:
    import pyarrow.fs as pafs
else:
    pafs = lazy("pyarrow.fs")


class PrefixedStore(ObjectStore):
    """``inner`` with every key under ``prefix`` (which ends with ``/``)."""

    def __init__(self, inner: ObjectStore, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def get(self, key: str) -> bytes:
        return self.inner.get(self.prefix + key)

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        return self.inner.get_with_etag(self.prefix + key)

    def head(self, key: str) -> ObjectInfo | None:
        info = self.inner.head(self.prefix + key)
        return None if info is None else dataclasses.replace(info, key=key)

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self.inner.put_if_absent(self.prefix + key, data)

    def put_new(self, key: str, data: bytes) -> str:
        return self.inner.put_new(self.prefix + key, data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self.inner.put_if_match(self.prefix + key, data, etag)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        cut = len(self.prefix)
        for info in self.inner.list(self.prefix + prefix):
            yield dataclasses.replace(info, key=info.key[cut:])

    def delete(self, key: str) -> None:
        self.inner.delete(self.prefix + key)

    @property
    def pointer_may_lag(self) -> bool:
        return self.inner.pointer_may_lag

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str] | None:
        plane = self.inner.arrow_filesystem()
        if plane is None:
            return None
        fs, root = plane
        return fs, f"{root.rstrip('/')}/{self.prefix.rstrip('/')}" if root else self.prefix.rstrip("/")

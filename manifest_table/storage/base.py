"""The control-plane interface every store implements, and what it returns.

A store addresses one table root; keys are relative to it (``_latest_manifest``,
``manifest/v...json``, ``data/<uuid>.parquet``). Only two write primitives exist:
create-only and compare-and-swap. Everything the commit protocol needs follows from them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound, StoreError
from ..lazy import lazy

if TYPE_CHECKING:
    import pyarrow.fs as pafs
else:
    pafs = lazy("pyarrow.fs")


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified: datetime  # timezone-aware, UTC


class ObjectStore(ABC):
    """Object storage rooted at one table location."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Whole object; raises ``NotFound``."""

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        """Object and the etag of exactly those bytes, for a later ``put_if_match``.

        This default costs two requests; stores that can do it in one override it. The
        head comes first: the pointer only moves forward, so the bytes read afterwards are at
        least as new as the etag, and a compare-and-swap on that etag can never move it back."""
        info = self.head(key)
        if info is None:
            raise NotFound(key)
        return self.get(key), info.etag

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """Metadata, or None when the key does not exist."""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> str:
        """Create ``key``; raises ``PreconditionFailed`` if it exists. Returns the etag."""

    def put_new(self, key: str, data: bytes) -> str:
        """``put_if_absent`` of an object under a fresh name that nothing names yet (a
        tombstone, a segment, a database's table root): something naming it is written only
        after this returns, so a store may make its bytes and its name durable together
        (``LocalStore``: one concurrent round of syncs, docs/protocol.md). Wrappers forward it;
        this default is ``put_if_absent``."""
        return self.put_if_absent(key, data)

    @abstractmethod
    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        """Replace ``key`` only if its etag is ``etag``; raises ``PreconditionFailed`` otherwise.
        A missing key raises ``NotFound`` where the service tells it apart (local, memory, S3);
        GCS, Azure and SeaweedFS answer it as a failed condition, and callers treat both the
        same: re-read. Returns the new etag."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    @property
    def pointer_may_lag(self) -> bool:
        """True where the pointer may name an older version than the newest committed, so
        readers probe past it (docs/protocol.md, "The pointer under rate limits"): where the
        store limits how often one object may be written (GCS: about once a second), a commit
        whose pointer move is refused with ``RateLimited`` is acknowledged all the same; on a
        local directory the pointer's rename is not synced. Wrappers forward it."""
        return False

    def delete_unreferenced(self, keys: Iterable[str]) -> None:
        """Best-effort removal of objects no manifest references (staged by a commit that
        did not land). Whatever fails to go is garbage that GC removes after its grace period."""
        for key in keys:
            try:
                self.delete(key)
            except StoreError:
                pass

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str] | None:
        """A pyarrow filesystem and the root path inside it, for range reads and streaming
        writes of Parquet data files. None means data goes through ``get``/``put_if_absent``.
        Readers ask at each use: build it once and return the same one while it is valid."""
        return None

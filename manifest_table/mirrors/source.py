"""What a mirror writer reads and writes through: the table's store (creates of mirror
objects retried, since each is either uniquely named or the same bytes whoever writes it), its
version log, its location as an absolute URI, and the tombstone objects it converts; and the
deadline its commit points keep (``commit_point``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..clock import Stamp
from ..deadline import Deadline
from ..errors import NotFound, PreconditionFailed, StoreError
from ..format.keys import DELTA_LOG_PREFIX, METADATA_PREFIX, TOMBSTONE_PREFIX
from ..log.version_log import VersionLog
from ..process_pools import ProcessLock, ProcessPool
from ..storage import ObjectStore
from ..storage.prefixed import PrefixedStore
from ..storage.retry import RetryingStore
from .vectors import Tombstones


def strict_json(value: Any) -> str:
    """Compact JSON that every reader parses: ``Infinity`` and ``NaN`` are refused, never
    written (Python's ``json`` writes them by default; deltalake and Polars then fail)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def location_of(store: ObjectStore, uri: str) -> str:
    """The table's absolute location, as the other formats name files: ``file:///abs/dir``
    for a local directory, ``<scheme>://bucket/prefix`` for an object store (``s3``, ``gs``,
    ``az``), else the URI given; a database's table is its folder of the database's store."""
    inner, folder = store, ""
    while hasattr(inner, "inner"):
        if isinstance(inner, PrefixedStore):  # a database's table: its folder of the store
            folder = inner.prefix + folder
        inner = inner.inner
    root = getattr(inner, "root", None)
    if isinstance(root, str) and os.path.isabs(root):
        return "file://" + f"{root.rstrip('/')}/{folder}".rstrip("/")
    bucket = getattr(inner, "bucket", None)
    if isinstance(bucket, str):
        prefix = getattr(inner, "prefix", "")
        return f"{getattr(inner, 'scheme', 's3')}://{bucket}/{prefix}{folder}".rstrip("/")
    return uri.rstrip("/")


@dataclass
class Source:
    log: VersionLog
    location: str
    store: ObjectStore = field(init=False)
    tombstones: Tombstones = field(init=False)
    started: Stamp = field(init=False, default_factory=Stamp.now)
    """Before this writer created any object: its commit points' deadline counts from it."""

    def __post_init__(self) -> None:
        inner = getattr(self.log.store, "inner", self.log.store)
        self.store = RetryingStore(inner, (METADATA_PREFIX, DELTA_LOG_PREFIX, TOMBSTONE_PREFIX))
        self.tombstones = Tombstones(self.store)

    @classmethod
    def of(cls, log: VersionLog) -> Source:
        return cls(log, location_of(log.store, log.location))

    def create(self, key: str, data: bytes) -> bool:
        """Create ``key`` with ``data``; False if it exists (a concurrent writer made it)."""
        try:
            self.store.put_if_absent(key, data)
            return True
        except PreconditionFailed:
            return False

    def commit_point(self, key: str, data: bytes, grace: float) -> bool:
        """``create`` of a mirror's commit point (Iceberg metadata, a Delta commit or
        checkpoint) while the objects written for it cannot be ones GC deleted (the table's
        ``grace``, deadline.py); else ``CommitFailedError``. What it wrote is then left to GC:
        a concurrent mirror writer may reference the objects named by their content (Puffin
        and deletion-vector files)."""
        Deadline(f"the mirror's {key} of {self.location}", self.started, None, grace, removes_staged=False).check()
        return self.create(key, data)

    def put_all(self, objects: list[tuple[str, bytes]]) -> Callable[[], None]:
        """Start creating uniquely named objects, in parallel (a commit's mirror objects that
        no order is needed between: manifests and their list, before the metadata file);
        returns the wait for them, which raises the first failure."""
        pending = [_PUTS.get().submit(self.store.put_if_absent, key, data) for key, data in objects]

        def wait() -> None:
            for done in pending:
                done.result()

        return wait

    def size_of(self, key: str) -> int:
        info = self.store.head(key)
        if info is None:
            raise NotFound(key)
        return info.size


def advance_hint(src: Source, key: str, version: int, encode: Any, decode: Any) -> None:
    """Move a pointer object such as ``version-hint.text`` or ``_last_checkpoint`` to
    ``version``, never backwards: compare-and-swap, re-reading after a lost race or a failed
    call (which may have landed). Best effort: a reader that finds it behind probes forward
    (or lists), and the next sync moves it. The etag this process last wrote is tried first
    (no GET: a commit that follows this process's own is the common case)."""
    store, cached = src.store, (src.location, key)
    with _ETAGS_LOCK:
        known = _ETAGS.get(cached)
    for _ in range(_HINT_ATTEMPTS):
        try:
            if known is not None and known[0] < version:
                etag = known[1]
            else:
                try:
                    data, etag = store.get_with_etag(key)
                except NotFound:
                    _remember_etag(cached, version, store.put_if_absent(key, encode(version)))
                    return
                if _decoded(decode, data) >= version:
                    return
            _remember_etag(cached, version, store.put_if_match(key, encode(version), etag))
            return
        except StoreError:  # PreconditionFailed included: read again
            known = None
            continue


def _remember_etag(cached: tuple[str, str], version: int, etag: str) -> None:
    with _ETAGS_LOCK:
        _ETAGS[cached] = (version, etag)
        while len(_ETAGS) > 64:
            _ETAGS.pop(next(iter(_ETAGS)))


_HINT_ATTEMPTS = 8
_ETAGS: dict[tuple[str, str], tuple[int, str]] = {}
"""(location, pointer key) -> the version and etag this process last wrote there."""
_ETAGS_LOCK = ProcessLock()
_PUTS = ProcessPool(8, "mirror-put")
"""Threads for parallel PUTs (they wait on the store, not the GIL), shared by every sync."""


def _decoded(decode: Any, data: bytes) -> int:
    try:
        return decode(data)
    except (ValueError, TypeError, KeyError):
        return -1  # unreadable: replace it

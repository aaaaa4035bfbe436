"""A version log: the pointer, the write-once versions it leads to, and the lookups built
on them (latest, by version, by timestamp, history). Readers never LIST. ``PointerLog`` knows
nothing of what a version holds; ``VersionLog`` is a table's (its versions are manifests),
and a database's log (database/log.py) is another."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar

from ..errors import (
    CorruptTableError,
    NotFound,
    PreconditionFailed,
    RateLimited,
    StoreError,
    TableNotFoundError,
    VersionExpiredError,
    VersionNotFoundError,
)
from ..format.manifest import Manifest, manifest_key
from ..format.pointer import POINTER_KEY, Pointer, decode_pointer, encode_pointer
from ..storage import ObjectStore
from ..storage.retry import RetryPolicy
from .segments import SegmentReader
from .version import Version

_CACHE_SIZE = 16
_MAX_POINTER_ATTEMPTS = 1000
_POINTER_RETRY = RetryPolicy()
MAX_POINTER_LAG = 64
"""Versions a commit may be acknowledged ahead of a pointer the store refuses to move for its
write rate. Readers then probe up to this many versions past the pointer (``_probe_past``:
about 12 HEADs at most), and commits are capped at this many per pointer write (about 64/s on
GCS), not at one: tests/benchmarks/pointer_rate.py."""
_RATE_LIMITED_RETRY = RetryPolicy(attempts=120, base=0.05, cap=1.0)
"""Past the lag bound, a refused CAS is tried again until a pointer write is allowed (GCS:
about one a second), for about a minute."""


class _Stored(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def timestamp_ms(self) -> int: ...

    def to_json(self) -> bytes: ...


V = TypeVar("V", bound=_Stored)


class PointerLog(ABC, Generic[V]):
    """The pointer and the versions of one location, whatever a version holds."""

    def __init__(self, store: ObjectStore, location: str) -> None:
        self.store = store
        self.location = location
        self._cache: OrderedDict[int, V] = OrderedDict()
        self._lock = threading.Lock()
        self._opened: Pointer | None = None

    @abstractmethod
    def _decode(self, data: bytes, key: str) -> V:
        """A stored version, decoded and validated (``CorruptTableError``)."""

    @abstractmethod
    def _missing(self) -> Exception:
        """The error for a location with no version 0 and no pointer."""

    # --- the pointer -------------------------------------------------------------------
    def open(self, repair: bool = True) -> Pointer:
        """Read the pointer (raising ``TableNotFoundError``) and keep it for the next
        ``read_pointer``: opening a table and reading it cost one GET of the pointer, not two.
        ``repair=False``: a missing pointer is not-found at once, without the HEAD that looks
        for a version 0 whose creator died before writing the pointer (``_stored_pointer``):
        for a look that only asks whether a log with versions after 0 is there."""
        pointer = self.pointer() if repair else self._current(self._stored_pointer(repair=False))
        with self._lock:
            self._opened = pointer
        return pointer

    def read_pointer(self) -> Pointer:
        """The pointer for a read of the latest version: the one ``open`` kept, used once and
        only if no other pointer read came between (so reads through one log never go back to
        an older version); otherwise a fresh GET. Writers, GC and rebases use ``pointer``:
        they need the pointer as of now (docs/protocol.md, "Opening a table")."""
        with self._lock:
            opened, self._opened = self._opened, None
        return opened or self.pointer()

    def pointer(self) -> Pointer:
        """The current pointer (one GET). Where the pointer may lag (``pointer_may_lag``), the
        versions after it are probed too (``_probe_past``: one HEAD when it does not lag), so
        the pointer returned names the newest version and the stored object's etag."""
        with self._lock:
            self._opened = None
        return self._current(self._stored_pointer())

    def _current(self, stored: Pointer) -> Pointer:
        if not self.store.pointer_may_lag:
            return stored
        latest = self._probe_past(stored.version)
        return Pointer(latest, stored.etag, lag=latest - stored.version)

    def _probe_past(self, version: int) -> int:
        """The newest version after an existing ``version``. Versions are contiguous from the
        stored pointer's on (GC keeps them), so: HEADs of v+1, v+2, v+4... up to the first
        missing one, then a binary search below it. A lag of L costs about 2·log2(L) HEADs
        (12 at ``MAX_POINTER_LAG``), no lag one."""
        step = 1
        while self._exists(version + step):
            version += step
            step *= 2
        missing = version + step
        while missing - version > 1:
            middle = (version + missing) // 2
            if self._exists(middle):
                version = middle
            else:
                missing = middle
        return version

    def object_missing(self, version: int, key: str) -> Exception:
        """The error for ``key``, an object ``version`` references, found missing. GC deletes
        an expired version's manifest before its objects, so a version whose manifest is still
        stored was not expired: the table is damaged (``repair`` drops what is gone)."""
        if not self.stored(version):
            return VersionExpiredError(
                f"{key} of version {version} of {self.location} is gone: garbage collection has removed this version"
            )
        return CorruptTableError(
            f"version {version} of {self.location} references {key}, which is missing: the table "
            "is damaged (an object deleted by hand, or a commit that outlived garbage collection's "
            f"grace period). `manifest-table repair {self.location}` (Table.repair) commits a version "
            "without what is gone, and reports every file and row lost"
        )

    def stored(self, version: int) -> bool:
        """Whether ``version``'s manifest is stored (one HEAD, no cache: GC may have expired it)."""
        return self.store.head(manifest_key(version)) is not None

    def _exists(self, version: int) -> bool:
        with self._lock:
            if version in self._cache:
                return True
        return self.store.head(manifest_key(version)) is not None

    def _stored_pointer(self, repair: bool = True) -> Pointer:
        """The pointer object as stored. A table whose pointer is missing but whose first
        manifest exists (a creator died between the two writes) gets its pointer created."""
        try:
            return decode_pointer(*self.store.get_with_etag(POINTER_KEY))
        except NotFound:
            pass
        if not repair or self.store.head(manifest_key(0)) is None:
            raise self._missing()
        version = self.probe_forward(0)
        try:
            self.store.put_if_absent(POINTER_KEY, encode_pointer(version))
        except PreconditionFailed:
            pass  # someone else repaired it first
        return decode_pointer(*self.store.get_with_etag(POINTER_KEY))

    def probe_forward(self, version: int) -> int:
        """The newest version reachable from an existing ``version`` by HEADs of v+1, v+2..."""
        while self.store.head(manifest_key(version + 1)) is not None:
            version += 1
        return version

    def advance_pointer(self, version: int, etag: str | None = None) -> None:
        """Move the pointer to ``version`` unless it is already there or past it.

        ``etag`` is the pointer etag the caller read before committing (its version is lower
        than ``version``), which saves a GET when nobody raced us. Any failure re-reads the
        pointer: a CAS that landed but reported an error shows up as already advanced. A lost
        CAS (another writer moved it) retries at once; store failures back off, and after
        ``_POINTER_RETRY.attempts`` of them in a row raise ``StoreError``. A CAS the store
        refuses for its write rate (``RateLimited``) is given up where the pointer may lag and
        lags by at most ``MAX_POINTER_LAG`` versions: readers probe past it. Every etag used
        here comes from a pointer that decoded, so a pointer of a newer format (which
        ``decode_pointer`` refuses) is never overwritten."""
        failures = refused = 0
        for _ in range(_MAX_POINTER_ATTEMPTS):
            try:
                if etag is None:
                    current = self._stored_pointer()
                    if current.version >= version:
                        return
                    if refused and self.store.pointer_may_lag and version - current.version <= MAX_POINTER_LAG:
                        return
                    etag = current.etag
                self.store.put_if_match(POINTER_KEY, encode_pointer(version), etag)
                return
            except PreconditionFailed:
                etag = None
            except RateLimited as exc:
                etag = None
                refused += 1
                if refused >= _RATE_LIMITED_RETRY.attempts:
                    raise StoreError(
                        f"could not advance {POINTER_KEY} of {self.location} to version {version}: {exc}"
                    ) from exc
                if refused > 1:  # the first refusal only re-reads: the lag may be allowed
                    _RATE_LIMITED_RETRY.wait(refused)
            except StoreError as exc:  # NotFound too: _stored_pointer() re-creates a missing pointer
                etag = None
                failures += 1
                if failures >= _POINTER_RETRY.attempts:
                    raise StoreError(
                        f"could not advance {POINTER_KEY} of {self.location} to version {version}: {exc}"
                    ) from exc
                _POINTER_RETRY.wait(failures)
        raise StoreError(
            f"could not advance {POINTER_KEY} of {self.location} to version {version}: "
            f"{_MAX_POINTER_ATTEMPTS} compare-and-swaps lost"
        )

    # --- manifests ---------------------------------------------------------------------
    def _store_version(self, version: V) -> V:
        """The commit point: create-only write of ``version``; returns it."""
        self.store.put_if_absent(manifest_key(version.version), version.to_json())
        self._remember(version)
        return version

    def manifest(self, version: int) -> V:
        """One version's manifest: one GET, or none when cached (manifests are immutable)."""
        found = self.find(version)
        if found is not None:
            return found
        latest = self.pointer().version
        if 0 <= version <= latest:
            raise VersionExpiredError(
                f"version {version} of {self.location} has been removed by garbage collection (latest is {latest})"
            )
        raise VersionNotFoundError(f"version {version} does not exist in {self.location} (latest is {latest})")

    def find(self, version: int) -> V | None:
        """The manifest of ``version``, or None if no such object exists."""
        if version < 0:
            return None
        with self._lock:
            if version in self._cache:
                self._cache.move_to_end(version)
                return self._cache[version]
        key = manifest_key(version)
        try:
            manifest = self._decode(self.store.get(key), key)
        except NotFound:
            return None
        if manifest.version != version:
            raise CorruptTableError(f"{key} says it is version {manifest.version}")
        self._remember(manifest)
        return manifest

    def latest(self) -> tuple[V, Pointer]:
        pointer = self.pointer()
        return self.manifest(pointer.version), pointer

    def as_of(self, when: datetime) -> V:
        """The version that was current at ``when``: the newest one committed at or before it."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        target_ms = int(when.timestamp() * 1000)
        latest = self.pointer().version
        lo, hi = 0, latest  # invariant: answer in [lo-1, hi]; expired versions form a prefix
        while lo <= hi:
            mid = (lo + hi) // 2
            manifest = self.find(mid)
            if manifest is None or manifest.timestamp_ms <= target_ms:
                lo = mid + 1
            else:
                hi = mid - 1
        if hi < 0:
            raise VersionNotFoundError(f"{self.location} did not exist yet at {when.isoformat()}")
        found = self.find(hi)
        if found is None:
            raise VersionExpiredError(
                f"the version current at {when.isoformat()} ({hi}) has been removed by garbage collection"
            )
        return found

    def oldest(self, existing: int) -> int:
        """The oldest retained version up to ``existing`` (a version that exists): expired
        versions form a prefix, so a binary search finds it in about log2(existing) GETs."""
        lo, hi = 0, existing
        while lo < hi:
            mid = (lo + hi) // 2
            if self.find(mid) is None:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def history(self, limit: int | None = None) -> list[V]:
        """Manifests from the latest back to the oldest retained, newest first."""
        version = self.pointer().version
        with self._lock:
            cached = set(self._cache)
        out: list[V] = []
        while version >= 0 and (limit is None or len(out) < limit):
            manifest = self.find(version)
            if manifest is None:
                break
            out.append(manifest)
            version -= 1
        if out and out[-1].version in cached and not self.stored(out[-1].version):
            out = self._without_expired(out)
        return out

    def _without_expired(self, listed: list[V]) -> list[V]:
        """``listed`` (newest first, its oldest expired) without the versions that garbage
        collection through another handle expired after this one cached them: expired
        versions form a prefix, so a binary search of HEADs finds where they start."""
        kept, gone = 0, len(listed) - 1  # the latest is stored; the oldest is not
        while gone - kept > 1:
            middle = (kept + gone) // 2
            if self.stored(listed[middle].version):
                kept = middle
            else:
                gone = middle
        self.forget_before(listed[gone].version + 1)
        return listed[:gone]

    def forget_before(self, version: int) -> None:
        """Drop cached manifests older than ``version``: garbage collection removed them, and
        time travel to them must fail as expired rather than read missing files."""
        with self._lock:
            for cached in [v for v in self._cache if v < version]:
                del self._cache[cached]

    def _remember(self, manifest: V) -> None:
        with self._lock:
            self._cache[manifest.version] = manifest
            self._cache.move_to_end(manifest.version)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)


class VersionLog(PointerLog[Version]):
    """A table's log: its versions are manifests, read through one segment cache."""

    every_version_changes: bool = True
    """Whether each version of this log is a change of its table. A database's table sees the
    database's versions, most of which leave it as it was: its mirrors describe only the
    versions that changed it (mirrors/sync.py)."""

    def __init__(self, store: ObjectStore, location: str) -> None:
        super().__init__(store, location)
        self.segments = SegmentReader(store)
        """Every version read through this log reads its segments through this one cache."""

    def _decode(self, data: bytes, key: str) -> Version:
        return Version.of(Manifest.from_json(data, key), self.segments)

    def _missing(self) -> Exception:
        return TableNotFoundError(f"no table at {self.location}")

    def create(self, manifest: Manifest) -> Version:
        """The commit point: create-only write of the version's manifest; returns it as read
        through this log."""
        return self._store_version(Version.of(manifest, self.segments))

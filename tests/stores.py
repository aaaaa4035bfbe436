"""Store wrappers for tests: count requests, hook calls by key. They wrap a real store, so
the code under test runs unmodified against real storage semantics. Fault injection by call
number is public: ``manifest_table.testing``."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

from manifest_table.errors import PreconditionFailed, RateLimited
from manifest_table.storage import ObjectInfo, ObjectStore


class WrappedStore(ObjectStore):
    """Delegates everything to ``inner``; subclasses hook ``_before``/``_after``."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    def _call(self, op: str, key: str, fn: Callable, *args):
        self._before(op, key)
        result = fn(*args)
        self._after(op, key)
        return result

    def _before(self, op: str, key: str) -> None:
        pass

    def _after(self, op: str, key: str) -> None:
        pass

    @property
    def pointer_may_lag(self) -> bool:
        return self.inner.pointer_may_lag

    def get(self, key: str) -> bytes:
        return self._call("get", key, self.inner.get, key)

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        return self._call("get", key, self.inner.get_with_etag, key)

    def head(self, key: str) -> ObjectInfo | None:
        return self._call("head", key, self.inner.head, key)

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._call("put", key, self.inner.put_if_absent, key, data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self._call("put", key, self.inner.put_if_match, key, data, etag)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._call("list", prefix, self.inner.list, prefix)

    def delete(self, key: str) -> None:
        return self._call("delete", key, self.inner.delete, key)

    def arrow_filesystem(self):
        return self.inner.arrow_filesystem()


def kind_of(key: str) -> str:
    """'pointer', 'manifest', 'data', 'tombstone', 'segment', 'root' (or the key itself); a
    database's table objects (``tables/<id>/...``) by their kind in the table."""
    if key == "_latest_manifest":
        return "pointer"
    if key.startswith("tables/") and key.count("/") >= 2:
        return kind_of(key.split("/", 2)[2])
    return {"manifest": "manifest", "data": "data", "tombstones": "tombstone",
            "segments": "segment", "roots": "root"}.get(key.split("/")[0], key)


class CountingStore(WrappedStore):
    """Counts requests as (operation, kind of object)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.counts: Counter[tuple[str, str]] = Counter()

    def _before(self, op: str, key: str) -> None:
        self.counts[(op, kind_of(key))] += 1

    def reset(self) -> Counter[tuple[str, str]]:
        counts, self.counts = self.counts, Counter()
        return counts


class AmbiguousPutStore(WrappedStore):
    """Makes chosen writes land and then report ``PreconditionFailed``, as a client retry of
    a PUT that had landed does on a store that does not flag it (S3Store turns it into an
    outcome-unknown ``StoreError``). Other faults: ``manifest_table.testing``."""

    def __init__(self, inner: ObjectStore, fail_when: Callable[[str, str], bool]) -> None:
        super().__init__(inner)
        self.fail_when = fail_when
        self.injected = 0

    def _after(self, op: str, key: str) -> None:
        if op == "put" and self.fail_when(op, key):
            self.injected += 1
            raise PreconditionFailed(key)


class RateLimitedStore(WrappedStore):
    """Refuses a write to an object name less than ``1 / writes_per_second`` after the last
    write it let through to that name, with ``RateLimited`` and nothing applied, as GCS
    answers 429 to more than about one write per second to one object. Only the pointer is
    ever written twice, so only pointer moves are refused. Like GCS, its pointer may lag.
    ``clock`` (seconds) lets a test decide when time passes; one instance is one bucket, so
    every handle of a test shares it."""

    def __init__(self, inner: ObjectStore, writes_per_second: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(inner)
        self.interval = 1.0 / writes_per_second
        self.clock = clock
        self.refused = 0
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def pointer_may_lag(self) -> bool:
        return True

    def _before(self, op: str, key: str) -> None:
        if op != "put":
            return
        with self._lock:
            now, last = self.clock(), self._last.get(key)
            if last is not None and now - last < self.interval:
                self.refused += 1
                raise RateLimited(f"{key}: written {now - last:.3f} s ago, limit {1 / self.interval:g}/s")
            self._last[key] = now

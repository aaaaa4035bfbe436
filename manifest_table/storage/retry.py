"""Retries of the store calls that are safe to repeat, so that a transient failure (a reset
connection, a 503 the client's own retries did not absorb, a lost response) does not fail
an operation. Which calls, and why (docs/protocol.md, "Retries"):

- reads (``get``, ``head``, ``list``) and ``delete``: repeating them changes nothing;
- ``put_if_absent`` of a uniquely named object (data files, tombstones): if an attempt that
  reported failure had landed, the retry finds the key taken, and since nobody else can
  pick that name, the object is ours: success;
- never ``put_if_absent`` of a manifest (another writer may have taken that version: the
  commit loop reads it back and compares commit ids) nor ``put_if_match`` of the pointer
  (the version log re-reads it): those outcomes are resolved by reading, not repeating.

``NotFound`` and ``PreconditionFailed`` are answers, not failures, and are never retried.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import NotFound, PreconditionFailed, StoreError, SyncFailedError
from .base import ObjectInfo, ObjectStore

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    """Tries per call, the first included."""
    base: float = 0.01
    cap: float = 0.5
    """Full-jitter exponential backoff: try i waits uniform(0, min(cap, base * 2**i)) seconds."""

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, repeated after a transient ``StoreError`` until ``attempts`` are used up."""
        for attempt in range(self.attempts):
            try:
                return fn()
            except (NotFound, PreconditionFailed):
                raise
            except StoreError:
                if attempt + 1 == self.attempts:
                    raise
                self.wait(attempt)
        raise AssertionError("unreachable")

    def wait(self, attempt: int) -> None:
        time.sleep(random.uniform(0, min(self.cap, self.base * 2**attempt)))


class RetryingStore(ObjectStore):
    """``inner`` with the safe calls retried. ``unique_prefixes``: keys under them are only
    ever created under fresh unique names, so a create that finds its key taken after a
    failed attempt was our own attempt landing. Other attributes are the inner store's."""

    def __init__(
        self, inner: ObjectStore, unique_prefixes: tuple[str, ...] = (), policy: RetryPolicy = RetryPolicy()
    ) -> None:
        self.inner = inner
        self.unique_prefixes = unique_prefixes
        self.policy = policy

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes not found here (``root`` of a LocalStore, ``bucket``...).
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def pointer_may_lag(self) -> bool:
        return self.inner.pointer_may_lag

    def get(self, key: str) -> bytes:
        return self.policy.call(lambda: self.inner.get(key))

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        return self.policy.call(lambda: self.inner.get_with_etag(key))

    def head(self, key: str) -> ObjectInfo | None:
        return self.policy.call(lambda: self.inner.head(key))

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._create(key, lambda: self.inner.put_if_absent(key, data))

    def put_new(self, key: str, data: bytes) -> str:
        return self._create(key, lambda: self.inner.put_new(key, data))

    def _create(self, key: str, create: Callable[[], str]) -> str:
        if not (self.unique_prefixes and key.startswith(self.unique_prefixes)):
            return create()
        for attempt in range(self.policy.attempts):
            try:
                return create()
            except (NotFound, SyncFailedError):
                raise
            except PreconditionFailed:
                if attempt == 0:
                    raise  # taken before we ever tried: not ours
                info = self.head(key)
                if info is None:
                    raise
                return info.etag
            except StoreError:
                if attempt + 1 == self.policy.attempts:
                    raise
                self.policy.wait(attempt)
        raise AssertionError("unreachable")

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self.inner.put_if_match(key, data, etag)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Streams; after a failure it lists again and resumes after the last key it yielded
        (listings are in key order)."""
        last: str | None = None
        for attempt in range(self.policy.attempts):
            try:
                for info in self.inner.list(prefix):
                    if last is None or info.key > last:
                        last = info.key
                        yield info
                return
            except (NotFound, PreconditionFailed):
                raise
            except StoreError:
                if attempt + 1 == self.policy.attempts:
                    raise
                self.policy.wait(attempt)

    def delete(self, key: str) -> None:
        self.policy.call(lambda: self.inner.delete(key))

    def arrow_filesystem(self) -> Any:
        return self.inner.arrow_filesystem()

"""Fault injection: test how a table (or your own ``ObjectStore``) behaves when storage
fails or the writer dies mid-operation.

``FaultyStore`` wraps any store, and the pyarrow filesystem its data files go through, and
records every call it sees as a ``Call(kind, key)``. A ``FaultPlan`` picks the k-th call of
chosen kinds and makes it fail in one of four ways:

- ``TRANSIENT``: raise ``InjectedStoreError`` before the call reaches the store (nothing applied);
- ``TIMEOUT``: apply the call, then raise ``InjectedStoreError`` (the ambiguous outcome of a
  request whose response was lost);
- ``CRASH_BEFORE`` / ``CRASH_AFTER``: the writer dies, with the call not applied or applied.
  A crash is ``WriterCrashed``, a ``BaseException`` that library code never catches, and
  afterwards the wrapper refuses every call, so no cleanup can run: the store is left as a
  killed process would leave it. Open a new handle on the inner store to carry on.

Typical use: run an operation once on a clean ``FaultyStore`` to list its calls, then once
per (k, fault) on a fresh copy of the table, and check what is left::

    store = FaultyStore(MemoryStore())
    ...                                   # build the table, run the operation
    n = len(store.plan.calls)
    for k in range(1, n + 1):
        store = FaultyStore(fresh_copy(), FaultPlan(at=k, fault=CRASH_AFTER))
        try:
            operation(store)
        except (WriterCrashed, ManifestTableError):
            pass
        check_invariants(store.inner)

For long runs (a history checker), ``FaultStorm`` fails calls at random, in bursts, with a
third kind of fault, ``CONFLICT``: a conditional write refused unapplied (S3's 412, or 409
ConditionalRequestConflict). ``skewed_clock`` runs the library with its host's clock off by
some seconds (garbage collection must still delete nothing a writer staged within the grace).

Call kinds of the store: ``get``, ``head``, ``put_if_absent``, ``put_if_match``, ``list``,
``delete``; of the data-file filesystem: ``fs_open_input``, ``fs_open_output``, ``fs_info``,
``fs_create_dir``, ``fs_delete``, ``fs_move``, ``fs_copy``. A failing output stream
(``fs_open_output``) fails at open for ``TRANSIENT``/``CRASH_BEFORE`` and at close, after the
whole file was written, for ``TIMEOUT``/``CRASH_AFTER``.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from . import clock
from .errors import PreconditionFailed, StoreError
from .format.keys import MANIFEST_PREFIX
from .format.pointer import POINTER_KEY
from .storage.base import ObjectInfo, ObjectStore

TRANSIENT = "transient"
TIMEOUT = "timeout"
CRASH_BEFORE = "crash_before"
CRASH_AFTER = "crash_after"
FAULTS = (TRANSIENT, TIMEOUT, CRASH_BEFORE, CRASH_AFTER)
CONFLICT = "conflict"
"""A conditional write refused unapplied (412/409): injected by ``FaultStorm`` (or a plan
asking for it), not one of the ``FAULTS`` a fault matrix walks, since any other call cannot fail so."""
CONDITIONAL_WRITES = frozenset({"put_if_absent", "put_if_match"})

STORE_CALLS = ("get", "head", "put_if_absent", "put_if_match", "list", "delete")
FS_CALLS = ("fs_open_input", "fs_open_output", "fs_info", "fs_create_dir", "fs_delete", "fs_move", "fs_copy")

T = TypeVar("T")


class WriterCrashed(BaseException):
    """The writer died (simulated). Derived from ``BaseException`` so that no ``except
    Exception`` in library code can turn a process death into a handled error."""


class InjectedStoreError(StoreError):
    """A store failure injected by a ``FaultPlan`` (transient, or a lost response)."""


@dataclass(frozen=True)
class Call:
    kind: str
    key: str
    """The object key, relative to the table root (filesystem paths are made relative too)."""


class FaultPlan:
    """Which call fails and how; shared by a ``FaultyStore`` and its filesystem so that ``at``
    counts calls of both in the order they happen. ``at`` is 1-based and counts only calls
    whose kind is in ``kinds`` (all kinds when None) and whose key satisfies ``keys`` (all
    keys when None); ``at=None`` only records."""

    def __init__(
        self,
        at: int | None = None,
        fault: str = TRANSIENT,
        kinds: Iterable[str] | None = None,
        keys: Callable[[str], bool] | None = None,
    ) -> None:
        if fault not in (*FAULTS, CONFLICT):
            raise ValueError(f"fault must be one of {(*FAULTS, CONFLICT)}, not {fault!r}")
        if at is not None and at < 1:
            raise ValueError(f"at counts calls from 1, not {at}")
        self.at, self.fault = at, fault
        self.kinds = None if kinds is None else frozenset(kinds)
        self.keys = keys
        unknown = set(self.kinds or ()) - set(STORE_CALLS) - set(FS_CALLS)
        if unknown:
            raise ValueError(f"unknown call kinds {sorted(unknown)}")
        self.calls: list[Call] = []
        self.injected: Call | None = None
        """The call that was made to fail, once it has happened."""
        self.crashed = False
        self._seen = 0
        self._lock = threading.Lock()

    def run(self, kind: str, key: str, apply: Callable[[], T]) -> T:
        """Record the call, and apply it (or not) as the plan says."""
        fault = self.enter(kind, key)
        if fault == CONFLICT:
            raise PreconditionFailed(f"injected conflict: {kind} {key} (not applied)")
        if fault == TRANSIENT:
            raise InjectedStoreError(f"injected transient error: {kind} {key} (not applied)")
        if fault == CRASH_BEFORE:
            raise WriterCrashed(f"injected crash before {kind} {key}")
        result = apply()
        self.after(fault, kind, key)
        return result

    def enter(self, kind: str, key: str) -> str | None:
        """The first half of a call: record it, refuse it after a crash, and return the fault
        to inject into it (None for most calls)."""
        with self._lock:
            if self.crashed:
                raise WriterCrashed(f"the writer has crashed: {kind} {key} refused")
            call = Call(kind, key)
            self.calls.append(call)
            if (self.kinds is not None and kind not in self.kinds) or (self.keys is not None and not self.keys(key)):
                return None
            self._seen += 1
            if self._seen != self.at:
                return None
            self.injected = call
            if self.fault in (CRASH_BEFORE, CRASH_AFTER):
                # Set now, not when raising: a call running in another thread must see it.
                self.crashed = self.fault == CRASH_BEFORE
            return self.fault

    def after(self, fault: str | None, kind: str, key: str) -> None:
        """The second half of a call that was applied: raise what the plan says."""
        if fault == TIMEOUT:
            raise InjectedStoreError(f"injected timeout: {kind} {key} applied, response lost")
        if fault == CRASH_AFTER:
            with self._lock:
                self.crashed = True
            raise WriterCrashed(f"injected crash after {kind} {key}")


class FaultStorm(FaultPlan):
    """Random faults for long runs: a call of ``kinds`` (all when None) makes a burst due with
    probability ``rate``. Bursts take the faults of ``faults`` in turn (from a random one, so a
    run of a few bursts meets each kind), each at the next call it applies to: ``TRANSIENT`` (a
    503, nothing applied) at any call; ``TIMEOUT`` (applied, the response lost) at a
    conditional write; ``CONFLICT`` (a 412 or 409, nothing applied) at a conditional write of a
    key writers race for, the pointer or a version's manifest (a uniquely named object meets
    one only after its own retry landed, which the store's retries resolve). A burst fails its
    call and the next ``burst - 1`` calls of that kind it applies to. ``first``: a burst of
    that fault is due from the start (so that a short run meets it), then the others in turn.
    Calls are not recorded; ``counts`` counts the faults injected, by kind."""

    def __init__(
        self,
        rate: float,
        faults: Iterable[str] = (TRANSIENT, TIMEOUT, CONFLICT),
        burst: int = 3,
        seed: int | None = None,
        kinds: Iterable[str] | None = None,
        first: str | None = None,
    ) -> None:
        super().__init__(kinds=kinds)
        self.faults = tuple(faults)
        if not self.faults or not set(self.faults) <= {TRANSIENT, TIMEOUT, CONFLICT}:
            raise ValueError(f"a storm injects {TRANSIENT}, {TIMEOUT} or {CONFLICT}, not {self.faults}")
        if first is not None and first not in self.faults:
            raise ValueError(f"first must be one of {self.faults}, not {first!r}")
        self.rate, self.burst = rate, burst
        self.counts: Counter[str] = Counter()
        self._random = random.Random(seed)
        self._turn = self._random.randrange(len(self.faults)) if first is None else self.faults.index(first) + 1
        self._due: str | None = first
        self._bursts: dict[str, tuple[str, int]] = {}

    def enter(self, kind: str, key: str) -> str | None:
        if self.kinds is not None and kind not in self.kinds:
            return None
        with self._lock:
            fault, left = self._bursts.get(kind, (None, 0))
            starts = fault is None
            if starts:
                if self._due is None and self._random.random() < self.rate:
                    self._due, self._turn = self.faults[self._turn % len(self.faults)], self._turn + 1
                fault, left = self._due, self.burst
            if fault is None or not _applies(fault, kind, key):
                return None
            if starts:
                self._due = None
            if left > 1:
                self._bursts[kind] = (fault, left - 1)
            else:
                self._bursts.pop(kind, None)
            self.counts[fault] += 1
            return fault


def _applies(fault: str, kind: str, key: str) -> bool:
    """Whether a storm's ``fault`` can strike a call (see ``FaultStorm``)."""
    if fault == TRANSIENT:
        return True
    contended = key == POINTER_KEY or key.startswith(MANIFEST_PREFIX)
    return kind in CONDITIONAL_WRITES and (fault == TIMEOUT or contended)


@contextmanager
def skewed_clock(seconds: float) -> Iterator[None]:
    """Run the library as on a host whose clock is ``seconds`` ahead (negative: behind): every
    wall-clock reading it makes (``manifest_table.clock``) is shifted; the store's clock is not."""
    before = clock._skew
    clock._skew = seconds
    try:
        yield
    finally:
        clock._skew = before


class FaultyStore(ObjectStore):
    """``inner`` with the faults of ``plan`` injected (see the module docstring)."""

    def __init__(self, inner: ObjectStore, plan: FaultPlan | None = None) -> None:
        self.inner = inner
        self.plan = plan if plan is not None else FaultPlan()
        self._fs: tuple[pafs.FileSystem, str] | None = None
        self._fs_lock = threading.Lock()

    @property
    def pointer_may_lag(self) -> bool:
        return self.inner.pointer_may_lag

    def get(self, key: str) -> bytes:
        return self.plan.run("get", key, lambda: self.inner.get(key))

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        return self.plan.run("get", key, lambda: self.inner.get_with_etag(key))

    def head(self, key: str) -> ObjectInfo | None:
        return self.plan.run("head", key, lambda: self.inner.head(key))

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self.plan.run("put_if_absent", key, lambda: self.inner.put_if_absent(key, data))

    def put_new(self, key: str, data: bytes) -> str:
        # (faults planned for creates apply to both kinds)
        return self.plan.run("put_if_absent", key, lambda: self.inner.put_new(key, data))

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self.plan.run("put_if_match", key, lambda: self.inner.put_if_match(key, data, etag))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Materialised, so that the whole listing is the one call that succeeds or fails.
        return iter(self.plan.run("list", prefix, lambda: list(self.inner.list(prefix))))

    def delete(self, key: str) -> None:
        self.plan.run("delete", key, lambda: self.inner.delete(key))

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str] | None:
        with self._fs_lock:
            if self._fs is None:
                found = self.inner.arrow_filesystem()
                if found is None:
                    return None
                fs, root = found
                self._fs = pafs.PyFileSystem(FaultyFileSystemHandler(fs, root, self.plan)), root
            return self._fs


class FaultyFileSystemHandler(pafs.FileSystemHandler):
    """Delegates to a pyarrow filesystem, counting and failing calls as ``plan`` says. Paths
    are recorded relative to ``root`` so that they read as the store's keys."""

    def __init__(self, fs: pafs.FileSystem, root: str, plan: FaultPlan) -> None:
        self.fs, self.root, self.plan = fs, root.rstrip("/") + "/", plan

    def _key(self, path: str) -> str:
        return path[len(self.root) :] if path.startswith(self.root) else path

    def _run(self, kind: str, path: str, apply: Callable[[], T]) -> T:
        return self.plan.run(kind, self._key(path), apply)

    def get_type_name(self) -> str:
        return f"faulty+{self.fs.type_name}"

    def equals(self, other: Any) -> bool:
        return isinstance(other, FaultyFileSystemHandler) and other.fs.equals(self.fs) and other.plan is self.plan

    def normalize_path(self, path: str) -> str:
        return self.fs.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self._run("fs_info", ",".join(paths), lambda: self.fs.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self._run("fs_info", selector.base_dir, lambda: self.fs.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self._run("fs_create_dir", path, lambda: self.fs.create_dir(path, recursive=recursive))

    def delete_dir(self, path: str) -> None:
        self._run("fs_delete", path, lambda: self.fs.delete_dir(path))

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._run("fs_delete", path, lambda: self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok))

    def delete_root_dir_contents(self) -> None:
        self._run("fs_delete", "/", lambda: self.fs.delete_dir_contents("/", accept_root_dir=True))

    def delete_file(self, path: str) -> None:
        self._run("fs_delete", path, lambda: self.fs.delete_file(path))

    def move(self, src: str, dest: str) -> None:
        self._run("fs_move", dest, lambda: self.fs.move(src, dest))

    def copy_file(self, src: str, dest: str) -> None:
        self._run("fs_copy", dest, lambda: self.fs.copy_file(src, dest))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._run("fs_open_input", path, lambda: self.fs.open_input_stream(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._run("fs_open_input", path, lambda: self.fs.open_input_file(path))

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_output(path, lambda: self.fs.open_output_stream(path, metadata=metadata))

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_output(path, lambda: self.fs.open_append_stream(path, metadata=metadata))

    def _open_output(self, path: str, open_: Callable[[], pa.NativeFile]) -> pa.NativeFile:
        key = self._key(path)
        fault = self.plan.enter("fs_open_output", key)
        if fault == TRANSIENT:
            raise InjectedStoreError(f"injected transient error: fs_open_output {key} (not applied)")
        if fault == CRASH_BEFORE:
            raise WriterCrashed(f"injected crash before fs_open_output {key}")
        return pa.PythonFile(_OutputStream(open_(), lambda: self.plan.after(fault, "fs_open_output", key)), mode="w")


class _OutputStream:
    """A file-like object over an output stream whose ``close`` completes the write and then
    raises the plan's fault (a lost response, or a crash with the file written)."""

    def __init__(self, inner: pa.NativeFile, on_close: Callable[[], None]) -> None:
        self._inner, self._on_close = inner, on_close
        self.closed = False

    def write(self, data: Any) -> int:
        return self._inner.write(data)

    def tell(self) -> int:
        return self._inner.tell()

    def flush(self) -> None:
        self._inner.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._inner.close()
            self._on_close()


__all__ = [
    "CRASH_AFTER",
    "CRASH_BEFORE",
    "FAULTS",
    "FS_CALLS",
    "STORE_CALLS",
    "TIMEOUT",
    "TRANSIENT",
    "Call",
    "FaultPlan",
    "FaultyFileSystemHandler",
    "FaultyStore",
    "InjectedStoreError",
    "WriterCrashed",
]

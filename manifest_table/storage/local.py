"""A table on a local (or network) filesystem directory, safe across processes.

Create-only: write a temp file, fsync it, ``link(2)`` it to the final name (which fails if
the name exists), fsync the directory. A crash can leave a temp file but never a partial
object under a final name that may be read. An object under a fresh name that nothing names
yet (``put_new``: a tombstone, a segment) is created under that name (``O_EXCL``), written,
and its bytes and directory synced together before the call returns: only a crash in
between can leave it partial, and then nothing names it (a failure the call sees unlinks
it). Compare-and-swap: an exclusive ``flock`` held only across
read-compare-rename; the new bytes are written and synced before the lock is taken, and the
directory is not synced after the rename: the only object swapped is the pointer, a hint
that readers here probe past (``pointer_may_lag``), so after a power loss a pointer that
went back to an older version costs a reader one more HEAD, never a commit (docs/protocol.md,
"Durability on a local directory").
Any other ``OSError`` (a full disk, a permission, a file where a directory should be)
becomes a ``StoreError`` naming the path, like a failed request on any other store.
"""

from __future__ import annotations

import fcntl
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from ..errors import NotFound, PreconditionFailed, StoreError, SyncFailedError
from ..lazy import lazy
from ..process_pools import ProcessPool
from .base import ObjectInfo, ObjectStore

if TYPE_CHECKING:
    import pyarrow.fs as pafs
else:
    pafs = lazy("pyarrow.fs")

T = TypeVar("T")
_HIDDEN = "."  # temp files and the lock file start with this; list() skips them


class LocalStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def get(self, key: str) -> bytes:
        return self.get_with_etag(key)[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        # fstat of the open file names the inode actually read, even if a rename races us.
        with _os_errors("reading", self._path(key)):
            try:
                with open(self._path(key), "rb") as f:
                    return f.read(), _info(key, os.fstat(f.fileno())).etag
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(key) from None

    def head(self, key: str) -> ObjectInfo | None:
        with _os_errors("reading", self._path(key)):
            try:
                return _info(key, os.stat(self._path(key)))
            except (FileNotFoundError, NotADirectoryError):
                return None

    def put_if_absent(self, key: str, data: bytes) -> str:
        path = self._path(key)
        with _os_errors("writing", path):
            tmp = self._write_temp_after_deferred(path, data)
            try:
                _await_deferred()  # it may name them
                os.link(tmp, path)
            except FileExistsError:
                raise PreconditionFailed(key) from None
            finally:
                os.unlink(tmp)
            if not _defer_directory(os.path.dirname(path)):
                _fsync_dir(os.path.dirname(path))
            return _info(key, os.stat(path)).etag

    def put_new(self, key: str, data: bytes) -> str:
        """Created under its name (``O_EXCL``) and written, then its bytes and its directory
        synced at once: its name may point at bytes not yet durable only while nothing names
        it, and any failure unlinks it again (so a retry writes it anew, never finds it
        taken). No temp file: a link and an unlink less under a busy journal."""
        path = self._path(key)
        with _os_errors("writing", path):
            try:
                fd = _in_directory(path, lambda: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                raise PreconditionFailed(key) from None
            with open(fd, "wb") as f:
                try:  # the name exists: any failure takes it back
                    f.write(data)
                    f.flush()
                    if not _defer(f.fileno(), path):
                        _fsync_with_directory(f.fileno(), os.path.dirname(path))
                except BaseException:
                    os.unlink(path)
                    raise
                return _info(key, os.fstat(f.fileno())).etag

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        path = self._path(key)
        with _os_errors("writing", path):
            tmp = self._write_temp_after_deferred(path, data)
            try:
                _await_deferred()  # it may name them (a database's root)
                with self._exclusive_lock():
                    current = self.head(key)
                    if current is None:
                        raise NotFound(key)
                    if current.etag != etag:
                        raise PreconditionFailed(key)
                    os.replace(tmp, path)
                    return _info(key, os.stat(path)).etag
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root, onerror=_raise_unless_missing):
            dirnames[:] = [d for d in dirnames if not d.startswith(_HIDDEN)]
            rel = os.path.relpath(dirpath, self.root)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            if not (base.startswith(prefix) or prefix.startswith(base)):
                dirnames[:] = []
                continue
            keys.extend(base + name for name in filenames if not name.startswith(_HIDDEN))
        for key in sorted(k for k in keys if k.startswith(prefix)):
            info = self.head(key)
            if info is not None:  # deleted while listing
                yield info

    def delete(self, key: str) -> None:
        with _os_errors("deleting", self._path(key)):
            try:
                os.unlink(self._path(key))
            except FileNotFoundError:
                pass

    @property
    def pointer_may_lag(self) -> bool:
        """The pointer's rename is not synced (``put_if_match``): after a power loss it may
        name an older version than one acknowledged, so readers probe past it (one ``stat``)."""
        return True

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), self.root

    def _write_temp(self, path: str, data: bytes) -> str:
        tmp = os.path.join(os.path.dirname(path), f"{_HIDDEN}tmp-{uuid.uuid4().hex}")
        try:
            with _in_directory(tmp, lambda: open(tmp, "wb")) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:  # a full disk must not leave a partial temp file behind
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return tmp

    def _write_temp_after_deferred(self, path: str, data: bytes) -> str:
        """``_write_temp`` for a conditional write, while deferred syncs run. If it fails,
        nothing was written under ``path`` and the same write would fail again (a full disk,
        a read-only or unwritable directory): ``SyncFailedError``, which the commit loop
        does not retry (it retried a manifest 200 times, about a minute, before giving up).
        A failed deferred sync is the error to report (a full disk fails both)."""
        try:
            return self._write_temp(path, data)
        except OSError as exc:
            _await_deferred()
            raise SyncFailedError(
                f"writing {path} failed: {exc.strerror or exc}; nothing was written under that name"
            ) from exc

    @contextmanager
    def _exclusive_lock(self) -> Iterator[None]:
        lock = os.path.join(self.root, f"{_HIDDEN}cas.lock")
        fd = _in_directory(lock, lambda: os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _in_directory(path: str, create: Callable[[], T]) -> T:
    """``create()`` of a file at ``path``, making its directory first if it is missing (a
    ``makedirs`` on every write cost a commit three ``mkdir`` calls that fail)."""
    try:
        return create()
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return create()


@contextmanager
def _os_errors(action: str, path: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise StoreError(f"{action} {path} failed: {exc.strerror or exc}") from exc


def _raise_unless_missing(exc: OSError) -> None:
    """A listing that silently skipped an unreadable directory would look like missing objects."""
    if not isinstance(exc, FileNotFoundError):
        raise StoreError(f"listing {exc.filename} failed: {exc.strerror or exc}") from exc


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    # Every write makes a fresh inode (a temp file renamed or linked, or a new file), so
    # (inode, mtime, size) changes on each one.
    etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
    modified = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
    return ObjectInfo(key, st.st_size, etag, modified)


def fsync_written(path: str) -> None:
    """Make a file just written under a fresh name durable, with its directory entry: data
    files are written through pyarrow's filesystem, which never syncs, and a committed
    manifest must never reference a file a power loss can take back."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if not _defer(fd, path):
            _fsync_with_directory(fd, os.path.dirname(path))
    finally:
        os.close(fd)


def _fsync_with_directory(fd: int, directory: str) -> None:
    """Sync the file ``fd`` and ``directory`` (its name there) concurrently: the two syncs
    overlap (one journal commit on ext4), so they take about as long as one (0.3-0.7 ms
    here, vs 0.5-1.5 ms one after the other; more under I/O load)."""
    other = _sync_pool().submit(_fsync_dir, directory)
    try:
        os.fsync(fd)
    finally:
        other.result()


_SYNC_THREADS = ProcessPool(4, "mt-fsync")


def _sync_pool() -> ThreadPoolExecutor:
    """The threads that sync files and directories (one pool per process)."""
    return _SYNC_THREADS.get()


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- syncs deferred to the write that names the objects ---------------------------------
class _Deferred(threading.local):
    """This thread's ``deferred_syncs`` block: whether one is open, the syncs started in it
    (each with the path to unlink if it fails), and the failure that ends its commits."""

    open = False
    pending: list[tuple[Future[None], str | None]]
    failed: SyncFailedError | None = None


_DEFERRED = _Deferred()


@contextmanager
def deferred_syncs() -> Iterator[None]:
    """Within the block, on this thread, the syncs of an object under a fresh name (a data
    file, a tombstone, a segment: ``put_new``, ``fsync_written``) start on the sync threads
    and the write returns; the next conditional write (a manifest's create, a pointer's
    swap), which may name them, waits for all of them before its ``link`` or rename, while
    its own temp file syncs; the directory of a manifest just linked syncs while the
    pointer's temp file does. The same syncs, in the order docs/protocol.md requires, in
    fewer rounds: a 1-row update waits for 2 rounds instead of 5. A sync that fails unlinks
    its object and fails every later conditional write of the block (the commit loop's
    retries included: a retried manifest would name the object). The block's end waits for
    what is left, and raises such a failure if the block did not raise. For one-call
    operations (``Table.append``, ``delete``...), whose writes and commit run on one
    thread; nested blocks are one."""
    state = _DEFERRED
    if state.open:
        yield
        return
    state.open, state.pending, state.failed = True, [], None
    try:
        yield
    finally:
        state.open = False
        pending, state.pending, state.failed = state.pending, [], None
        failed = _wait(pending)
    if failed is not None:  # (after the block raised, its own error stands)
        raise failed


def _defer(fd: int, path: str) -> bool:
    """Start syncing the file ``fd`` (at ``path``) and its directory entry on the sync
    threads, if this thread is in a ``deferred_syncs`` block; False if not."""
    state = _DEFERRED
    if not state.open:
        return False
    if state.failed is not None:
        raise state.failed
    own = os.dup(fd)  # (the caller closes ``fd``)
    pool = _sync_pool()
    state.pending.append((pool.submit(_fsync_and_close, own), path))
    state.pending.append((pool.submit(_fsync_dir, os.path.dirname(path)), path))
    return True


def _defer_directory(directory: str) -> bool:
    """Start syncing ``directory`` (a name just linked there) on the sync threads, if this
    thread is in a ``deferred_syncs`` block; False if not. What it names stays whatever
    happens (a manifest is a commit point: others may have read it already)."""
    state = _DEFERRED
    if not state.open:
        return False
    state.pending.append((_sync_pool().submit(_fsync_dir, directory), None))
    return True


def _await_deferred() -> None:
    """Wait for this thread's deferred syncs (none outside a block); raise
    ``SyncFailedError`` if one failed, now or earlier in the block."""
    state = _DEFERRED
    if not state.open:
        return
    if state.failed is None:
        pending, state.pending = state.pending, []
        state.failed = _wait(pending)
    if state.failed is not None:
        raise state.failed


def _wait(pending: list[tuple[Future[None], str | None]]) -> SyncFailedError | None:
    """Wait for every sync; unlink the fresh objects whose sync failed (a directory's sync
    names none) and describe the first failure."""
    failed: list[tuple[str | None, BaseException]] = []
    for future, path in pending:
        error = future.exception()
        if error is not None:
            failed.append((path, error))
    for path, _ in failed:
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    if not failed:
        return None
    path, error = failed[0]
    reason = error.strerror if isinstance(error, OSError) and error.strerror else error
    if path is None:
        return SyncFailedError(
            f"syncing a directory after a manifest was linked there failed: {reason}; that version is "
            "committed (check history() before retrying) but may not survive a power loss"
        )
    return SyncFailedError(f"syncing {path} failed: {reason}; it was removed, and nothing that names it is written")


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

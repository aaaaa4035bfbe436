"""Reading and writing Parquet data files next to a store's control-plane objects.

Where the store offers a pyarrow filesystem (local directory, S3) data goes through it:
native range reads and streaming uploads (one PUT for a small file, multipart for a large
one). Other stores (memory, custom ones) carry data files as whole objects through ``get`` /
``put_if_absent``.

Reads take the file's size from the manifest, so opening a file costs no HEAD; a small file
is read whole in one GET. The size is untrusted input: a size that does not match the
object makes the read fail with ``CorruptTableError``, never return other bytes.

A local file's parsed footer is kept between reads (``KnownFiles``), with what readers
derive from it (row-group statistics, page indexes): a point read on a long-lived handle
parsed a 20 KB footer and rebuilt the same statistics at every call. Each use checks that
the file is the one parsed (size, inode and modification time, one ``stat``)."""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import CorruptTableError, NotFound, StoreError
from ..lazy import lazy
from .base import ObjectStore
from .local import fsync_written
from .retry import RetryPolicy

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
else:
    pa = lazy("pyarrow")
    ds = lazy("pyarrow.dataset")
    pafs = lazy("pyarrow.fs")
    pq = lazy("pyarrow.parquet")

T = TypeVar("T")


@dataclass(frozen=True)
class ParquetSource:
    """A data file being read: its fragment, its footer, whether a byte range of it costs no
    request (a local file, or one in memory), and what readers derived from its footer
    (``derived``: kept as long as the footer is, so only values of this very file)."""

    fragment: ds.ParquetFileFragment
    metadata: pq.FileMetaData
    local: bool
    derived: dict[Any, Any] = field(default_factory=dict)


class FileIO:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.known = KnownFiles()

    @property
    def _fs(self) -> tuple[pafs.FileSystem, str] | None:
        """Asked of the store at each use, not kept: a store may replace its filesystem
        (GcsStore renews an expiring access token that way); stores build theirs once."""
        return self.store.arrow_filesystem()

    def read_parquet(self, key: str, size: int, read: Callable[[ParquetSource], T]) -> T:
        """``read(source)`` of data file ``key`` of ``size`` bytes (the manifest's).
        Raises ``NotFound``, ``CorruptTableError`` (not a Parquet file of that size) or
        ``StoreError``. A transient failure of a ranged read repeats the whole read: the
        fragment reopens the file to scan it, and either open, or any read, may fail."""
        plane = self._fs
        if plane is None or size <= WHOLE_READ_BYTES:
            data = self.store.get(key)
            if len(data) != size:
                raise CorruptTableError(f"{key} has {len(data)} bytes, the manifest's size field says {size}")
            fragment = _parquet().make_fragment(pa.py_buffer(data))  # each open() a new reader
            return read(ParquetSource(fragment, _footer(key, size, fragment), local=True))
        fs, root = plane
        return _READS.call(lambda: self._ranged(fs, f"{root}/{key}", key, size, read))

    def _ranged(
        self,
        fs: pafs.FileSystem,
        path: str,
        key: str,
        size: int,
        read: Callable[[ParquetSource], T],
    ) -> T:
        local = isinstance(fs, pafs.LocalFileSystem)
        identity = _identity(path, size) if local else None
        source = self.known.get(path, identity)
        if source is None:
            fragment = _parquet().make_fragment(path, filesystem=fs, file_size=size)
            try:
                source = ParquetSource(fragment, _footer(key, size, fragment), local)
            except OSError as exc:
                raise self._read_error(key, size, exc) from exc
            if identity is not None:
                self.known.put(path, identity, source)
        try:
            return read(source)
        except OSError as exc:
            raise StoreError(f"reading data file {key} failed: {exc}") from exc

    def _read_error(self, key: str, size: int, exc: OSError) -> Exception:
        """What a failed footer read means. Without a HEAD first, a missing object or a
        manifest size past its end shows only as an I/O error; one HEAD, on this failure
        path only, tells them from a transient failure."""
        info = self.store.head(key)
        if info is None:
            return NotFound(key)
        if info.size != size:
            return CorruptTableError(f"{key} has {info.size} bytes, the manifest's size field says {size}")
        return StoreError(f"reading data file {key} failed: {exc}")

    def open(self, key: str) -> pa.NativeFile:
        """A random-access file for reading ``key`` (a file no manifest describes yet, whose
        size is unknown); raises ``NotFound``."""
        plane = self._fs
        if plane is None:
            return pa.BufferReader(self.store.get(key))
        fs, root = plane
        return _READS.call(lambda: _open_input(fs, f"{root}/{key}", key))

    @contextmanager
    def create(self, key: str) -> Iterator[pa.NativeFile]:
        """An output stream for a new object under a unique name; the object is complete
        (and, for whole-object stores, created) only when the block exits cleanly."""
        plane = self._fs
        if plane is None:
            sink = pa.BufferOutputStream()
            yield sink
            self.store.put_if_absent(key, sink.getvalue().to_pybytes())
            return
        fs, root = plane
        path = f"{root}/{key}"
        try:
            stream = fs.open_output_stream(path)
        except FileNotFoundError:  # a local directory not made yet (object stores have none)
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            stream = fs.open_output_stream(path)
        with stream as sink:
            yield sink
        if isinstance(fs, pafs.LocalFileSystem):
            fsync_written(path)


class KnownFiles:
    """Parsed footers of local data files, least recently used dropped first: at most
    ``MAX_FILES``, and ``MAX_FOOTER_BYTES`` of footers (a wide file's footer is large). An
    entry is used only for the same file: same path, same size as the manifest says, and
    the same inode and modification time as when it was parsed."""

    MAX_FILES = 256
    MAX_FOOTER_BYTES = 32 * 1024 * 1024

    def __init__(self) -> None:
        self._files: OrderedDict[str, tuple[tuple[int, ...], ParquetSource]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str, identity: tuple[int, ...] | None) -> ParquetSource | None:
        if identity is None:
            return None
        with self._lock:
            known = self._files.get(path)
            if known is None or known[0] != identity:
                return None
            self._files.move_to_end(path)
            return known[1]

    def put(self, path: str, identity: tuple[int, ...], source: ParquetSource) -> None:
        with self._lock:
            old = self._files.pop(path, None)
            if old is not None:
                self._bytes -= old[1].metadata.serialized_size
            self._files[path] = (identity, source)
            self._bytes += source.metadata.serialized_size
            while len(self._files) > self.MAX_FILES or (self._bytes > self.MAX_FOOTER_BYTES and len(self._files) > 1):
                _, (_, dropped) = self._files.popitem(last=False)
                self._bytes -= dropped.metadata.serialized_size


def _identity(path: str, size: int) -> tuple[int, ...] | None:
    """What tells this local file from any other that had its path: None when it is not
    there, or not of the manifest's size (the read then fails as it should)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns) if st.st_size == size else None


_READS = RetryPolicy()
"""Reading a data file is idempotent: retried like the store's reads."""

WHOLE_READ_BYTES = 1024 * 1024
"""Data files up to this size are read whole, in one GET, rather than footer first and then
the columns needed (two GETs or more): on S3 a request's first byte takes tens of ms, about
what a MiB takes to transfer."""


@functools.cache
def _parquet() -> ds.ParquetFileFormat:
    """The format of every read (made once, at the first read: building it imports the
    dataset layer, which pulls pandas): coalesced range reads (``pre_buffer``); a fragment
    scan decodes row groups in parallel, where ``ParquetFile.read_row_groups`` parallelises
    only across columns (one column: one thread)."""
    return ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))


def _footer(key: str, size: int, fragment: ds.ParquetFileFragment) -> pq.FileMetaData:
    try:
        return fragment.metadata
    except pa.ArrowInvalid as exc:
        raise CorruptTableError(f"{key} is not a readable Parquet file of {size} bytes: {exc}") from None


def _open_input(fs: pafs.FileSystem, path: str, key: str) -> pa.NativeFile:
    try:
        return fs.open_input_file(path)
    except FileNotFoundError:
        raise NotFound(key) from None
    except OSError as exc:
        raise StoreError(f"opening data file {key} failed: {exc}") from exc

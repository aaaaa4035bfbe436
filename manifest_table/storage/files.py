"""Reading and writing Parquet data files next to a store's control-plane objects.

Where the store offers a pyarrow filesystem (local directory, S3) data goes through it:
native range reads and multipart uploads. Other stores (memory, custom ones) carry data
files as whole objects through ``get`` / ``put_if_absent``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import NotFound, StoreError
from .base import ObjectStore
from .retry import RetryPolicy


class FileIO:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._fs = store.arrow_filesystem()

    def open(self, key: str) -> pa.NativeFile:
        """A random-access file for reading ``key``; raises ``NotFound``."""
        if self._fs is None:
            return pa.BufferReader(self.store.get(key))
        fs, root = self._fs
        return _READS.call(lambda: _open_input(fs, f"{root}/{key}", key))

    @contextmanager
    def create(self, key: str) -> Iterator[pa.NativeFile]:
        """An output stream for a new object under a unique name; the object is complete
        (and, for whole-object stores, created) only when the block exits cleanly."""
        if self._fs is None:
            sink = pa.BufferOutputStream()
            yield sink
            self.store.put_if_absent(key, sink.getvalue().to_pybytes())
            return
        fs, root = self._fs
        path = f"{root}/{key}"
        try:
            stream = fs.open_output_stream(path)
        except FileNotFoundError:  # a local directory not made yet (object stores have none)
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            stream = fs.open_output_stream(path)
        with stream as sink:
            yield sink


_READS = RetryPolicy()
"""Opening a data file for reading is idempotent: retried like the store's reads."""


def _open_input(fs: pafs.FileSystem, path: str, key: str) -> pa.NativeFile:
    try:
        return fs.open_input_file(path)
    except FileNotFoundError:
        raise NotFound(key) from None
    except OSError as exc:
        raise StoreError(f"opening data file {key} failed: {exc}") from exc

"""Reading and writing Parquet data files next to a store's control-plane objects.

Where the store offers a pyarrow filesystem (local directory, S3) data goes through it:
native range reads and multipart uploads. Other stores (memory, custom ones) carry data
files as whole objects through ``get`` / ``put_if_absent``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import NotFound
from .base import ObjectStore


class FileIO:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._fs = store.arrow_filesystem()

    def open(self, key: str) -> pa.NativeFile:
        """A random-access file for reading ``key``; raises ``NotFound``."""
        if self._fs is None:
            return pa.BufferReader(self.store.get(key))
        fs, root = self._fs
        try:
            return fs.open_input_file(f"{root}/{key}")
        except FileNotFoundError:
            raise NotFound(key) from None

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
        if isinstance(fs, pafs.LocalFileSystem):  # object stores have no directories to make
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path) as sink:
            yield sink

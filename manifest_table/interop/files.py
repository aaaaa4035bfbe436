"""Where a snapshot's live data files are for an engine that reads Parquet itself, and which
rows of them are deleted: the two things every native reader needs besides the paths."""

from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyroaring import BitMap

from ..format.manifest import DataFile
from ..storage import ObjectStore


def file_location(store: ObjectStore) -> tuple[str, str] | None:
    """``(scheme, root)`` with data files at ``root/<key>``: ``("file", "/abs/dir")`` or
    ``("s3", "s3://bucket/prefix")``; None for stores no engine can read by path (in memory,
    custom ones)."""
    located = store.arrow_filesystem()
    if located is None:
        return None
    fs, root = located
    if isinstance(fs, pafs.LocalFileSystem):
        return "file", os.path.abspath(root)
    if isinstance(fs, pafs.S3FileSystem):
        return "s3", f"s3://{root}"
    return None


def deleted_rows(files: Sequence[DataFile], paths: Sequence[str],
                 deleted: Callable[[DataFile], BitMap]) -> pa.Table:
    """One row ``(filename, file_row_number)`` per deleted row of ``files`` (named by
    ``paths``): the small relation a native reader anti-joins against. Only files that have
    deletes contribute; ``deleted`` gives a file's bitmap."""
    names, positions = [], []
    for file, path in zip(files, paths):
        if file.deletes is None:
            continue
        rows = np.asarray(deleted(file).to_array(), dtype=np.int64)
        names.append(pa.DictionaryArray.from_arrays(np.zeros(len(rows), np.int32), [path]).cast(pa.string()))
        positions.append(pa.array(rows))
    return pa.table({"filename": pa.chunked_array(names, pa.string()),
                     "file_row_number": pa.chunked_array(positions, pa.int64())})

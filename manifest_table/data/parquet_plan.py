"""Where a snapshot's live data files are for an engine that reads Parquet itself, which rows
of them are deleted, and (once the schema has changed) how each file's columns map onto the
table's: what every native reader needs besides the paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyroaring import BitMap

from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..storage import FileIO, ObjectStore

_FOOTER_THREADS = 8
"""Footers read at once when an evolved table's files are mapped: object stores' latency is
what the threads overlap."""


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


def deleted_rows(files: Sequence[DataFile], paths: Sequence[str], deleted: Callable[[DataFile], BitMap]) -> pa.Table:
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
    return pa.table(
        {"filename": pa.chunked_array(names, pa.string()), "file_row_number": pa.chunked_array(positions, pa.int64())}
    )


ColumnPlan = tuple[tuple[str, str | None, pa.DataType | None], ...]
"""How one file is read as the table's columns: per column, its name, the file's column that
holds it (None: added since the file was written) and, when the table widened it since, the
file's type (None: the table's)."""


def by_column_plan(io: FileIO, fields: FieldIds, files: Sequence[DataFile]) -> dict[ColumnPlan, list[DataFile]]:
    """``files`` grouped by their column plan, in order of first appearance. Until the schema
    changes every file has the table's columns: one group, and nothing is read. After, each
    file's footer is read (a few at a time) and its columns resolved by field id
    (format/field_ids.py), so that an engine reading Parquet itself can read each group with
    one projection."""
    names = fields.schema.names
    if not fields.evolved:
        return {tuple((n, n, None) for n in names): list(files)} if files else {}
    with ThreadPoolExecutor(_FOOTER_THREADS) as pool:
        footers = list(
            pool.map(lambda f: io.read_parquet(f.path, f.size, lambda source: source.fragment.physical_schema), files)
        )
    groups: dict[ColumnPlan, list[DataFile]] = {}
    for file, footer in zip(files, footers):
        sources = fields.sources(footer, names)
        plan = tuple(
            (
                f.name,
                source,
                None if source is None or footer.field(source).type == f.type else footer.field(source).type,
            )
            for f in fields.schema
            for source in [sources.get(f.name)]
        )
        groups.setdefault(plan, []).append(file)
    return groups

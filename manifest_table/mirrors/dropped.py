"""Columns dropped from the schema that live files still hold (docs/mirrors.md, "Types").

A drop is metadata only: files written before it keep the column. Iceberg readers convert a
file's whole Parquet schema, so a dropped column of a type Iceberg cannot hold (a list or
struct without field ids inside, a duration, a zone other than UTC...) makes pyiceberg fail
on every such file. Turning the Iceberg mirror on therefore reads the footers of the live
files (only when the table has dropped a column; in parallel) and refuses, naming the
column and a file, until the files are rewritten."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from ..errors import MirrorTypeError
from ..format.entries import DataFile
from ..format.field_ids import FIELD_ID
from ..log.version import Version
from ..storage.fileio import FileIO
from .types import iceberg_type

_READERS = 8


def check_dropped_columns(version: Version, files: FileIO) -> None:
    """Raise ``MirrorTypeError`` if a live file of ``version`` holds a dropped column Iceberg
    cannot represent."""
    index = version.index
    mapping = index.name_mapping if index is not None else None
    current = set(version.fields.ids)
    if mapping is None or set(mapping.values()) <= current:
        return  # nothing dropped: every file column is a current one
    by_name = dict(mapping)

    def refused(f: DataFile) -> tuple[DataFile, pa.Field] | None:
        schema = files.read_parquet(f.path, f.size, lambda source: source.metadata.schema.to_arrow_schema())
        for column in schema:
            raw = (column.metadata or {}).get(FIELD_ID)
            fid = int(raw) if raw is not None else by_name.get(column.name)
            if fid is not None and fid not in current and iceberg_type(column.type) is None:
                return f, column
        return None

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        for found in pool.map(refused, version.files):
            if found is not None:
                f, column = found
                raise MirrorTypeError(
                    f"data file {f.path} still holds column {column.name!r} of type {column.type}, dropped from "
                    "the schema, which the Iceberg mirror cannot represent (Iceberg readers read every column of "
                    'a file); rewrite the files that hold it first (docs/mirrors.md, "Types")'
                )

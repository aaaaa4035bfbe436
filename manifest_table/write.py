"""Writing Parquet data files: rolled at a target size, row groups sized for range reads,
and column statistics collected on the way for the manifest."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .expressions import ColumnStats
from .format.manifest import DataFile
from .format.stats import merge_stats, table_stats
from .storage import FileIO

DATA_PREFIX = "data/"
MAX_FILE_ROWS = 2**32 - 1  # deletion bitmaps address rows with 32 bits


@dataclass(frozen=True)
class WriteOptions:
    target_file_size: int = 128 * 1024 * 1024
    """Bytes of Parquet per data file before a new one starts."""
    row_group_size: int = 16 * 1024 * 1024
    """Uncompressed Arrow bytes per row group: big enough for efficient scans, small
    enough that a selective read fetches little (row groups are the range-read unit)."""
    compression: str = "zstd"


def new_data_key() -> str:
    return f"{DATA_PREFIX}{uuid.uuid4().hex}.parquet"


def write_data_files(io: FileIO, batches: Iterable[pa.RecordBatch], schema: pa.Schema,
                     options: WriteOptions = WriteOptions()) -> list[DataFile]:
    """Write ``batches`` (already conforming to ``schema``) into new data files."""
    files: list[DataFile] = []
    groups = _row_groups(batches, schema, options.row_group_size)
    group = next(groups, None)
    while group is not None:
        key = new_data_key()
        rows, stats = 0, {}
        with io.create(key) as sink:
            with pq.ParquetWriter(sink, schema, compression=options.compression,
                                  write_statistics=True) as writer:
                while group is not None and (rows == 0 or (
                        sink.tell() < options.target_file_size and rows + group.num_rows <= MAX_FILE_ROWS)):
                    writer.write_table(group, row_group_size=group.num_rows)
                    stats = _merge(stats, table_stats(group))
                    rows += group.num_rows
                    group = next(groups, None)
            size = sink.tell()
        files.append(DataFile(key, rows, size, stats))
    return files


def _row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema, group_bytes: int) -> Iterator[pa.Table]:
    """Re-chunk a stream of batches into tables of about ``group_bytes`` each."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_bytes += batch.nbytes
        while pending_bytes >= group_bytes:
            table = pa.Table.from_batches(pending, schema)
            rows = max(1, int(table.num_rows * group_bytes / pending_bytes))
            yield table.slice(0, rows)
            rest = table.slice(rows)
            pending = rest.to_batches()
            pending_bytes = rest.nbytes if rest.num_rows else 0
    if pending:
        yield pa.Table.from_batches(pending, schema)


def _merge(a: dict[str, ColumnStats], b: dict[str, ColumnStats]) -> dict[str, ColumnStats]:
    return {name: merge_stats(a[name], s) if name in a else s for name, s in b.items()}

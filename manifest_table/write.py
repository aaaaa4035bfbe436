"""Writing Parquet data files: rolled at a target size, row groups sized for range reads,
and column statistics collected on the way for the manifest."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .arguments import check_int
from .errors import InvalidArgumentError, StoreError
from .expressions import ColumnStats
from .format.manifest import DataFile
from .format.schema import check_schema
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
    """A Parquet codec: none, snappy, gzip, brotli, lz4, lz4_raw or zstd."""

    def __post_init__(self) -> None:
        check_int("target_file_size", self.target_file_size, minimum=1)
        check_int("row_group_size", self.row_group_size, minimum=1)
        codec = self.compression.lower() if isinstance(self.compression, str) else None
        if codec not in _CODECS or (codec != "none" and not pa.Codec.is_available(_CODECS[codec])):
            raise InvalidArgumentError(f"compression must be one of {sorted(_CODECS)} (available in this "
                                       f"pyarrow build), not {self.compression!r}")


_CODECS = {"none": "none", "snappy": "snappy", "gzip": "gzip", "brotli": "brotli", "lz4": "lz4",
           "lz4_raw": "lz4", "zstd": "zstd"}
"""Parquet codec names pyarrow's writer accepts -> the Arrow codec that implements them."""


def new_data_key() -> str:
    return f"{DATA_PREFIX}{uuid.uuid4().hex}.parquet"


def write_data_files(io: FileIO, batches: Iterable[pa.RecordBatch], schema: pa.Schema,
                     options: WriteOptions = WriteOptions()) -> list[DataFile]:
    """Write ``batches`` (already conforming to ``schema``) into new data files. If anything
    fails (a stream that raises midway, a full disk), every file this call wrote, the
    partial one included, is removed before the error propagates; local I/O errors
    become ``StoreError``. A schema no file could be written in (a table made by another
    writer with a float16 column) fails before any file is started."""
    check_schema(schema)
    keys: list[str] = []
    source = _Source(batches)
    try:
        return list(_write(io, source, schema, options, keys))
    except BaseException as exc:
        io.store.delete_unreferenced(keys)
        if isinstance(exc, OSError) and not source.failed:
            raise StoreError(f"writing data file {keys[-1] if keys else ''} failed: {exc}") from exc
        raise


class _Source:
    """The caller's batches, remembering whether they raised: an ``OSError`` from the
    caller's stream (a dropped connection) is the caller's, not a failure of our store."""

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self._batches = iter(batches)
        self.failed = False

    def __iter__(self) -> "_Source":
        return self

    def __next__(self) -> pa.RecordBatch:
        try:
            return next(self._batches)
        except StopIteration:
            raise
        except BaseException:
            self.failed = True
            raise


def _write(io: FileIO, batches: Iterable[pa.RecordBatch], schema: pa.Schema, options: WriteOptions,
           keys: list[str]) -> Iterator[DataFile]:
    """Yield each data file once complete; ``keys`` names every file started."""
    groups = _row_groups(batches, schema, options.row_group_size)
    group = next(groups, None)
    while group is not None:
        keys.append(new_data_key())
        rows, stats = 0, {}
        with io.create(keys[-1]) as sink:
            with pq.ParquetWriter(sink, schema, compression=options.compression,
                                  write_statistics=True) as writer:
                while group is not None and (rows == 0 or (
                        sink.tell() < options.target_file_size and rows + group.num_rows <= MAX_FILE_ROWS)):
                    writer.write_table(group, row_group_size=group.num_rows)
                    stats = _merge(stats, table_stats(group))
                    rows += group.num_rows
                    group = next(groups, None)
            size = sink.tell()
        yield DataFile(keys[-1], rows, size, stats)


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

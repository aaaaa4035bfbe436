"""A write that fails leaves nothing behind: a stream that breaks midway, a disk that fills
while a data file is written, a table handle whose options could never write."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.data.write import WriteOptions, write_data_files
from manifest_table.errors import InvalidArgumentError, StoreError
from manifest_table.format.manifest import Manifest, manifest_key
from manifest_table.format.pointer import POINTER_KEY, encode_pointer
from manifest_table.format.stored_schema import StoredSchema
from manifest_table.storage import FileIO, LocalStore
from tests.catalog import object_listing

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def batches(stop: int, fail_at: int | None = None) -> Iterator[pa.RecordBatch]:
    for start in range(0, stop, 100):
        if start == fail_at:
            raise ConnectionError("the source went away")
        ids = list(range(start, start + 100))
        yield pa.record_batch({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def test_stream_failing_midway_removes_every_file_it_wrote(store, tmp_path: Path) -> None:
    """On every store (``store`` is memory, local and moto S3, whose multipart upload of the
    partial file completes when the stream closes)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, store=store, target_file_size=2000, row_group_size=1000)
    t.append(pa.RecordBatchReader.from_batches(SCHEMA, batches(300)))
    before = object_listing(store)
    with pytest.raises(ConnectionError):
        t.append(pa.RecordBatchReader.from_batches(SCHEMA, batches(5000, fail_at=4000)))
    assert object_listing(store) == before
    assert t.scan().count() == 300


def test_write_data_files_removes_the_partial_file(tmp_path: Path) -> None:
    """The failure comes while a file is open (rows written, no footer yet)."""
    store = LocalStore(tmp_path / "t")
    with pytest.raises(ConnectionError):
        write_data_files(FileIO(store), batches(1000, fail_at=500), SCHEMA, WriteOptions(row_group_size=1000))
    assert object_listing(store) == {}


def test_full_disk_while_writing_data_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, row_group_size=1000)
    before = object_listing(t.store)
    real = pq.ParquetWriter.write_table
    calls = []

    def write_table(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        calls.append(table.num_rows)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, table, *args, **kwargs)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    with pytest.raises(StoreError, match=r"writing data file data/\w+\.parquet failed: .*No space left"):
        t.append(pa.RecordBatchReader.from_batches(SCHEMA, batches(2000)))
    assert len(calls) == 3 and object_listing(t.store) == before


def test_options_that_could_never_write_fail_before_any_write(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="compression must be one of"):
        mt.create_table(str(tmp_path / "t"), SCHEMA, compression="lzo")
    assert not (tmp_path / "t").exists()
    with pytest.raises(InvalidArgumentError, match="compression"):
        WriteOptions(compression="bz2")
    assert WriteOptions(compression="LZ4_RAW").compression == "LZ4_RAW"


def test_table_with_an_unwritable_schema_fails_before_writing(tmp_path: Path) -> None:
    """A table whose version 0 another writer made with a float16 column (create_table
    refuses that schema): appends fail with a typed error and write nothing."""
    store = LocalStore(tmp_path / "t")
    schema = pa.schema([("h", pa.float16())])
    store.put_if_absent(manifest_key(0), Manifest(0, None, 0, "c0", "create", StoredSchema.of(schema), ()).to_json())
    store.put_if_absent(POINTER_KEY, encode_pointer(0))
    t = mt.open_table(str(tmp_path / "t"))
    before = object_listing(store)
    with pytest.raises(InvalidArgumentError, match="column 'h' has type halffloat"):
        t.append(pa.table({"h": pa.array([1.0], pa.float16())}))
    assert object_listing(store) == before

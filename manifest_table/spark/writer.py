"""Spark batch and streaming writes: tasks write data files, the driver commits them once.

Each task writes Parquet files straight into the table's ``data/`` and reports them in its
commit message. The driver's ``commit`` adds exactly the files named in the messages it
received, in one table commit, so the files of a failed, retried or speculative attempt are
never part of the table (they are unreferenced; the task removes them if it can, GC otherwise).
A streaming micro-batch commit also records (app id, batch id), which makes a replayed batch
commit nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..clock import wall
from ..commit import CommitInfo
from ..data.write import WriteOptions
from ..errors import InvalidArgumentError
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..operations.append import write_rows
from ..storage import FileIO, ObjectStore
from .job_commit import TableCommit
from .options import SourceOptions, TableLocation


@dataclass
class WrittenFiles(WriterCommitMessage):
    """A task's report: the data files it wrote (path, rows, size, stats), and when it began
    writing them (the executor's wall clock): the commit's deadline counts from the earliest
    (deadline.py)."""

    files: list[DataFile]
    began: float | None = None


def write_task(
    location: TableLocation,
    fields: FieldIds,
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    sort_by: Sequence[str] = (),
    bloom_filter_columns: Sequence[str] = (),
) -> WrittenFiles:
    """Executor side: write one task's batches, conformed to the table schema (and sorted by
    the table's ``sort_by``, with its ``bloom_filter_columns``), as data files. On failure
    the files written so far are removed before the error propagates."""
    began = wall()
    first = next(batches, None)
    if first is None:
        return WrittenFiles([])
    stream = pa.RecordBatchReader.from_batches(first.schema, chain([first], batches))
    io = _TrackedIO(location.store())
    try:
        return WrittenFiles(write_rows(io, stream, fields, options, sort_by, bloom_filter_columns), began)
    except BaseException:
        io.store.delete_unreferenced(io.created)
        raise


class _TableWrite:
    """What batch and streaming writes share: the target (checked on the driver before any
    task runs) and the one commit (or the cleanup) at the end."""

    def __init__(self, options: SourceOptions, frame: StructType, overwrite: bool) -> None:
        self._options = options
        self._target = TableCommit(options.location, frame, overwrite, options.where, options.require_match)
        self._overwrite = overwrite

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        target = self._target
        return write_task(
            self._options.location,
            target.fields,
            self._options.write,
            iterator,
            target.sort_by,
            target.bloom_filter_columns,
        )

    def _commit(
        self, messages: Iterable[WriterCommitMessage | None], app_transaction: tuple[str, int] | None = None
    ) -> CommitInfo:
        began = [m.began for m in messages if isinstance(m, WrittenFiles) and m.began is not None]
        since = datetime.fromtimestamp(min(began), UTC) if began else None
        return self._target.commit(_files(messages), app_transaction, since)

    def _abort(self, messages: Iterable[WriterCommitMessage | None]) -> None:
        """Spark also aborts when ``commit`` raised (see ``TableCommit.abort``)."""
        self._target.abort(f.path for f in _files(messages))


class BatchWriter(_TableWrite, DataSourceArrowWriter):
    """``df.write.format("manifest_table").mode("append" | "overwrite").save(uri)``."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._abort(messages)


class StreamWriter(_TableWrite, DataSourceStreamArrowWriter):
    """``df.writeStream.format("manifest_table").option("checkpointLocation", ...).start(uri)``:
    one table commit per micro-batch, recorded as batch ``batchId`` of ``app_id``."""

    def __init__(self, options: SourceOptions, frame: StructType, overwrite: bool) -> None:
        super().__init__(options, frame, overwrite)
        self._app_id = streaming_app_id(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if _files(messages) or self._overwrite:  # an empty append needs no version
            self._commit(messages, (self._app_id, batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._abort(messages)


def streaming_app_id(options: SourceOptions) -> str:
    """The id a query's batch ids are recorded under. It must survive a restart from the same
    checkpoint and change with a new checkpoint (whose batch ids start again at 0). Spark
    keeps its query id in ``<checkpoint>/metadata``; we read it there when the checkpoint is
    on a local filesystem, else fall back to the checkpoint location itself."""
    if options.app_id:
        return options.app_id
    location = options.checkpoint_location
    if not location:
        raise InvalidArgumentError(
            "the manifest_table streaming sink needs option checkpointLocation "
            "(or app_id) to commit each micro-batch exactly once"
        )
    path = urlparse(location).path if location.startswith("file:") else location
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as f:
            return f"spark-query:{json.loads(f.readline())['id']}"
    except (OSError, ValueError, KeyError):
        return f"spark-checkpoint:{location.rstrip('/')}"


class _TrackedIO(FileIO):
    """Remembers the objects it creates, so a failing task can remove its partial output."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.created: list[str] = []

    @contextmanager
    def create(self, key: str) -> Iterator[pa.NativeFile]:
        self.created.append(key)
        with super().create(key) as f:
            yield f


def _files(messages: Iterable[WriterCommitMessage | None]) -> list[DataFile]:
    return [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]

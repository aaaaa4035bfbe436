"""``spark.readStream.format("manifest_table")``: the rows that commits append, micro-batch
after micro-batch, with table versions as offsets; with ``readChangeFeed``, the change rows of
each commit (``Table.changes``: inserts, deletes, update pairs), one task per commit.

Spark keeps one instance of the reader in a Python process on the driver for the life of the
query (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``), and pickles it to
executors for ``read``; what to read is planned by stream_plan.py, from immutable manifests
only, so a batch that Spark plans again after a restart (from the offsets in its checkpoint)
reads exactly the same rows. Rate limits are Spark's admission control: the default read
limit comes from ``maxFilesPerTrigger`` / ``maxBytesPerTrigger``, and Spark passes
``ReadAllAvailable`` instead when a trigger asks for everything."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ..feed import CHANGE_COLUMNS
from ..format.entries import DataFile
from .options import SourceOptions
from .planning import group_files
from .read_files import for_spark, read_columns, scan_files
from .schema import exchange_schema
from .stream_plan import Limit, Position, StreamPlanner, appended_rows, changed_rows


@dataclass
class UnitsPartition(InputPartition):
    """One read task of a micro-batch: data files as the versions that added them list them."""

    version: int
    """The newest of those versions (for messages)."""
    files: tuple[DataFile, ...]


@dataclass
class CommitPartition(InputPartition):
    """One read task of a change feed's micro-batch: the change rows of commit ``version``."""

    version: int


class TableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The append stream of one table, read under the schema the query started with."""

    def __init__(self, options: SourceOptions, schema: StructType, pinned_version: int | None) -> None:
        self._options = options
        table = options.location.open()
        manifest = table.manifest(pinned_version)
        self._fields_version = manifest.version
        self._fields = manifest.fields
        self._change_feed = options.stream.read_change_feed
        ours = [f for f in schema.fields if f.name not in CHANGE_COLUMNS.names] if self._change_feed else schema.fields
        self._columns = read_columns(StructType(ours), manifest.schema)
        self._output = exchange_schema(schema)
        self._until: int | None = None
        self._planner: StreamPlanner | None = None  # made on the driver, never pickled

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> StreamPlanner:
        if self._planner is None:
            table = self._options.location.open()
            units_of = changed_rows if self._change_feed else appended_rows(self._options.stream.skip_change_commits)
            self._planner = StreamPlanner(table, self._fields, self._fields_version, units_of)
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        stream = self._options.stream
        return self.planner.initial(stream.starting_version, stream.starting_timestamp).to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        stream = self._options.stream
        if stream.max_files is not None:
            return ReadMaxFiles(stream.max_files)
        if stream.max_bytes is not None:
            return ReadMaxBytes(stream.max_bytes)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        stream = self._options.stream
        if isinstance(limit, ReadMaxFiles):  # both options given: the default limit carries the files
            bound: Limit | None = Limit(limit.max_files, stream.max_bytes)
        elif isinstance(limit, ReadMaxBytes):
            bound = Limit(stream.max_files, limit.max_bytes)
        else:
            bound = None  # ReadAllAvailable: a trigger that reads everything
        return self.planner.latest(Position.of_offset(start), bound, self._until).to_offset()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self.planner.table.log.read_pointer().version

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        units = self.planner.units(Position.of_offset(start), Position.of_offset(end))
        if self._change_feed:
            return [CommitPartition(u.version) for u in units]
        groups = group_files(units, self._options.parallelism, self._options.max_partition_bytes)
        return [
            UnitsPartition(max(u.version for u in group), tuple(f for u in group for f in u.files)) for group in groups
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        location = self._options.location
        if isinstance(partition, CommitPartition):
            return self._changes(partition.version)
        assert isinstance(partition, UnitsPartition)
        scan = scan_files(location, partition.version, self._fields, partition.files, self._columns, None)
        return for_spark(scan, self._output)

    def _changes(self, version: int) -> Iterator[pa.RecordBatch]:
        """The change rows of commit ``version`` in the query's schema (a commit before the
        query's schema version is read in it; later ones have it: stream_plan.py)."""
        table = self._options.location.open()
        feed = table.changes(version - 1, max(version, self._fields_version), columns=self._columns)
        for batch in feed.commit(version).to_batches():
            yield batch.cast(self._output, safe=False)

    def commit(self, end: dict[str, Any]) -> None:
        self.planner.forget_before(Position.of_offset(end).version)

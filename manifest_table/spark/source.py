"""The ``manifest_table`` Spark data source and its batch readers.

Planning happens on the driver: the version to read is pinned when the DataFrame is loaded
(the latest, or the ``version`` / ``as_of`` option), ``pushFilters`` (with ``pushdown``) keeps
the filters we can apply exactly, and ``partitions()`` prunes the data files with them and
groups the rest into tasks. Each task reads its files with the ordinary ``Scan`` over a
snapshot holding only those files, so row-group pruning, deletion bitmaps and the residual
filter work exactly as in Python."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import reduce

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..errors import InvalidArgumentError, NotSupportedError
from ..expressions import And, Expr
from ..feed import CHANGE_COLUMNS
from ..format.manifest import DataFile
from .from_spark import from_spark_filter
from .options import SourceOptions
from .planning import group_files
from .read_files import for_spark, read_columns, scan_files
from .schema import exchange_schema, spark_schema

FORMAT_NAME = "manifest_table"


class ManifestTableDataSource(DataSource):
    """``spark.read.format("manifest_table")`` / ``df.write.format("manifest_table")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        opts = SourceOptions.parse(self.options)
        snapshot = opts.location.open().scan(version=opts.version, as_of=opts.as_of).snapshot
        # Spark pickles this instance after schema() and plans every query of the DataFrame
        # from it: pinning the version here makes them all read the same snapshot.
        self.pinned_version = snapshot.version
        if opts.stream.read_change_feed:
            return spark_schema(pa.schema([*snapshot.schema, *CHANGE_COLUMNS]))
        return spark_schema(snapshot.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = SourceOptions.parse(self.options)
        if opts.where is not None:
            raise InvalidArgumentError("option where applies to overwrite writes; filter a read with .filter()")
        if opts.stream.given():
            raise InvalidArgumentError(
                f"options {opts.stream.given()} apply to streaming reads (spark.readStream); a batch read of "
                "the change feed is manifest_table.spark.read_changes"
            )
        pinned = getattr(self, "pinned_version", None)  # unset when the user gave the schema
        if pinned is not None:
            opts = replace(opts, version=pinned, as_of=None)
        return FilteringTableReader(opts, schema) if opts.pushdown else TableReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = SourceOptions.parse(self.options)
        batch_only = [
            name
            for name, value in (("version", opts.version), ("as_of", opts.as_of), ("where", opts.where))
            if value is not None
        ]
        if batch_only:
            raise InvalidArgumentError(
                f"options {batch_only} do not apply to streaming reads: start with startingVersion or startingTimestamp"
            )
        try:
            from .stream_source import TableStreamReader
        except ImportError as exc:  # pyspark.sql.streaming.datasource (admission control) came with 4.2
            raise NotSupportedError(f"the streaming source needs pyspark >= 4.2 ({exc})") from None
        return TableStreamReader(opts, schema, getattr(self, "pinned_version", None))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import BatchWriter  # the writer imports what only writes need

        return BatchWriter(SourceOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .writer import StreamWriter

        return StreamWriter(SourceOptions.parse(self.options), schema, overwrite)


@dataclass
class FilesPartition(InputPartition):
    """One read task: data files of the pinned version (with their deletion vector refs)."""

    files: tuple[DataFile, ...]


class TableReader(DataSourceReader):
    """Created and asked for partitions on the driver, then pickled to the executors, which
    call ``read``. It holds only picklable values (no store or snapshot)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        snapshot = options.location.open().scan(version=options.version, as_of=options.as_of).snapshot
        self._version = snapshot.version
        self._table_schema = snapshot.schema
        self._fields = snapshot.fields
        self._columns = read_columns(schema, self._table_schema)
        self._output = exchange_schema(schema)
        self._where: Expr | None = None

    def partitions(self) -> list[InputPartition]:
        table = self._options.location.open()
        files = table.scan(self._columns, self._where, version=self._version).plan_files()
        groups = group_files(files, self._options.parallelism, self._options.max_partition_bytes)
        return [FilesPartition(tuple(group)) for group in groups] or [FilesPartition(())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        scan = scan_files(
            self._options.location, self._version, self._fields, partition.files, self._columns, self._where
        )
        return for_spark(scan, self._output)


class FilteringTableReader(TableReader):
    """A reader that also takes the filters Spark pushes down. Spark then drops them from its
    plan, so they must be applied exactly: ``from_spark_filter`` keeps only those that can."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        accepted = []
        for spark_filter in filters:
            expr = from_spark_filter(spark_filter, self._table_schema)
            if expr is None:
                yield spark_filter
            else:
                accepted.append(expr)
        self._where = reduce(And, accepted) if accepted else None

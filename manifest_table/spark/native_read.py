"""Reading a table with Spark's own Parquet reader: plan on the driver, read the live files
natively, drop deleted rows by (file, row index).

The driver reads the manifest of the version; the data files are plain Parquet, so
``spark.read.schema(s).parquet(*files)`` reads them with Spark's vectorised reader, column
pruning, filter pushdown and AQE. Only the files that have deletes pay for them: the clean
files are read plainly and the two reads are unioned, so a table without deletes costs
exactly a Parquet read. Deleted rows are dropped inside the scan by a JVM function looking
(the file, ``_metadata.row_index``) up in the deletion bitmaps (live_row.py);
where that function is not available, by a broadcast anti-join on the same pair against a
DataFrame built from the bitmaps (docs/design/006-spark-deletes.md measures both).

Files are matched by name, not by ``_metadata.file_path``: Spark gives the path as a
percent-encoded Hadoop URI (``file:/a%20b/...``), the manifest relative keys, and our writers
name every data file ``<32 hex>.parquet``, which is unique and the same encoded or not."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..data.parquet_plan import ColumnPlan, by_column_plan
from ..data.scan import Snapshot
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..storage import FileIO
from .live_row import live_row_filter
from .native_location import hadoop_options, hadoop_path, native_reachable, report_fallback
from .options import TableLocation
from .schema import native_readable, spark_schema
from .to_spark import quoted

FILE_COLUMN = "_mt_file"
"""The data file a row came from (its name), when a read is asked for row positions."""
ROW_COLUMN = "_mt_row"
"""The row's position in its data file (``_metadata.row_index``)."""

_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


def read(
    spark: Any,
    uri: str,
    *,
    version: int | None = None,
    as_of: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> DataFrame:
    """The live rows of ``version`` (or of the version current at ``as_of``, or the latest),
    read by Spark's own Parquet reader. Where Spark cannot read the table natively, the
    same rows come from the ``manifest_table`` Python data source (logged once)."""
    location = TableLocation.of(uri, storage_options)
    snapshot = location.open().scan(version=version, as_of=as_of).snapshot
    if not native_readable_snapshot(spark, location, snapshot):
        return data_source_read(spark, location, snapshot.version)
    return live_rows(spark, location, snapshot.fields, snapshot.files, snapshot.deleted)


def native_readable_snapshot(spark: Any, location: TableLocation, snapshot: Snapshot) -> bool:
    """True when Spark can read every file of ``snapshot`` natively and name them uniquely."""
    unreadable = [f.name for f in snapshot.schema if not native_readable(f.type)]
    if unreadable:
        report_fallback(location, "types", f"Spark's Parquet reader cannot read columns {unreadable}")
        return False
    if any(f.name.lower() == "_metadata" for f in snapshot.schema):
        report_fallback(location, "metadata", "a column named _metadata hides the file metadata Spark's reader gives")
        return False
    names = [file_name(f) for f in snapshot.files]
    if len(set(names)) != len(names) or not all(_SAFE_NAME.fullmatch(n) for n in names):
        report_fallback(location, "names", "data file names are not unique plain names")
        return False
    return native_reachable(spark, location)


def data_source_read(spark: Any, location: TableLocation, version: int) -> DataFrame:
    """The same read through the Python data source (pinned to ``version``)."""
    from . import register

    register(spark)
    reader = spark.read.format("manifest_table").option("version", version)
    return reader.options(**(location.storage_options or {})).load(location.uri)


def live_rows(
    spark: Any,
    location: TableLocation,
    fields: FieldIds,
    files: Sequence[DataFile],
    deleted: Callable[[DataFile], BitMap],
    *,
    with_positions: bool = False,
) -> DataFrame:
    """The live rows of ``files`` (which must be natively readable), with the columns of
    ``fields`` (the version's schema and field ids) and, if ``with_positions``,
    ``FILE_COLUMN`` and ``ROW_COLUMN``."""
    schema = fields.schema
    files = [f for f in files if f.live_rows > 0]
    if not files:
        empty = spark.createDataFrame([], spark_schema(schema))
        if with_positions:
            empty = empty.select(
                "*", F.lit(None).cast("string").alias(FILE_COLUMN), F.lit(None).cast("long").alias(ROW_COLUMN)
            )
        return empty
    parts = []
    plans = by_column_plan(FileIO(location.store()), fields, files)
    clean = [f for f in files if f.deletes is None]
    if clean:
        parts.append(_parquet(spark, location, schema, plans, clean, with_positions))
    dirty = [f for f in files if f.deletes is not None]
    if dirty:
        live = live_row_filter(spark, dirty, deleted, file_name)
        if live is not None:
            parts.append(_parquet(spark, location, schema, plans, dirty, with_positions, live))
        else:
            parts.append(_anti_joined(spark, location, schema, plans, dirty, deleted, with_positions))
    return reduce(DataFrame.unionByName, parts)


def file_name(file: DataFile) -> str:
    """The name Spark's ``_metadata.file_name`` gives ``file``."""
    return file.path.rsplit("/", 1)[-1]


def _parquet(
    spark: Any,
    location: TableLocation,
    schema: pa.Schema,
    plans: dict[ColumnPlan, list[DataFile]],
    files: Sequence[DataFile],
    with_positions: bool,
    keep: Column | None = None,
) -> DataFrame:
    """``files`` read as the table's columns: one Parquet read per column plan (one for all
    until the schema changes), each projecting its files' columns onto the table's; ``keep``
    filters the rows on Spark's ``_metadata`` columns first."""
    chosen = {f.path for f in files}
    parts = []
    for plan, group in plans.items():
        paths = [hadoop_path(location, f.path) for f in group if f.path in chosen]
        if paths:
            parts.append(_read_plan(spark, location, schema, plan, paths, with_positions, keep))
    return reduce(DataFrame.unionByName, parts)


def _anti_joined(
    spark: Any,
    location: TableLocation,
    schema: pa.Schema,
    plans: dict[ColumnPlan, list[DataFile]],
    files: Sequence[DataFile],
    deleted: Callable[[DataFile], BitMap],
    with_positions: bool,
) -> DataFrame:
    """The live rows of ``files`` without the JVM function: a broadcast anti-join on (file
    name, row index) against the deleted positions."""
    rows = _parquet(spark, location, schema, plans, files, with_positions=True)
    gone = F.broadcast(_deleted_rows(spark, files, deleted))
    kept = rows.join(
        gone, (rows[FILE_COLUMN] == gone["_mt_dead_file"]) & (rows[ROW_COLUMN] == gone["_mt_dead_row"]), "left_anti"
    )
    return kept if with_positions else kept.drop(FILE_COLUMN, ROW_COLUMN)


def _read_plan(
    spark: Any,
    location: TableLocation,
    schema: pa.Schema,
    plan: ColumnPlan,
    paths: list[str],
    with_positions: bool,
    keep: Column | None,
) -> DataFrame:
    """Files of one column plan: their columns read by their own names and types, renamed,
    cast where the table widened them, NULL where they lack one."""
    target = spark_schema(schema)
    stored = pa.schema(
        [
            pa.field(source, file_type or schema.field(name).type)
            for name, source, file_type in plan
            if source is not None
        ]
    )
    frame = spark.read.schema(spark_schema(stored)).options(**hadoop_options(location)).parquet(*paths)
    if keep is not None:
        frame = frame.filter(keep)
    positions = (
        [F.col("_metadata.file_name").alias(FILE_COLUMN), F.col("_metadata.row_index").alias(ROW_COLUMN)]
        if with_positions
        else []
    )
    if all(source == name and file_type is None for name, source, file_type in plan):
        # the files hold the table's columns as they are (no schema change since): no projection
        # to build, which cost tens of round trips to the JVM per read
        return frame.select("*", *positions) if positions else frame
    columns = []
    for (name, source, file_type), field in zip(plan, target.fields):
        if source is None:
            columns.append(F.lit(None).cast(field.dataType).alias(name))
        else:
            column = quoted(source)
            columns.append((column.cast(field.dataType) if file_type is not None else column).alias(name))
    return frame.select(*columns, *positions)


def _deleted_rows(spark: Any, files: Sequence[DataFile], deleted: Callable[[DataFile], BitMap]) -> DataFrame:
    """(file name, row index) of every deleted row of ``files``, built on the driver: the
    bitmaps are the deletes, so this is as big as what was deleted, never the table."""
    names, rows = [], []
    for f in files:
        positions = np.frombuffer(deleted(f).to_array(), dtype=np.uint32).astype(np.int64)
        names.append(pa.array([file_name(f)] * len(positions), pa.string()))
        rows.append(pa.array(positions))
    table = pa.table({"_mt_dead_file": pa.concat_arrays(names), "_mt_dead_row": pa.concat_arrays(rows)})
    return spark.createDataFrame(table)

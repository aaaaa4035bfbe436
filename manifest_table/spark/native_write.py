"""Writing a DataFrame with Spark's own Parquet writer, committed once by the driver.

1. On the driver, before any task runs: the DataFrame is checked against the table (or the
   table's schema is chosen from it), and conformed to the table's column order, types and
   nullability.
2. Spark's Parquet writer (the table's codec, zstd by default) writes into a staging
   directory of its own under ``data/``. Spark's file output committer moves only the
   output of committed task attempts there, so failed, retried and speculative attempts
   leave nothing behind in it; a file never holds more rows than 32-bit positions address.
3. The driver reads each produced file's footer (row count, stats: ``footer_stats``) and
   moves the file to a unique ``data/<32 hex>.parquet`` name, the shape every writer of the
   table produces (and the one GC collects once unreferenced).
4. One commit (``TableCommit``) adds exactly those files. A failure anywhere removes the
   staging directory and the moved files, so a failed job commits nothing and leaves no
   garbage (a driver that dies mid-job leaves its staging directory, which no version
   references).

Tables Spark cannot write one to one (see ``schema.native_writable``) and locations Spark
cannot reach go through the ``manifest_table`` Python data source instead (logged once)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame

from ..arguments import check_bool
from ..commit import CommitInfo
from ..data.write import BLOOM_FPP, MAX_FILE_ROWS, WriteOptions, new_data_key
from ..errors import InvalidArgumentError
from ..expressions import Expr, to_expr
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..storage import FileIO
from .footer_stats import data_file_from_footer
from .job_commit import TableCommit
from .native_location import hadoop_options, hadoop_path, native_reachable, report_fallback
from .options import TableLocation
from .schema import native_writable, spark_schema
from .to_spark import quoted

MODES = ("append", "overwrite")
STAGING_PREFIX = "data/_spark-"
_FOOTER_THREADS = 8
"""Footers are read on the driver, a thread pool over the job's files: measured, 4 footers
took 2.4 ms on a local table, where even the smallest Spark job to read them on executors
takes hundreds of milliseconds to schedule and collect (and would need the RDD API or a
Python worker). Object stores' latency is what the threads overlap."""


def write(
    df: DataFrame,
    uri: str,
    mode: str = "append",
    *,
    where: str | Expr | None = None,
    require_match: bool = True,
    storage_options: dict[str, str] | None = None,
    write_options: WriteOptions | None = None,
) -> CommitInfo | None:
    """Append ``df`` to the table at ``uri`` (created when missing) or, with
    ``mode="overwrite"``, replace every row (or the rows matching ``where``) with it, in one
    commit. With ``where``, every row of ``df`` must satisfy it, as for ``Table.overwrite``
    (``require_match=False``: written all the same). Returns the commit, or None when the
    write went through the Python data source (whose commit Spark does not hand back: see
    ``Table.history()``)."""
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {list(MODES)}, not {mode!r}")
    if write_options is not None and not isinstance(write_options, WriteOptions):
        raise InvalidArgumentError(f"write_options must be a WriteOptions, not {type(write_options).__name__}")
    location = TableLocation.of(uri, storage_options)
    target = TableCommit(
        location, df.schema, mode == "overwrite", to_expr(where), check_bool("require_match", require_match)
    )
    spark = df.sparkSession
    if not native_writable(target.table_schema):
        report_fallback(
            location,
            "write-types",
            "Spark's Parquet writer cannot write this table's schema "
            "one to one (NOT NULL, nested, unsigned, non-UTC or non-microsecond columns)",
        )
        _data_source_write(df, location, mode, where, require_match)
        return None
    if not native_reachable(spark, location):
        _data_source_write(df, location, mode, where, require_match)
        return None
    options = write_options or WriteOptions()
    frame = conform(df, target.table_schema)
    if target.sort_by:  # the sort_by property: each task's rows sorted, as an append sorts its batch
        frame = frame.sortWithinPartitions(*[quoted(name) for name in target.sort_by])
    files = [file for _, file in write_staged(frame, location, target.fields, options, target.bloom_filter_columns)]
    try:
        return target.commit(files)
    except BaseException:
        target.abort(f.path for f in files)
        raise


def write_staged(
    frame: DataFrame,
    location: TableLocation,
    fields: FieldIds,
    options: WriteOptions,
    bloom_filter_columns: Sequence[str] = (),
    partition_by: str | None = None,
) -> list[tuple[str, DataFile]]:
    """Steps 2 and 3: Spark writes ``frame`` (already conformed to ``fields.schema``), the
    driver gathers and renames its files. Returns each file with the staging subdirectory it
    was written to (``<partition_by>=<value>``, or "" without ``partition_by``). Files
    without rows are dropped. Nothing is left behind on failure. The files carry each
    column's field id (Spark writes a column's ``parquet.field.id`` metadata as its Parquet
    field id) under its physical name (what Delta mirrors' readers match, docs/mirrors.md),
    and a bloom filter per row group of each of ``bloom_filter_columns`` (the table's
    property, ``bloom_options``)."""
    schema = fields.schema
    frame = _as_stored(frame, fields)
    store = location.store()
    fs, root = _filesystem(store)
    staging = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    moved: list[str] = []
    try:
        # "error", not its synonym "errorifexists", which Spark Connect's client rejects
        writer = (
            frame.write.mode("error")
            .options(**hadoop_options(location))
            .option("compression", options.compression)
            .option("maxRecordsPerFile", MAX_FILE_ROWS)
            .option("parquet.block.size", options.row_group_size)
            .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
            .options(**bloom_options(fields, bloom_filter_columns))
        )
        if partition_by is not None:
            writer = writer.partitionBy(partition_by)
        with _microsecond_timestamps(frame.sparkSession):
            writer.parquet(hadoop_path(location, staging))
        selector = pafs.FileSelector(f"{root}/{staging}", recursive=True)
        produced = [
            info.path[len(root) + 1 :]
            for info in fs.get_file_info(selector)
            if info.is_file and info.base_name.endswith(".parquet") and not info.base_name.startswith(("_", "."))
        ]
        io = FileIO(store)
        with ThreadPoolExecutor(_FOOTER_THREADS) as pool:
            files = list(
                pool.map(
                    lambda key: data_file_from_footer(io, key, schema, new_data_key(), fields.physical_names), produced
                )
            )
        found = []
        for key, file in zip(produced, files):
            if file.rows:
                _move(fs, f"{root}/{key}", f"{root}/{file.path}")
                moved.append(file.path)
                found.append((key[len(staging) + 1 :].rpartition("/")[0], file))
        return found
    except BaseException:
        store.delete_unreferenced(moved)
        raise
    finally:
        _delete_dir(fs, f"{root}/{staging}")


def bloom_options(fields: FieldIds, columns: Sequence[str]) -> dict[str, str]:
    """parquet-mr's options for a bloom filter of each of ``columns`` (by their physical
    names) at the rate our writer sizes them for (``BLOOM_FPP``). Adaptive: parquet-mr sizes
    each row group's filter for the distinct values it holds, picking among candidate sizes
    up to 1 MiB (``BLOOM_CANDIDATES``), as our writer sizes them for the first row group's
    rows (without it every filter would take the 1 MiB maximum)."""
    physical = dict(zip(fields.schema.names, fields.physical_names))
    options: dict[str, str] = {}
    for name in columns:
        if name in physical:
            column = physical[name]
            options[f"parquet.bloom.filter.enabled#{column}"] = "true"
            options[f"parquet.bloom.filter.fpp#{column}"] = str(BLOOM_FPP)
            options[f"parquet.bloom.filter.candidates.number#{column}"] = str(BLOOM_CANDIDATES)
    if options:
        options["parquet.bloom.filter.adaptive.enabled"] = "true"
    return options


BLOOM_CANDIDATES = 10
"""parquet-mr's candidate filter sizes: halvings of its 1 MiB maximum, down to 2 KiB here
(its default of 5 stops at 64 KiB, four times what a 16k-row group needs)."""


def conform(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """``df`` with the table's column order and types (lossless widening only, checked
    before). Spark writes a column NOT NULL where its optimiser proves it (a literal,
    ``range()``), whatever the analysed schema says: the files' nullability is left to it,
    and a NOT NULL file column is accepted for a nullable table column
    (``footer_stats``)."""
    return df.to(spark_schema(schema))


def _as_stored(frame: DataFrame, fields: FieldIds) -> DataFrame:
    """``frame``'s table columns under their physical names, with their field ids; any other
    column (the one a write is partitioned by) as it is."""
    stored = {f.name: (physical, fid) for f, physical, fid in zip(fields.schema, fields.physical_names, fields.ids)}
    columns = []
    for name in frame.columns:
        column = quoted(name)
        if name in stored:
            physical, fid = stored[name]
            column = column.alias(physical, metadata={"parquet.field.id": fid})
        columns.append(column)
    return frame.select(*columns)


@contextmanager
def _microsecond_timestamps(spark: Any) -> Iterator[None]:
    """Spark writes timestamps as INT96 by default, which pyarrow reads as nanoseconds; the
    table's are microseconds. The setting is the session's (no writer option exists for it),
    so it is set for the write and restored afterwards."""
    key = "spark.sql.parquet.outputTimestampType"
    before = spark.conf.get(key)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def _filesystem(store: Any) -> tuple[pafs.FileSystem, str]:
    found = store.arrow_filesystem()
    if found is None:  # native_reachable only passes locations with a filesystem
        raise InvalidArgumentError(f"{store!r} has no filesystem Spark could write to")
    return found


def _move(fs: pafs.FileSystem, source: str, target: str) -> None:
    """A rename, or a copy and a delete where the store has no rename (Azure accounts without a
    hierarchical namespace: pyarrow's ``move`` is not implemented there, arrow/issues/40405).
    ``target`` is a fresh unique name, and a failure removes the staging directory. On such
    accounts Hadoop's ABFS marks each folder it creates with an empty blob of the folder's name
    (``data``, metadata ``hdi_isfolder``), which pyarrow's copy takes for a file in the way: an
    empty object where ``data/`` is can only be such a marker, and the folder stays without it."""
    try:
        fs.move(source, target)
    except NotImplementedError:
        parent = target.rsplit("/", 1)[0]
        marker = fs.get_file_info(parent)
        if marker.type == pafs.FileType.File and marker.size == 0:
            fs.delete_file(parent)
        fs.copy_file(source, target)
        fs.delete_file(source)


def _delete_dir(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_dir(path)  # recursively, on every pyarrow filesystem
    except FileNotFoundError:
        pass


def _data_source_write(
    df: DataFrame, location: TableLocation, mode: str, where: str | Expr | None, require_match: bool
) -> None:
    from . import register

    register(df.sparkSession)
    writer = df.write.format("manifest_table").mode(mode).options(**(location.storage_options or {}))
    if where is not None:
        writer = writer.option("where", str(to_expr(where))).option("requireMatch", str(require_match).lower())
    writer.save(location.uri)
    return None

"""Table operations whose data work is spread over Spark, committed once by the driver.

The driver plans from the manifest; Spark does the data-sized work; the driver commits the
results once, with the usual conflict handling against concurrent writers. The work runs on
Spark's own Parquet path (``native_delete``, ``native_compact``: no SparkContext, so Spark
Connect works too). Where Spark cannot read the table natively, executors run the code the
Python API runs (``Scan``, ``rewrite_group``) on groups of files, which needs a classic
session's SparkContext."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

from pyroaring import BitMap

from ..arguments import Size, check_size
from ..clock import Stamp
from ..commit import CommitInfo
from ..commit.changes import Rewrite
from ..data.scan import Scan, Snapshot
from ..data.tombstones import DeletionVectors
from ..data.write import WriteOptions
from ..errors import InvalidFilterError
from ..expressions import Expr, to_expr
from ..format.manifest import DataFile
from ..log.version import Version
from ..operations.compaction import CompactionGroup, commit_compaction, plan_compaction, rewrite_group
from ..operations.purge import commit_purge, plan_purge
from ..table import Table
from .native_compact import rewrite_groups
from .native_delete import matching_positions
from .native_read import native_readable_snapshot
from .options import DEFAULT_MAX_PARTITION_BYTES, TableLocation
from .planning import group_files
from .read_files import scan_files
from .schema import native_writable
from .workers import check_python_workers

T = TypeVar("T")
R = TypeVar("R")


def delete(spark: Any, uri: str, where: str | Expr, *, storage_options: dict[str, str] | None = None) -> CommitInfo:
    """Delete the rows matching ``where``: Spark finds the matching live row positions of each
    candidate file (``native_delete``; executors running ``Scan`` where Spark cannot read the
    table), the driver commits one tombstone set. Returns the commit (with
    ``committed=False`` when no row matched)."""
    expr = to_expr(where)
    if expr is None:
        raise InvalidFilterError("delete needs a condition")
    location = TableLocation.of(uri, storage_options)
    with location.open().transaction() as tx:
        tx.delete_positions(_matching(spark, location, tx.scan(columns=[], where=expr)))
        return tx.commit()


def _matching(spark: Any, location: TableLocation, scan: Scan) -> dict[str, BitMap]:
    """The live positions of the rows ``scan`` (with a condition) selects, per file, found on Spark."""
    bound = scan.where
    assert bound is not None  # (expr, bound to the schema)
    if native_readable_snapshot(spark, location, scan.snapshot):
        return matching_positions(spark, location, scan.snapshot, scan.plan_files(), bound)
    task = partial(_matching_positions, location, scan.version, scan.snapshot.fields, bound)
    groups = group_files(scan.plan_files(), spark.sparkContext.defaultParallelism, DEFAULT_MAX_PARTITION_BYTES)
    return {path: BitMap.deserialize(blob) for path, blob in run_tasks(spark, groups, task)}


def _matching_positions(
    location: TableLocation, version: int, fields: Any, where: Expr, files: Sequence[DataFile]
) -> Iterator[tuple[str, bytes]]:
    scan = scan_files(location, version, fields, files, [], where)
    for file, positions in scan.matching_positions():
        yield file.path, positions.serialize()


def compact(
    spark: Any,
    uri: str,
    target_file_size: Size | None = None,
    min_deleted_fraction: float = 0.2,
    *,
    storage_options: dict[str, str] | None = None,
) -> CommitInfo:
    """``Table.compact`` with the rewriting spread out: the driver plans the groups from the
    manifest (on a table with ``cluster_by``, the clustering merge), Spark rewrites each group
    into its output files, the driver commits all outputs once. The guarantees are
    ``Table.compact``'s: a delete committed meanwhile is remapped onto the outputs, a
    conflicting commit makes this one fail with ``CommitConflictError`` and its outputs are
    removed. If the Spark job fails, nothing is committed."""
    location = TableLocation.of(uri, storage_options)
    table = location.open()
    target = (
        table.write_options.target_file_size
        if target_file_size is None
        else check_size("target_file_size", target_file_size)
    )
    started = Stamp.now()  # before any output is written: the commit's deadline counts from it
    base, pointer = table.log.latest()  # commit_compaction builds on this manifest and pointer
    groups = plan_compaction(base, target, min_deleted_fraction)
    return commit_compaction(
        table,
        base,
        pointer,
        _rewrite_groups(spark, location, table, base, groups),
        {"target_file_size": target, "min_deleted_fraction": min_deleted_fraction, "engine": "spark"},
        started,
    )


def purge(
    spark: Any, uri: str, where: str | Expr | None = None, *, storage_options: dict[str, str] | None = None
) -> CommitInfo:
    """``Table.purge`` with the data work on Spark: Spark finds the rows matching ``where``
    (as ``delete`` does) and rewrites every file holding a deleted row, the driver commits
    once (operation ``purge``; see docs/operations.md, "Erasing data physically")."""
    expr = to_expr(where)
    location = TableLocation.of(uri, storage_options)
    table = location.open()
    started = Stamp.now()
    base, pointer = table.log.latest()
    dvs = DeletionVectors(table.store)
    snapshot = Snapshot.of(base, table.store, deletes=dvs)
    matched = _matching(spark, location, Scan(snapshot, table.io, [], expr)) if expr is not None else {}
    plan = plan_purge(table, base, dvs, matched)
    results = _rewrite_groups(spark, location, table, base, plan.groups)
    return commit_purge(table, base, pointer, plan, results, expr is not None, started, {"engine": "spark"})


def _rewrite_groups(
    spark: Any, location: TableLocation, table: Table, base: Version, groups: Sequence[CompactionGroup]
) -> list[tuple[list[DataFile], Rewrite]]:
    """Every group rewritten on Spark: on its own Parquet path where it can read and write the
    table, else by executors running ``rewrite_group``, as a clustering group always is (its
    order is the curve's, computed by our code: data/curve.py)."""
    snapshot = Snapshot.of(base, table.store)
    native = native_writable(base.schema) and bool(groups) and native_readable_snapshot(spark, location, snapshot)
    plain = [g for g in groups if native and not g.order]
    tasks = [g for g in groups if not (native and not g.order)]
    return rewrite_groups(spark, location, plain, table.write_options) + run_tasks(
        spark, tasks, partial(_rewrite, location, table.write_options)
    )


def _rewrite(
    location: TableLocation, options: WriteOptions, group: CompactionGroup
) -> Iterator[tuple[list[DataFile], Rewrite]]:
    table = location.open(options)
    yield rewrite_group(table, group, DeletionVectors(table.store))


def run_tasks(spark: Any, items: Sequence[T], task: Callable[[T], Iterable[R]]) -> list[R]:
    """Run ``task`` on each item as its own Spark task; the results, collected on the driver."""
    if not items:
        return []
    check_python_workers(spark)
    return spark.sparkContext.parallelize(items, len(items)).flatMap(task).collect()

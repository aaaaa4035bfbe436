"""Compaction: rewrite small files and files with many deleted rows into fewer, clean files;
on a table with ``cluster_by``, cluster new data into the table's layout instead.

The work is split so that a distributed engine can run it: ``plan_compaction`` (driver,
from the manifest alone), ``rewrite_group`` (anywhere: a pure function of picklable inputs
and a store) and ``commit_compaction`` (driver, one commit). Each group's sources' live rows,
in order (or, for a clustering group, ordered along the curve: data/curve.py), are cut in
order into output files of about the target size (usually one per group, several when the
rows exceed it), and ``rewrite_record`` records how many rows each output holds (and the
columns a clustering group was ordered by), so a delete that commits concurrently can be
remapped onto the right output (``conflicts.remap``) instead of being lost. Every engine's
rewrite ends in ``rewrite_record``, which checks that the outputs hold exactly the group's
live rows. Which files a clustering compaction takes is planned in clustering.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from ..arguments import Size, check_int, check_number, check_size
from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import CURVE, Changes, Rewrite, RewriteOutput, RewriteSource
from ..data.curve import curve_order
from ..data.scan import Scan, Snapshot
from ..data.tombstones import DeletionVectors
from ..data.write import MAX_FILE_ROWS, write_data_files
from ..errors import CorruptTableError, InvalidArgumentError
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..format.pointer import Pointer
from ..format.properties import BLOOM_FILTER_COLUMNS, CLUSTER_BY
from ..handle import TableHandle
from ..log.version import Version, locate
from ..storage import FileIO
from .clustering import cluster_field_ids, plan_merges

logger = logging.getLogger("manifest_table.maintenance")

SMALL_FILE_FRACTION = 0.75
"""A file smaller than this fraction of the target size is worth merging with others."""


@dataclass(frozen=True)
class CompactionGroup:
    """Files rewritten together, in manifest order, as of snapshot ``version``, into outputs
    of about ``target_file_size`` bytes (``output_rows``). Their ``deletes`` references are
    the bitmaps the rewrite drops rows by."""

    files: tuple[DataFile, ...]
    fields: FieldIds = field(compare=False)
    """The version's schema and field ids: outputs are written in the current schema."""
    version: int
    target_file_size: int
    order: tuple[int, ...] = ()
    """Field ids of the columns a clustering group orders its rows by (data/curve.py);
    empty: the sources' order is kept."""
    run: int | None = None
    """The clustering run the outputs belong to (``DataFile.cluster_run``)."""
    bloom_filter_columns: tuple[str, ...] = ()
    """The version's property of that name: the outputs keep bloom filters of these."""

    @property
    def schema(self) -> pa.Schema:
        return self.fields.schema

    @property
    def live_rows(self) -> int:
        return sum(f.live_rows for f in self.files)

    @property
    def output_rows(self) -> int:
        """Rows per output file, for every engine: the live rows cut evenly into as many
        outputs as their estimated bytes make targets, rounded (at least one). A group packed
        to fit the target gives one output however its bytes come out; a big file with many
        deletes gives outputs of 0.75 to 1.5 targets, never the small remainder that cutting
        by bytes leaves (which the next run would merge again)."""
        outputs = max(1, round(sum(_live_bytes(f) for f in self.files) / self.target_file_size))
        return max(1, -(-self.live_rows // outputs))


def _live_bytes(f: DataFile) -> float:
    """What ``f``'s live rows take in Parquet, estimated from its size."""
    return f.size * f.live_rows / f.rows if f.rows else 0.0


def plan_compaction(manifest: Version, target_file_size: int, min_deleted_fraction: float) -> list[CompactionGroup]:
    """Groups to rewrite, from the manifest alone (no data is read).

    Candidates are files smaller than ``SMALL_FILE_FRACTION * target_file_size`` and files
    with deleted rows (fully deleted ones included: their group writes nothing for them):
    at least ``min_deleted_fraction`` of their rows, any when it is 0. Candidates are packed
    next-fit in manifest order, which is linear and keeps neighbouring (usually co-written)
    files together, into groups whose estimated live bytes fit the target and whose rows fit
    the 32-bit row positions. A lone file is rewritten only when its deletes justify it:
    rewriting one small clean file would change nothing. A table with ``cluster_by`` is
    planned by ``_plan_clustering`` instead."""
    check_int("target_file_size", target_file_size, minimum=1)
    if not 0 <= check_number("min_deleted_fraction", min_deleted_fraction) <= 1:
        raise InvalidArgumentError(
            f"min_deleted_fraction must be in [0, 1] (0: any deleted row), not {min_deleted_fraction}"
        )

    def heavy(f: DataFile) -> bool:
        return f.rows == 0 or (f.deleted_rows > 0 and f.deleted_rows / f.rows >= min_deleted_fraction)

    if manifest.properties[CLUSTER_BY]:
        return _plan_clustering(manifest, target_file_size, heavy)
    small = SMALL_FILE_FRACTION * target_file_size
    blooms = manifest.properties[BLOOM_FILTER_COLUMNS]
    bins: list[list[DataFile]] = []
    size, rows = 0.0, 0
    for f in manifest.files:
        if not (heavy(f) or f.size < small):
            continue
        if not bins or size + _live_bytes(f) > target_file_size or rows + f.live_rows > MAX_FILE_ROWS:
            bins.append([])
            size, rows = 0.0, 0
        bins[-1].append(f)
        size += _live_bytes(f)
        rows += f.live_rows
    return [
        CompactionGroup(tuple(b), manifest.fields, manifest.version, target_file_size, bloom_filter_columns=blooms)
        for b in bins
        if len(b) > 1 or heavy(b[0])
    ]


def _plan_clustering(
    manifest: Version, target_file_size: int, heavy: Callable[[DataFile], bool]
) -> list[CompactionGroup]:
    """The merges ``clustering.plan_merges`` picks, each a group ordered along the curve,
    then each other file with deletes worth dropping rewritten on its own, in order, so that
    it keeps its place (and run) in the layout."""
    columns = manifest.properties[CLUSTER_BY]
    live = [f for f in manifest.files if f.live_rows]
    order = cluster_field_ids(manifest.fields, columns)
    merges = plan_merges(live, manifest.fields, columns, target_file_size)
    taken = {f.path for merge in merges for f in merge.files}
    blooms = manifest.properties[BLOOM_FILTER_COLUMNS]
    return [
        CompactionGroup(merge.files, manifest.fields, manifest.version, target_file_size, order, merge.run, blooms)
        for merge in merges
    ] + [
        CompactionGroup(
            (f,), manifest.fields, manifest.version, target_file_size, run=f.cluster_run, bloom_filter_columns=blooms
        )
        for f in manifest.files
        if f.path not in taken and heavy(f)
    ]


def rewrite_group(handle: TableHandle, group: CompactionGroup, dvs: DeletionVectors) -> tuple[list[DataFile], Rewrite]:
    """Write the group's live rows, in order (a clustering group's along the curve), into new
    data files of ``group.output_rows`` rows (none when no row is live), and describe how
    their positions map back to the sources. Only ``handle.io`` and ``handle.write_options``
    are used, so this runs wherever a table handle can be opened."""
    snapshot = Snapshot(group.version, group.schema, group.files, dvs.of, fields=group.fields)
    batches = Scan(snapshot, handle.io).to_batches()
    if group.order:
        rows = pa.Table.from_batches(list(batches), group.schema)
        names = dict(zip(group.fields.ids, group.schema.names))
        batches = rows.take(curve_order([rows.column(names[fid]) for fid in group.order])).to_batches()
    outputs = write_data_files(
        handle.io,
        batches,
        group.schema,
        handle.write_options,
        field_ids=group.fields.ids,
        file_rows=group.output_rows,
        physical_names=group.fields.physical_names,
        bloom_filter_columns=group.bloom_filter_columns,
    )
    try:
        return rewrite_record(handle.io, group, outputs)
    except BaseException:
        handle.store.delete_unreferenced(f.path for f in outputs)
        raise


def rewrite_record(io: FileIO, group: CompactionGroup, outputs: Sequence[DataFile]) -> tuple[list[DataFile], Rewrite]:
    """The outputs (in the group's clustering run) and the record of ``group`` rewritten into
    ``outputs``, which hold its sources' live rows in order (or along the curve), cut in
    order. Outputs holding another number of rows are refused before
    anything commits: ``CorruptTableError`` if a source's Parquet footer disagrees with the
    manifest's row count (a damaged object, which an engine reading the files itself does
    not check), else ``RuntimeError`` (the rewrite itself went wrong: a bug)."""
    written = sum(f.rows for f in outputs)
    if written != group.live_rows:
        for f in group.files:
            rows = io.read_parquet(f.path, f.size, lambda source: source.metadata.num_rows)
            if rows != f.rows:
                raise CorruptTableError(
                    f"{f.path}: its Parquet footer has {rows} rows, the manifest's rows field says {f.rows}"
                )
        raise RuntimeError(
            f"compacting {len(group.files)} files of version {group.version}: the rewrite wrote "
            f"{written} rows into {len(outputs)} files, but the manifest counts {group.live_rows} "
            "live rows in those sources; nothing was committed"
        )
    return [replace(f, cluster_run=group.run) for f in outputs], Rewrite(
        tuple(RewriteOutput(f.path, f.rows) for f in outputs),
        tuple(RewriteSource(f.path, f.rows, f.deletes) for f in group.files),
        group.order,
        CURVE if group.order else "",
    )


def commit_compaction(
    handle: TableHandle,
    base_manifest: Version,
    pointer: Pointer,
    results: Sequence[tuple[Sequence[DataFile], Rewrite]],
    parameters: dict[str, Any],
    started: Stamp | None = None,
    operation: str = "compact",
    metrics: dict[str, int] | None = None,
) -> CommitInfo:
    """Replace every group's sources by its outputs in one commit on ``base_manifest`` (the
    version ``pointer`` named when planning). Concurrent deletes on the sources are remapped
    onto the outputs while rebasing; a concurrent commit that removed a source raises
    ``CommitConflictError`` (the outputs are then removed). ``rows_dropped`` counts the rows
    the rewrites left out: deleted ones, and those a purge deleted itself (``metrics``: the
    purge's own, added to the commit's)."""
    changes = Changes(operation=operation, parameters=dict(parameters))
    for outputs, rewrite in results:
        changes.added.extend(outputs)
        changes.removed.update(src.path for src in rewrite.sources)
        changes.rewrites.append(rewrite)
    if not changes.removed:
        return CommitInfo(
            base_manifest.version,
            operation,
            base_manifest.timestamp,
            None,
            {"files_removed": 0, "files_added": 0},
            dict(parameters),
            committed=False,
        )
    sources = [f for f, _ in locate(base_manifest, changes.removed).values()]
    changes.metrics = {
        "files_removed": len(sources),
        "files_added": len(changes.added),
        "rows_rewritten": sum(f.rows for f in changes.added),
        "rows_dropped": sum(src.rows - src.live_rows for rw in changes.rewrites for src in rw.sources),
        "bytes_removed": sum(f.size for f in sources),
        "bytes_added": sum(f.size for f in changes.added),
        **(metrics or {}),
    }
    return commit(handle.log, base_manifest, pointer, changes, handle.commit_options, started)


def compact(handle: TableHandle, target_file_size: Size | None = None, min_deleted_fraction: float = 0.2) -> CommitInfo:
    """Plan, rewrite and commit a compaction of the latest version (see ``Table.compact``)."""
    target = (
        handle.write_options.target_file_size
        if target_file_size is None
        else check_size("target_file_size", target_file_size)
    )
    started = Stamp.now()
    base, pointer = handle.log.latest()
    groups = plan_compaction(base, target, min_deleted_fraction)
    logger.info(
        "%s: compacting version %d: %d files in %d groups",
        handle.uri,
        base.version,
        sum(len(g.files) for g in groups),
        len(groups),
    )
    dvs = DeletionVectors(handle.store)
    results: list[tuple[list[DataFile], Rewrite]] = []
    try:
        for i, group in enumerate(groups, 1):
            results.append(rewrite_group(handle, group, dvs))
            logger.info(
                "%s: rewrote group %d/%d (%d files, %d live rows)",
                handle.uri,
                i,
                len(groups),
                len(group.files),
                group.live_rows,
            )
    except BaseException:
        handle.store.delete_unreferenced(f.path for outputs, _ in results for f in outputs)
        raise
    info = commit_compaction(
        handle,
        base,
        pointer,
        results,
        {"target_file_size": target, "min_deleted_fraction": min_deleted_fraction},
        started,
    )
    if info.committed:
        logger.info("%s: compaction committed as version %d: %s", handle.uri, info.version, info.metrics)
    return info

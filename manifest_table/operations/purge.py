"""Purge: rewrite every live file that holds a deleted row, after deleting the rows matching
``where``, in one commit, so that no live file of the new version holds a deleted row. With
garbage collection after it, a deleted value is physically gone (docs/operations.md,
"Erasing data physically").

1. From the latest version, the live rows matching ``where`` (a scan of the candidate files
   with their positions, as ``delete`` finds them: data/scan.py).
2. Each file holding a deleted row, committed or matched, is rewritten on its own and in
   order (``rewrite_group``), so a file keeps its place (and run) in a clustered layout.
   What it drops, its committed positions with the matched ones, is written as one
   tombstone object that its ``Rewrite`` record references, exactly as a compaction's record
   references the bitmaps it dropped: a delete committed meanwhile is remapped onto the
   outputs as for any compaction (commit/conflicts.py), and the change feed reads the
   matched rows as deleted (feed/plan.py).
3. One commit with operation ``purge`` (``commit_compaction``). The condition is not
   recorded in the version's parameters: it may hold the very values being erased.
Rows a concurrent append adds are not erased (as with ``delete``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyroaring import BitMap

from ..clock import Stamp
from ..commit import CommitInfo
from ..commit.changes import Rewrite
from ..data.scan import Scan, Snapshot
from ..data.tombstones import DeletionVectors, write_tombstone
from ..expressions import Expr, to_expr
from ..format.manifest import DataFile
from ..format.pointer import Pointer
from ..format.properties import BLOOM_FILTER_COLUMNS
from ..handle import TableHandle
from ..log.version import Version
from .compaction import CompactionGroup, commit_compaction, rewrite_group


def purge(handle: TableHandle, where: str | Expr | None = None) -> CommitInfo:
    """See ``Table.purge``."""
    expr = to_expr(where)
    started = Stamp.now()
    base, pointer = handle.log.latest()
    dvs = DeletionVectors(handle.store)
    matched = _matching(handle, base, dvs, expr) if expr is not None else {}
    plan = plan_purge(handle, base, dvs, matched)
    results: list[tuple[list[DataFile], Rewrite]] = []
    try:
        results.extend(rewrite_group(handle, group, dvs) for group in plan.groups)
    except BaseException:
        handle.store.delete_unreferenced([f.path for outputs, _ in results for f in outputs] + plan.tombstones)
        raise
    return commit_purge(handle, base, pointer, plan, results, expr is not None, started)


@dataclass(frozen=True)
class PurgePlan:
    """Step 2: one group per file to rewrite, and the tombstone objects written for them."""

    groups: list[CompactionGroup]
    tombstones: list[str]
    matched: int
    """Rows ``where`` matched: the purge deletes them."""


def plan_purge(handle: TableHandle, base: Version, dvs: DeletionVectors, matched: dict[str, BitMap]) -> PurgePlan:
    """Step 2 for the rows ``matched`` (live positions per file of ``base``): every file with
    a deleted row, as a group of its own whose deletes are the positions it drops."""
    files = [f for f in base.files if f.deleted_rows or f.path in matched]
    dropped = {f.path: dvs.of(f) | matched.get(f.path, BitMap()) for f in files}
    refs = write_tombstone(handle.store, dropped) if dropped else {}
    target = handle.write_options.target_file_size
    groups = [
        CompactionGroup(
            (replace(f, deletes=refs[f.path]),),
            base.fields,
            base.version,
            target,
            run=f.cluster_run,
            bloom_filter_columns=base.properties[BLOOM_FILTER_COLUMNS],
        )
        for f in files
    ]
    return PurgePlan(groups, sorted({ref.path for ref in refs.values()}), sum(map(len, matched.values())))


def commit_purge(
    handle: TableHandle,
    base: Version,
    pointer: Pointer,
    plan: PurgePlan,
    results: Sequence[tuple[Sequence[DataFile], Rewrite]],
    conditional: bool,
    started: Stamp,
    parameters: dict[str, Any] | None = None,
) -> CommitInfo:
    """Step 3 (``conditional``: a ``where`` was given). A commit that fails removes the
    outputs (the commit loop); the plan's tombstone objects are left to GC, as a crashed
    writer's are."""
    recorded = {**(parameters or {}), **({"where": "(not recorded)"} if conditional else {})}
    erased = {"rows_deleted": plan.matched} if conditional else {}
    return commit_compaction(handle, base, pointer, results, recorded, started, "purge", erased)


def _matching(handle: TableHandle, base: Version, dvs: DeletionVectors, where: Expr) -> dict[str, BitMap]:
    """The live rows of ``base`` that match ``where``, per file."""
    snapshot = Snapshot.of(base, handle.store, deletes=dvs)
    found = Scan(snapshot, handle.io, [], where).matching_positions()
    return {f.path: positions for f, positions in found if positions}

"""Repair: a version of the table without the objects its latest version references that are
gone (docs/operations.md, "Repair"). A version that references a missing object reads as
``CorruptTableError`` (log/version_log.py, ``object_missing``); this is the way back.

1. Read the latest version and list what the store holds under ``segments/``, ``data/`` and
   ``tombstones/``. A referenced key the listing lacks is confirmed missing with a HEAD (a
   listing may lag behind a create), so nothing is dropped for a store's hiccup.
2. What is lost: a data file that is gone (its live rows); a data file whose deletion vector's
   tombstone object is gone (its live rows too: which of its rows were deleted is unknown, and
   keeping it would bring deleted rows back); a segment that is gone, with every entry it held
   (its summary's counts, as the root recorded them).
3. Unless ``dry_run``, one commit (``repair``) drops them, through the commit loop like any
   writer (a concurrent commit that removed or deleted from the same files makes it fail with
   ``CommitConflictError``: run it again). The report names every lost file with its rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arguments import check_bool
from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import Changes
from ..format.keys import DATA_PREFIX, SEGMENT_PREFIX, TOMBSTONE_PREFIX
from ..handle import TableHandle
from ..wording import count

_SHOWN = 20


@dataclass(frozen=True)
class LostFile:
    path: str
    rows: int
    """Live rows it held, as the version recorded them."""
    missing: str
    """The key that is gone: the file itself, its tombstone, or the segment listing it."""


@dataclass
class RepairReport:
    uri: str
    dry_run: bool
    version: int
    """The version that was checked."""
    lost: list[LostFile] = field(default_factory=list)
    """Every file the repair drops (would drop), with its live rows."""
    lost_segments: dict[str, int] = field(default_factory=dict)
    """Segments that are gone -> live rows their entries held (their files are unknown)."""
    commit: CommitInfo | None = None
    """The repair's commit (None: a dry run, or nothing was missing)."""

    @property
    def rows_lost(self) -> int:
        return sum(f.rows for f in self.lost) + sum(self.lost_segments.values())

    @property
    def damaged(self) -> bool:
        return bool(self.lost or self.lost_segments)

    def __str__(self) -> str:
        if not self.damaged:
            return f"{self.uri}: version {self.version} references no missing object; nothing to repair"
        verb = "would drop" if self.dry_run else "dropped"
        what = [count(len(self.lost), "file")] + (
            [count(len(self.lost_segments), "segment")] * bool(self.lost_segments)
        )
        lines = [
            f"{self.uri}: version {self.version} references missing objects; {verb} "
            f"{' and '.join(what)}: {count(self.rows_lost, 'row')} lost"
        ]
        if self.commit is not None:
            lines.append(f"  committed as version {self.commit.version}")
        lines += [
            f"  {f.path}: {count(f.rows, 'row')} ({'missing' if f.missing == f.path else f'{f.missing} is missing'})"
            for f in self.lost[:_SHOWN]
        ]
        if len(self.lost) > _SHOWN:
            lines.append(f"  and {len(self.lost) - _SHOWN} more files")
        lines += [f"  {key}: a segment holding {count(rows, 'row')}" for key, rows in self.lost_segments.items()]
        if self.dry_run:
            lines.append("  (dry run: nothing was committed; run repair without --dry-run to commit it)")
        return "\n".join(lines)


def repair(handle: TableHandle, dry_run: bool = False) -> RepairReport:
    """See ``Table.repair``."""
    check_bool("dry_run", dry_run)
    started = Stamp.now()
    base, pointer = handle.log.latest()
    report = RepairReport(handle.uri, dry_run, base.version)
    summaries = base.index.segments if base.index is not None else ()
    segments = _stored(handle, {s.path for s in summaries}, SEGMENT_PREFIX)
    report.lost_segments = {s.path: s.rows - s.deleted for s in summaries if s.path not in segments}
    deletes = base.index.deletes if base.index is not None else {}
    files = [f for s in summaries if s.path in segments for f in base.segment(s.path).files(None, deletes)]
    files += base.tail
    keys = {f.path for f in files} | {f.deletes.path for f in files if f.deletes}
    stored = _stored(handle, keys, DATA_PREFIX) | _stored(handle, keys, TOMBSTONE_PREFIX)
    for f in files:
        gone = [key for key in (f.path, f.deletes.path if f.deletes else None) if key and key not in stored]
        if gone:
            report.lost.append(LostFile(f.path, f.live_rows, gone[0]))
    if not report.damaged or dry_run:
        return report
    changes = Changes(
        operation="repair",
        removed={f.path for f in report.lost},
        dropped_segments=set(report.lost_segments),
        parameters={"lost": [f.path for f in report.lost], "lost_segments": sorted(report.lost_segments)},
        metrics={"files_lost": len(report.lost), "rows_lost": report.rows_lost},
    )
    report.commit = commit(handle.log, base, pointer, changes, handle.commit_options, started)
    return report


def _stored(handle: TableHandle, keys: set[str], prefix: str) -> set[str]:
    """Those of ``keys`` under ``prefix`` that the store holds: one LIST, then a HEAD for each
    key the listing lacks (a cached copy proves nothing: the object may be gone since)."""
    keys = {key for key in keys if key.startswith(prefix)}
    listed = {info.key for info in handle.store.list(prefix)} if keys else set()
    return {key for key in keys if key in listed or handle.store.head(key) is not None}

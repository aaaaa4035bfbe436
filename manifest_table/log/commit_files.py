"""What one commit did to a table's files, derived from its manifest and its parent's
(DESIGN.md 19: changes are derived, not written). Streaming reads plan micro-batches from
it (spark/stream_plan.py), and a change feed reads the same facts: the rows a commit added
are the live rows of the files it added, the rows it removed are those of the files it
stopped listing, and the rows it deleted are the positions newly set in a bitmap."""

from __future__ import annotations

from dataclasses import dataclass

from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from .version import Version, diff, locate
from .version_log import VersionLog


@dataclass(frozen=True)
class CommitFiles:
    """The file changes of commit ``version``. Entries are as the version that lists them
    holds them: ``added`` and ``deleted_in`` with their deletes at ``version``, ``removed``
    with theirs at the parent."""

    version: int
    operation: str
    timestamp_ms: int
    fields: FieldIds
    """The version's schema and field ids."""
    added: tuple[DataFile, ...]
    """Files this commit added, in the order the version lists them."""
    removed: tuple[DataFile, ...]
    """Files of the parent this commit no longer lists."""
    deleted_in: tuple[tuple[DataFile, DataFile], ...]
    """Files of both whose deletion bitmaps differ: (parent's entry, this version's entry)."""
    rewrite: bool
    """A compaction: the files it removed and added hold the same live rows."""

    @property
    def appends_only(self) -> bool:
        """No row that was live before this commit was deleted or replaced (a compaction
        moves rows; dropping a file whose rows were all deleted already removes none)."""
        return self.rewrite or not (self.deleted_in or any(f.live_rows for f in self.removed))


def commit_files(log: VersionLog, version: int) -> CommitFiles:
    """The file changes of ``version``: reads its manifest and its parent's (only the
    segments one has and the other lacks). ``VersionExpiredError`` when garbage collection
    removed either."""
    after = log.manifest(version)
    if version == 0:
        return _commit(after, added=tuple(after.files), removed=(), deleted_in=())
    before = log.manifest(version - 1)
    changed = diff(before, after)
    changed_paths = sorted(changed.gone | changed.touched)
    parent = {path: entry for path, (entry, _) in locate(before, changed_paths).items()}
    now = changed.after(sorted(changed.touched))
    added = tuple(changed.new_files)
    return _commit(
        after,
        added=added,
        removed=tuple(parent[p] for p in sorted(changed.gone)),
        deleted_in=tuple((parent[p], now[p]) for p in sorted(changed.touched)),
    )


def _commit(
    after: Version,
    added: tuple[DataFile, ...],
    removed: tuple[DataFile, ...],
    deleted_in: tuple[tuple[DataFile, DataFile], ...],
) -> CommitFiles:
    return CommitFiles(
        version=after.version,
        operation=after.operation,
        timestamp_ms=after.timestamp_ms,
        fields=after.fields,
        added=added,
        removed=removed,
        deleted_in=deleted_in,
        rewrite="rewrites" in after.parameters,
    )

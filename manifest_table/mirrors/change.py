"""What one committed version changed, as both mirrors describe it: files added, files removed
(with the entries they had), files whose deletion vector changed (before and after), and the
tombstone objects first referenced by this version (each needs its mirror files written).
Computed from the two manifests with ``listing.diff``, which reads only the segments one has
and the other does not: the cost follows the commit, not the table."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..format.manifest import DataFile
from ..log.version import Version, diff, locate


@dataclass
class VersionChange:
    prev: Version
    cur: Version
    added: list[DataFile]
    removed: list[DataFile]
    redeleted: list[tuple[DataFile, DataFile]]
    """(entry before, entry after) of each kept file whose deletion vector changed."""
    new_tombstones: dict[str, dict[int, str]] = field(default_factory=dict)
    """Tombstone key -> {bitmap offset: data file path} of the bitmaps this version references
    first (every bitmap of those objects: a commit's tombstone holds only its own)."""

    @property
    def files_changed(self) -> bool:
        return bool(self.added or self.removed or self.redeleted)


def version_change(prev: Version, cur: Version) -> VersionChange:
    changed = diff(prev, cur)
    before = {p: f for p, (f, _) in locate(prev, changed.gone | changed.touched).items()}
    after = changed.after(changed.touched)
    change = VersionChange(
        prev,
        cur,
        list(changed.new_files),
        [before[p] for p in sorted(changed.gone)],
        [(before[p], after[p]) for p in sorted(changed.touched)],
    )
    # A changed deletion vector always points at a tombstone this commit wrote.
    change.new_tombstones = tombstones_of(change.added + [f for _, f in change.redeleted])
    return change


def tombstones_of(files: list[DataFile]) -> dict[str, dict[int, str]]:
    """Every tombstone the files' deletion vectors point at, with the bitmaps they use."""
    out: dict[str, dict[int, str]] = {}
    for f in files:
        if f.deletes is not None:
            out.setdefault(f.deletes.path, {})[f.deletes.offset] = f.path
    return out

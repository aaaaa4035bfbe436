"""The tombstone object of a commit: the union of each touched file's existing bitmap and the
commit's new deleted positions, written create-only once per attempt (and reused by a retry
whose deletes did not change), with the replaced positions the commit's ``parameters.replaced``
names (docs/format.md, "Tombstones")."""

from __future__ import annotations

from pyroaring import FrozenBitMap

from ..data.tombstones import DeletionVectors, write_tombstone
from ..format.manifest import DataFile, DeletionVector
from ..log.version_log import VersionLog
from .changes import Changes


class TombstoneStager:
    """Writes the tombstone object of an attempt, reusing the last one when neither the
    files' existing bitmaps nor our new positions changed since (a retry that lost only to
    appends). New positions do change when a rebase remaps a winner's deletes onto our
    compaction outputs. The same object holds the replaced positions the commit's
    ``parameters.replaced`` must carry (``Changes.replaced_positions``): no object more."""

    def __init__(self, log: VersionLog, dvs: DeletionVectors) -> None:
        self._log, self._dvs = log, dvs
        self._key: tuple[dict[str, tuple[DeletionVector | None, FrozenBitMap]], dict[str, FrozenBitMap]] | None = None
        self._refs: dict[str, tuple[DeletionVector, int]] = {}
        self.positions: dict[str, DeletionVector] = {}
        """Where the last object staged holds each of the replaced positions."""
        self.written: list[str] = []

    def stage(self, files: dict[str, DataFile], changes: Changes) -> dict[str, tuple[DeletionVector, int]]:
        deletes, replaced = changes.deletes, changes.replaced_positions()
        key = (
            {path: (f.deletes, FrozenBitMap(deletes[path])) for path, f in files.items()},
            {name: FrozenBitMap(bm) for name, bm in replaced.items()},
        )
        if key == self._key:
            return self._refs
        unions, new_rows = {}, {}
        for path, f in files.items():
            existing = self._dvs.of(f)
            unions[path] = existing | deletes[path]
            new_rows[path] = len(unions[path]) - len(existing)
        refs = write_tombstone(self._log.store, {**unions, **replaced}) if unions else {}
        self.written.extend({ref.path for ref in refs.values()})
        self._key, self._refs = key, {p: (refs[p], new_rows[p]) for p in unions}
        self.positions = {name: refs[name] for name in replaced}
        return self._refs

"""What a GC run reports: per category of object (manifests, segments, data files,
tombstones, mirrors), what was referenced, within the grace, deleted or unknown; and the
deleting itself, in the order the run chose (garbage_collection.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..arguments import format_duration
from ..format.keys import (
    DATA_PREFIX,
    DELTA_LOG_PREFIX,
    MANIFEST_PREFIX,
    METADATA_PREFIX,
    SEGMENT_PREFIX,
    TOMBSTONE_PREFIX,
)
from ..storage import ObjectInfo, ObjectStore

CATEGORIES = {
    MANIFEST_PREFIX: "manifests",
    SEGMENT_PREFIX: "segments",
    DATA_PREFIX: "data files",
    TOMBSTONE_PREFIX: "tombstones",
    METADATA_PREFIX: "mirrors",
    DELTA_LOG_PREFIX: "mirrors",
}

_SHOWN_KEYS = 20


@dataclass
class Tally:
    count: int = 0
    bytes: int = 0

    def add(self, info: ObjectInfo) -> None:
        self.count += 1
        self.bytes += info.size


def _tallies() -> dict[str, Tally]:
    return {name: Tally() for name in CATEGORIES.values()}


@dataclass
class GCReport:
    """What one GC run kept and deleted (or, on a dry run, would delete), and why.
    Each dict maps a category (``manifests``, ``data files``, ``tombstones``) to a tally."""

    uri: str
    dry_run: bool
    grace: timedelta
    """The grace period this run used (the table's ``gc_grace`` unless a longer one was asked)."""
    versions_retained: range
    versions_expired: range
    """Versions whose manifests this run deleted (would delete)."""
    pointer_rolled_forward: bool = False
    """The pointer lagged behind a committed version (a writer died before moving it, or the
    store refused the move for its write rate)."""
    referenced: dict[str, Tally] = field(default_factory=_tallies)
    """Kept: manifests of retained versions and the objects they reference."""
    in_grace: dict[str, Tally] = field(default_factory=_tallies)
    """Kept: unreferenced but younger than the grace period (maybe a commit in flight)."""
    deleted: dict[str, Tally] = field(default_factory=_tallies)
    """Deleted: expired manifests, and objects no retained version references."""
    deleted_keys: list[str] = field(default_factory=list)
    unknown: dict[str, Tally] = field(default_factory=_tallies)
    """Kept: unreferenced objects whose keys are not of a shape our writers produce, so not
    ours to delete (a user's file, another table nested under ``data/``)."""
    unknown_keys: list[str] = field(default_factory=list)

    def sort(
        self, info: ObjectInfo, category: str, needed: set[str], ours: bool, cutoff: datetime, doomed: list[ObjectInfo]
    ) -> None:
        """File one listed object under ``category``: referenced, not of our writers' shapes
        (kept as unknown), older than the grace period (appended to ``doomed``), or within it."""
        if info.key in needed:
            self.referenced[category].add(info)
        elif not ours:
            self.unknown[category].add(info)
            self.unknown_keys.append(info.key)
        elif info.last_modified < cutoff:
            doomed.append(info)
        else:
            self.in_grace[category].add(info)

    def delete(self, store: ObjectStore, doomed: list[ObjectInfo], category: Callable[[str], str]) -> None:
        """Delete ``doomed`` in order (unless a dry run) and report each under ``category(key)``."""
        for info in doomed:
            if not self.dry_run:
                store.delete(info.key)
            self.deleted[category(info.key)].add(info)
            self.deleted_keys.append(info.key)

    def __str__(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        expired = f"{span(self.versions_expired)} expired" if self.versions_expired else "no version expired"
        lines = [
            f"GC of {self.uri}{' (dry run: nothing was deleted)' if self.dry_run else ''}",
            f"  {span(self.versions_retained)} retained, {expired}; grace {format_duration(self.grace)}",
        ]
        if self.pointer_rolled_forward:
            lines.append(
                f"  pointer rolled forward to version {self.versions_retained[-1]} "
                "(a writer died before moving it, or the store refused it)"
            )
        lines.append(f"  {'':<12}{'referenced':>22}{'within grace':>22}{verb:>22}")
        for name in dict.fromkeys(CATEGORIES.values()):
            cells = [_amount(t[name]) for t in (self.referenced, self.in_grace, self.deleted)]
            lines.append(f"  {name:<12}" + "".join(f"{c:>22}" for c in cells))
        if self.unknown_keys:
            lines.append(
                f"  kept {len(self.unknown_keys)} unknown objects (not written by this library): "
                + _shown(self.unknown_keys)
            )
        if self.deleted_keys:
            lines.append(f"  {verb}: " + _shown(self.deleted_keys))
        return "\n".join(lines)


def category(key: str) -> str:
    return next(name for prefix, name in CATEGORIES.items() if key.startswith(prefix))


def _shown(keys: list[str]) -> str:
    more = len(keys) - _SHOWN_KEYS
    return ", ".join(keys[:_SHOWN_KEYS]) + (f" and {more} more" if more > 0 else "")


def span(versions: range) -> str:
    """``versions 3..7``, ``version 7`` or ``no version``."""
    return (
        f"versions {versions[0]}..{versions[-1]}"
        if len(versions) > 1
        else f"version {versions[0]}"
        if versions
        else "no version"
    )


def _amount(tally: Tally) -> str:
    return f"{tally.count} ({_bytes(tally.bytes)})" if tally.count else "-"


def _bytes(n: float) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"

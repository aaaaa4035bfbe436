"""Garbage collection: expire old versions and delete the objects no retained version needs.

Retained versions are a contiguous suffix of the log (readers rely on expired versions
being a prefix): the latest always, plus older versions while a retention rule keeps them.
Every object a retained version references survives (its mirrors' objects too: see
mirrors/expiry.py); any other object under ``data/``, ``tombstones/``, ``segments/``,
``manifest/``, ``metadata/`` and ``_delta_log/`` goes, but only once it is older than the grace period,
because a writer may be about to commit it, and only if its key has exactly a shape our
writers produce (``keys.is_writer_key``): anything else found there (a user's notes, another
table nested under ``data/``) is reported as unknown and kept. Why that is safe:
docs/operations.md.

The grace period is the table's ``gc_grace`` property, which every writer's deadline derives
from (deadline.py); a shorter one needs ``force``. Ages are measured on the store's clock
(``storage.clock.store_now``), never on this host's alone: a GC host whose clock runs ahead
must not delete what a writer staged within the grace (docs/protocol.md, "Time").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from ..arguments import Duration, check_bool, check_duration, check_int, format_duration
from ..clock import utc_now
from ..commit.changes import rewrites_from_json
from ..errors import InvalidArgumentError
from ..format.database import DatabaseVersion
from ..format.keys import (
    DATA_PREFIX,
    DELTA_LOG_PREFIX,
    MANIFEST_PREFIX,
    METADATA_PREFIX,
    SEGMENT_PREFIX,
    TOMBSTONE_PREFIX,
    is_writer_key,
)
from ..format.listed_once import ListedPaths
from ..format.manifest import version_of_key
from ..handle import TableHandle
from ..log.version import Version
from ..log.version_log import PointerLog, VersionLog
from ..storage import ObjectInfo, ObjectStore
from ..storage.clock import store_now

log = logging.getLogger("manifest_table.maintenance")
V = TypeVar("V", Version, DatabaseVersion)

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
        expired = f"{_span(self.versions_expired)} expired" if self.versions_expired else "no version expired"
        lines = [
            f"GC of {self.uri}{' (dry run: nothing was deleted)' if self.dry_run else ''}",
            f"  {_span(self.versions_retained)} retained, {expired}; grace {format_duration(self.grace)}",
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


def check_retention(
    retain_versions: int | None, retain_for: Duration | None, grace: Duration | None, force: bool = False
) -> tuple[timedelta | None, timedelta | None]:
    """``(retain_for, grace)`` as timedeltas (``"7d"`` is read as the CLI reads it; a grace of
    None: the table's, checked by ``resolve_grace`` once it is read); raise
    ``InvalidArgumentError`` for settings that make no sense, or that could delete what a
    running writer or reader still needs (retention shorter than grace) without ``force``."""
    if retain_versions is not None:
        check_int("retain_versions", retain_versions, minimum=1)  # the latest is always retained
    retain_for = check_duration("retain_for", retain_for, optional=True)
    grace = check_duration("grace", grace, optional=True)
    check_bool("force", force)
    if grace is not None:
        _check_retained_for_grace(retain_for, grace, force)
    return retain_for, grace


def _check_retained_for_grace(retain_for: timedelta | None, grace: timedelta, force: bool) -> None:
    """``retain_for=None`` counts as zero here: count-based retention alone gives no time
    guarantee to a writer that is slow to commit."""
    if (retain_for or timedelta(0)) < grace and not force:
        raise InvalidArgumentError(
            f"retain_for ({retain_for}) is shorter than grace ({format_duration(grace)}): a writer still "
            "committing on a version GC expires could lose its commit; force it only if no commit takes that long"
        )


def resolve_grace(
    own: float, asked: timedelta | None, retain_for: timedelta | None, force: bool, what: str
) -> timedelta:
    """The grace a run uses: ``own`` (the ``gc_grace`` of ``what``, seconds), or a longer one
    ``asked``; a shorter one only with ``force``, since every writer's deadline derives from
    ``own`` (deadline.py) and a commit in flight may reference an object that old."""
    grace = timedelta(seconds=own)
    if asked is not None and asked < grace and not force:
        raise InvalidArgumentError(
            f"grace ({format_duration(asked)}) is shorter than the gc_grace of {what} ({format_duration(grace)}): "
            "a writer may still commit a reference to an unreferenced object that old; lower gc_grace "
            "with set_properties (and wait for it to pass), or pass force=True only if no writer is running"
        )
    grace = grace if asked is None else asked
    _check_retained_for_grace(retain_for, grace, force)
    return grace


def collect_garbage(
    handle: TableHandle,
    retain_versions: int | None = None,
    retain_for: Duration | None = timedelta(days=7),
    grace: Duration | None = None,
    dry_run: bool = False,
    force: bool = False,
    now: datetime | None = None,
) -> GCReport:
    """Expire versions no rule retains and delete what no retained version needs (see
    ``Table.gc``). A version is retained if it is the latest, one of the last
    ``retain_versions``, or was current at some moment in the last ``retain_for``; either rule
    suffices. ``now``: the store's time now (default: read from the store), which all ages are
    measured against."""
    retain_for, asked = check_retention(retain_versions, retain_for, grace, force)
    check_bool("dry_run", dry_run)
    vlog: VersionLog = handle.log
    retention = Retention(retain_versions, retain_for, asked, force)
    check_grace(vlog, retention, handle.uri)
    now = now or gc_clock(handle.store, dry_run)
    report, retained, doomed, floor = plan_versions(
        vlog, handle.store, handle.uri, now, retention, dry_run, keep=lambda kept: _keep_mirrored(vlog, kept)
    )
    cutoff = now - report.grace
    needed = referenced_keys(retained)
    mirrored = _mirror_objects(vlog, retained, needed, dry_run)
    for prefix in (*mirrored, SEGMENT_PREFIX, DATA_PREFIX, TOMBSTONE_PREFIX):
        for info in mirrored.get(prefix) or handle.store.list(prefix):
            report.sort(info, CATEGORIES[prefix], needed, is_writer_key(info.key), cutoff, doomed)

    # Manifests (ours, then the mirrors') first and oldest first: a crash leaves orphans for the
    # next run, never a hole in the versions nor a readable manifest whose files are gone.
    report.delete(handle.store, doomed, _category)
    if not dry_run:
        vlog.forget_before(floor)
    log.info(
        "%s: GC %s %d objects, retained versions %s, kept %d unknown objects",
        handle.uri,
        "would delete" if dry_run else "deleted",
        len(doomed),
        _span(report.versions_retained),
        len(report.unknown_keys),
    )
    return report


@dataclass(frozen=True)
class Retention:
    """What a GC run was asked to keep (checked by ``check_retention``)."""

    versions: int | None
    time: timedelta | None
    grace: timedelta | None
    """None: the ``gc_grace`` of the table or database."""
    force: bool


def gc_clock(store: ObjectStore, dry_run: bool) -> datetime:
    """The clock of a run, read before the pointer: an object staged by a commit that lands
    after we read the pointer is then younger than ``now - grace`` however long the run takes.
    The store's, read from a probe object; a dry run writes nothing, so it reads its host's
    (it deletes nothing either: its report may differ from a real run's by the skew)."""
    return utc_now() if dry_run else store_now(store)


def check_grace(vlog: PointerLog[V], retention: Retention, uri: str) -> None:
    """Refuse a run that ``plan_versions`` would refuse for its grace, before the run writes
    anything (its probe of the store's clock)."""
    latest, _ = vlog.latest()
    resolve_grace(latest.gc_grace, retention.grace, retention.time, retention.force, uri)


def plan_versions(
    vlog: PointerLog[V],
    store: ObjectStore,
    uri: str,
    now: datetime,
    retention: Retention,
    dry_run: bool,
    keep: Callable[[list[V]], list[V]] = lambda kept: kept,
) -> tuple[GCReport, list[V], list[ObjectInfo], int]:
    """The half of a GC run that is the same for a table's log and a database's: roll a
    lagging pointer forward, read the grace period (``resolve_grace``), choose the retained
    versions (``keep`` may extend them), and report the manifests. Returns the report (with
    the grace), the versions whose objects stay (with expired ones too young to delete), the
    expired manifests to delete (oldest first) and the oldest version left."""
    pointer = vlog.pointer()
    latest, stored = vlog.probe_forward(pointer.version), pointer.stored_version
    if latest > stored and not dry_run:
        vlog.advance_pointer(latest, pointer.etag)
    newest = vlog.manifest(latest)
    grace = resolve_grace(newest.gc_grace, retention.grace, retention.time, retention.force, uri)
    cutoff = now - grace
    # Readers find the latest version by walking from the stored pointer, which may still be
    # the one read here for a reader that read it just before: what they walk stays this run.
    retained = keep(retained_versions(vlog, newest, now, retention.versions, retention.time, stored))
    listed = list(store.list(MANIFEST_PREFIX))
    manifests = sorted((v, info) for info in listed if (v := version_of_key(info.key)) is not None)
    by_rule = retained[-1].version
    expired, young = split_expired(manifests, by_rule, cutoff)
    # An expired manifest too young to delete stays readable, so its objects stay too.
    retained += [m for m in (vlog.find(v) for v, _ in young) if m is not None]
    floor = young[0][0] if young else by_rule
    report = GCReport(
        uri,
        dry_run,
        grace,
        range(floor, latest + 1),
        range(expired[0][0], floor) if expired else range(0),
        pointer_rolled_forward=latest > stored,
    )
    for v, info in manifests:
        if v >= by_rule:
            report.referenced["manifests"].add(info)
    for _, info in young:
        report.in_grace["manifests"].add(info)
    for info in listed:
        if version_of_key(info.key) is None:
            report.unknown["manifests"].add(info)
            report.unknown_keys.append(info.key)
    return report, retained, [info for _, info in expired], floor


def retained_versions(
    vlog: PointerLog[V],
    latest: V,
    now: datetime,
    retain_versions: int | None,
    retain_for: timedelta | None,
    pointed: int,
) -> list[V]:
    """Newest first: the latest manifest, then older ones while a retention rule keeps them
    or they are not older than the version the stored pointer names (``pointed``)."""
    kept = [latest]
    while kept[-1].version > 0:
        version = kept[-1].version - 1
        by_count = retain_versions is not None and version > latest.version - retain_versions
        # A version was current until its successor committed.
        by_time = retain_for is not None and kept[-1].timestamp > now - retain_for
        manifest = vlog.find(version) if by_count or by_time or version >= pointed else None
        if manifest is None:
            break
        kept.append(manifest)
    return kept


def _mirror_objects(
    vlog: VersionLog, retained: list[Version], needed: set[str], dry_run: bool
) -> dict[str, list[ObjectInfo]]:
    """Every object of the mirrors, by prefix in deletion order; adds those the retained
    versions need to ``needed`` (mirrors/expiry.py, imported here: it brings fastavro). A real
    run first makes the mirrors stop offering the versions it expires (``expiry.trim``)."""
    from ..mirrors import expiry

    listed = expiry.listing(vlog.store)
    if not dry_run and expiry.trim(vlog, retained, listed):
        listed = expiry.listing(vlog.store)  # (a checkpoint written: the log starts there)
    needed |= expiry.needed(vlog, retained, needed, listed)
    return listed


def _keep_mirrored(vlog: VersionLog, retained: list[Version]) -> list[Version]:
    """``retained``, extended back to the newest version each mirror that is on describes:
    a lagging mirror must not point at files this run would delete (mirrors/expiry.py)."""
    from ..mirrors.expiry import floor

    oldest = floor(vlog, retained[0]) if retained[0].mirrors else None
    while oldest is not None and retained[-1].version > oldest:
        older = vlog.find(retained[-1].version - 1)
        if older is None:
            break
        retained.append(older)
    return retained


def split_expired(
    manifests: list[tuple[int, ObjectInfo]], floor: int, cutoff: datetime
) -> tuple[list[tuple[int, ObjectInfo]], list[tuple[int, ObjectInfo]]]:
    """The manifests below ``floor`` (sorted by version), split at the first one younger than
    the grace period: those before it can go; it and the rest stay (expired versions must
    remain a prefix)."""
    below = [(v, info) for v, info in manifests if v < floor]
    stop = next((i for i, (_, info) in enumerate(below) if info.last_modified >= cutoff), len(below))
    return below[:stop], below[stop:]


def referenced_keys(manifests: Iterable[Version]) -> set[str]:
    """Every object key the manifests need: segments, data files, their bitmaps, and the
    bitmaps a compaction's rewrites record (a concurrent delete rebasing onto it reads them).
    Roots share most segments: each distinct one is read once. A segment entry's bitmap
    that the root's ``deletes`` map overrides is not needed by that root. A root that lists a
    file twice is corrupt: GC stops rather than judge its objects."""
    keys: set[str] = set()
    vectors: dict[str, list[tuple[str, str]]] = {}  # segment -> (file, its stored bitmap's object)
    listed: dict[str, ListedPaths] = {}
    for manifest in manifests:
        index = manifest.index
        for summary in index.segments if index is not None else ():
            if summary.path not in vectors:
                segment = manifest.segment(summary.path)
                entries, listed[summary.path] = segment.table, segment.listed
                keys.add(summary.path)
                keys.update(entries.column("path").to_pylist())
                vectors[summary.path] = [
                    (p, v)
                    for p, v in zip(entries.column("path").to_pylist(), entries.column("dv_path").to_pylist())
                    if v
                ]
            keys.update(v for p, v in vectors[summary.path] if p not in index.deletes)  # type: ignore[union-attr]
        if index is not None:
            manifest.check_listed_once([listed[s.path] for s in index.segments])
        keys.update(ref.path for ref in (index.deletes.values() if index is not None else ()))
        for f in manifest.tail:
            keys.add(f.path)
            if f.deletes:
                keys.add(f.deletes.path)
        for rewrite in rewrites_from_json(manifest.parameters.get("rewrites", [])):
            keys.update(src.deletes.path for src in rewrite.sources if src.deletes)
    return keys


def _category(key: str) -> str:
    return next(name for prefix, name in CATEGORIES.items() if key.startswith(prefix))


def _shown(keys: list[str]) -> str:
    more = len(keys) - _SHOWN_KEYS
    return ", ".join(keys[:_SHOWN_KEYS]) + (f" and {more} more" if more > 0 else "")


def _span(versions: range) -> str:
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

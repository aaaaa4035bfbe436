"""Which versions a GC run keeps: the retention rules, the grace period (the table's or
database's ``gc_grace``; a shorter one needs ``force``), the run's clock (the store's), and the
plan of versions shared by a table's log and a database's (garbage_collection.py,
database/garbage_collection.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from ..arguments import Duration, check_bool, check_duration, check_int, format_duration
from ..clock import before, utc_now
from ..errors import InvalidArgumentError
from ..format.database import DatabaseVersion
from ..format.keys import MANIFEST_PREFIX
from ..format.manifest import version_of_key
from ..log.version import Version
from ..log.version_log import PointerLog
from ..storage import ObjectInfo, ObjectStore
from ..storage.clock import store_now
from .gc_report import GCReport

V = TypeVar("V", Version, DatabaseVersion)


@dataclass(frozen=True)
class Retention:
    """What a GC run was asked to keep (checked by ``check_retention``)."""

    versions: int | None
    time: timedelta | None
    grace: timedelta | None
    """None: the ``gc_grace`` of the table or database."""
    force: bool


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
    cutoff = before(now, grace)
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
        by_time = retain_for is not None and kept[-1].timestamp > before(now, retain_for)
        manifest = vlog.find(version) if by_count or by_time or version >= pointed else None
        if manifest is None:
            break
        kept.append(manifest)
    return kept


def split_expired(
    manifests: list[tuple[int, ObjectInfo]], floor: int, cutoff: datetime
) -> tuple[list[tuple[int, ObjectInfo]], list[tuple[int, ObjectInfo]]]:
    """The manifests below ``floor`` (sorted by version), split at the first one younger than
    the grace period: those before it can go; it and the rest stay (expired versions must
    remain a prefix)."""
    below = [(v, info) for v, info in manifests if v < floor]
    stop = next((i for i, (_, info) in enumerate(below) if info.last_modified >= cutoff), len(below))
    return below[:stop], below[stop:]

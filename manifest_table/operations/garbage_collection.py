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
from datetime import datetime, timedelta

from ..arguments import Duration, check_bool
from ..clock import before
from ..format.keys import DATA_PREFIX, SEGMENT_PREFIX, TOMBSTONE_PREFIX, is_writer_key
from ..handle import TableHandle
from ..log.version import Version
from ..log.version_log import VersionLog
from ..storage import ObjectInfo
from .gc_references import referenced_keys
from .gc_report import CATEGORIES, GCReport, category, span
from .gc_versions import Retention, check_grace, check_retention, gc_clock, plan_versions

logger = logging.getLogger("manifest_table.maintenance")


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
    cutoff = before(now, report.grace)
    needed = referenced_keys(retained, vlog.stored)
    mirrored = _mirror_objects(vlog, retained, needed, dry_run)
    for prefix in (*mirrored, SEGMENT_PREFIX, DATA_PREFIX, TOMBSTONE_PREFIX):
        for info in mirrored.get(prefix) or handle.store.list(prefix):
            report.sort(info, CATEGORIES[prefix], needed, is_writer_key(info.key), cutoff, doomed)

    # Manifests (ours, then the mirrors') first and oldest first: a crash leaves orphans for the
    # next run, never a hole in the versions nor a readable manifest whose files are gone.
    report.delete(handle.store, doomed, category)
    if not dry_run:
        vlog.forget_before(floor)
    logger.info(
        "%s: GC %s %d objects, retained versions %s, kept %d unknown objects",
        handle.uri,
        "would delete" if dry_run else "deleted",
        len(doomed),
        span(report.versions_retained),
        len(report.unknown_keys),
    )
    return report


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

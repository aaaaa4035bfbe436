"""Garbage collection of a database (docs/databases.md): the table rules of
operations/garbage_collection.py (and gc_versions.py, gc_references.py, gc_report.py)
over the database's versions.

1. Retained database versions are a contiguous suffix, chosen by the same retention rules.
2. A table's objects are reachable through any retained version that holds the table: its
   root, and what the table's manifest at that version references. A dropped table's
   files are therefore kept until no retained version holds it, and then for the grace period.
3. Only keys of exactly the shapes the database's writers produce are deleted (its versions,
   and writer shapes under ``tables/<32 hex>/``: ``keys.is_database_writer_key``); expired
   versions go first, oldest first, so a crash leaves orphans, never a hole.
4. A table's Iceberg mirror keeps what its retained states need (mirrors/expiry.py), and a
   mirror that lags behind its table holds the database's versions back to the one it
   describes, as a table's own GC does."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..arguments import Duration, check_bool
from ..clock import before
from ..errors import VersionExpiredError
from ..format.database import DatabaseVersion, table_prefix
from ..format.keys import METADATA_PREFIX, TABLES_PREFIX, is_database_writer_key
from ..log.version import Version
from ..operations.garbage_collection import logger
from ..operations.gc_references import referenced_keys
from ..operations.gc_report import CATEGORIES, GCReport
from ..operations.gc_versions import Retention, check_grace, check_retention, gc_clock, plan_versions
from .handle import DatabaseHandle
from .table import DatabaseTable, table_of


def collect_database_garbage(
    db: DatabaseHandle,
    retain_versions: int | None = None,
    retain_for: Duration | None = timedelta(days=7),
    grace: Duration | None = None,
    dry_run: bool = False,
    force: bool = False,
    now: datetime | None = None,
) -> GCReport:
    """``Table.gc`` for every table of ``db`` at once, over the database's versions, with the
    database's ``gc_grace`` (the grace of its commits' deadlines)."""
    retain_for, asked = check_retention(retain_versions, retain_for, grace, force)
    check_bool("dry_run", dry_run)
    dlog = db.log
    retention = Retention(retain_versions, retain_for, asked, force)
    check_grace(dlog, retention, db.uri)
    now = now or gc_clock(db.store, dry_run)  # before the pointer
    report, retained, doomed, floor = plan_versions(
        dlog, db.store, db.uri, now, retention, dry_run, lambda kept: _keep_mirrored(db, kept)
    )
    cutoff = before(now, report.grace)
    needed = _needed(db, retained)
    for info in db.store.list(TABLES_PREFIX):
        report.sort(info, _category(info.key), needed, is_database_writer_key(info.key), cutoff, doomed)
    report.delete(db.store, doomed, _category)  # expired versions first, oldest first
    if not dry_run:
        dlog.forget_before(floor)
    logger.info("%s: database GC %s %d objects", db.uri, "would delete" if dry_run else "deleted", len(doomed))
    return report


def _needed(db: DatabaseHandle, retained: list[DatabaseVersion]) -> set[str]:
    """Every key (database-relative) the retained versions need: each table's roots and what
    its manifests reference (one handle per table, so its segments are read once)."""
    roots: set[str] = set()
    by_table: dict[str, tuple[DatabaseTable, list[Version]]] = {}
    for version in retained:
        for name, ref in version.tables.items():
            if ref.root not in roots:
                table, versions = by_table.setdefault(ref.id, (table_of(db, name, ref.id), []))
                state = _state(db, table, version)
                if state is None:
                    break
                roots.add(ref.root)
                versions.append(state)
    needed = set(roots)
    for table_id, (table, versions) in by_table.items():
        keys = referenced_keys(versions, db.log.stored)
        if any(v.mirrors for v in versions) or next(iter(table.store.list(METADATA_PREFIX)), None) is not None:
            held = [v for v in (_state(db, table, d) for d in retained) if v is not None]
            keys |= _mirror_keys(table, held, keys)
        needed |= {table_prefix(table_id) + key for key in keys}
    return needed


def _state(db: DatabaseHandle, table: DatabaseTable, version: DatabaseVersion) -> Version | None:
    """The table at ``version``; None if ``version`` does not hold it, or if a concurrent GC
    has expired ``version`` since this one listed it (it deletes a version before its roots:
    nothing of it is needed any more). A root missing under a stored version is damage
    (``CorruptTableError``, raised: ``object_missing``)."""
    try:
        return table.log.at(version)
    except VersionExpiredError:
        logger.info("%s: version %d was expired by a concurrent GC", db.uri, version.version)
        return None


def _mirror_keys(table: DatabaseTable, held: list[Version], keys: set[str]) -> set[str]:
    """The mirror objects a table's states need, ``held`` by the retained versions (newest
    first); ``keys``: the objects its states reference (mirrors/expiry.py, loaded on use)."""
    from ..mirrors import expiry

    return expiry.needed(table.log, held, keys, expiry.listing(table.store))


def _keep_mirrored(db: DatabaseHandle, kept: list[DatabaseVersion]) -> list[DatabaseVersion]:
    """``kept`` (newest first), extended back to the version a lagging mirror describes: one
    whose table has changed since must still find that state's files (mirrors/expiry.py)."""
    from ..mirrors.expiry import floor

    latest, oldest = kept[0], kept[-1].version
    for name, ref in latest.tables.items():
        table = table_of(db, name, ref.id)
        state = table.log.at(latest)
        mirrored = floor(table.log, state) if state is not None and state.mirrors else None
        if mirrored is None or mirrored >= oldest:
            continue
        then = db.log.find(mirrored)
        if then is not None and name in then.tables and then.tables[name].root != ref.root:
            oldest = mirrored
    while kept[-1].version > oldest:
        older = db.log.find(kept[-1].version - 1)
        if older is None:
            break
        kept.append(older)
    return kept


def _category(key: str) -> str:
    """A database key's report category: its table key's (``roots/`` count as manifests)."""
    inner = key.split("/", 2)[2] if key.startswith(TABLES_PREFIX) and key.count("/") >= 2 else key
    return next((name for prefix, name in CATEGORIES.items() if inner.startswith(prefix)), "manifests")

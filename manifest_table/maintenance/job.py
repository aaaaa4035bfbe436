"""The maintenance job: compaction, then garbage collection, on one table or on every table
under a root (a local directory, or an ``s3://``, ``gs://`` or ``az://`` prefix).

1. Find the tables: the root itself if it is one, else every table below it (one LIST). A
   database counts as one: its tables are found through it (docs/databases.md).
2. For each table, compact (unless told not to), bring its mirrors up to date (if it has any)
   and then collect garbage. A compaction that loses to a concurrent commit is skipped, not
   failed: the next run retries it. A database compacts each of its tables, then collects
   garbage once over all of them.
3. Report each table, then a summary. One broken table never stops the others; the exit
   status says whether any failed.

``manifest-table maintain`` and the scheduled entry ``gc/maintain.py`` both run this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from ..arguments import check_duration, check_size
from ..commit import CommitInfo
from ..database import Database, DatabaseTable, open_database
from ..database.database import database_above
from ..entry_points import open_table
from ..errors import CommitConflictError, DatabaseNotFoundError, ManifestTableError, TableNotFoundError
from ..format.manifest import manifest_key
from ..format.pointer import POINTER_KEY
from ..operations.compaction import CompactionGroup, plan_compaction
from ..operations.gc_versions import check_retention
from ..storage import store_for_uri
from ..table import Table
from ..wording import count

logger = logging.getLogger("manifest_table.maintenance.job")

TABLE_MARKERS = (POINTER_KEY, manifest_key(0))


@dataclass(frozen=True)
class JobOptions:
    """What one run does; the defaults are the scheduled job's (docs/operations.md)."""

    dry_run: bool = False
    retain_versions: int | None = None
    retain_for: timedelta | None = timedelta(days=7)
    grace: timedelta | None = None
    """None: each table's ``gc_grace``."""
    target_file_size: int | None = None
    min_deleted_fraction: float = 0.2
    compact: bool = True
    force: bool = False
    storage_options: dict[str, str] | None = None

    def __post_init__(self) -> None:  # also given as the CLI writes them ("7d", "128MiB"): stored parsed
        object.__setattr__(self, "retain_for", check_duration("retain_for", self.retain_for, optional=True))
        object.__setattr__(self, "grace", check_duration("grace", self.grace, optional=True))
        if self.target_file_size is not None:
            object.__setattr__(self, "target_file_size", check_size("target_file_size", self.target_file_size))

    def check(self) -> None:
        """Raise ``InvalidArgumentError`` for settings GC would refuse, before any table is touched."""
        check_retention(self.retain_versions, self.retain_for, self.grace, self.force)


# --- finding tables ---------------------------------------------------------------------
def find_tables(root: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """``root`` if it is a table (``DB_URI/TABLE`` included), else every table below it
    (found by one LIST)."""
    found = database_above(root, storage_options, {})
    if found is not None:  # "<database>/<table>": only ever the database's table
        db, name = found
        return [root] if name in db.tables() else []
    store = store_for_uri(root, storage_options)
    if any(store.head(marker) is not None for marker in TABLE_MARKERS):
        return [root]
    prefixes = {
        info.key[: -len(marker) - 1]
        for info in store.list()
        for marker in TABLE_MARKERS
        if info.key.endswith("/" + marker)
    }
    return [f"{root.rstrip('/')}/{prefix}" for prefix in sorted(prefixes)]


# --- one table --------------------------------------------------------------------------
@dataclass
class Outcome:
    uri: str
    ok: bool = True
    compaction_skipped: bool = False
    error: str = ""
    lines: list[str] = field(default_factory=list)


Compactor = Callable[[Table, int | None, float], CommitInfo]


def local_compaction(table: Table, target_file_size: int | None, min_deleted_fraction: float) -> CommitInfo:
    """Compaction in this process; gc/maintain_spark.py passes one that runs on Spark executors."""
    return table.compact(target_file_size, min_deleted_fraction)


def maintain(uri: str, options: JobOptions, compact: Compactor = local_compaction) -> Outcome:
    """Compaction then GC on one table. Every failure is caught and reported: one broken
    table must not stop the others."""
    outcome = Outcome(uri)
    try:
        db = _database(uri, options)
        if db is not None:
            _maintain_database(db, options, outcome, compact)
            return outcome
        table = open_table(uri, storage_options=options.storage_options)
        if isinstance(table, DatabaseTable):  # "<database>/<table>": its compaction, the database's gc
            if options.compact:
                outcome.lines.append(_compact(table, options, outcome, compact))
            assert isinstance(table.database, Database)  # the facade that opened the table
            outcome.lines.append(_database_gc(table.database, options))
            return outcome
        if options.compact:
            outcome.lines.append(_compact(table, options, outcome, compact))
        if table.mirrors and not options.dry_run:
            outcome.lines.append(_sync_mirrors(table, outcome))
        report = table.gc(options.retain_versions, options.retain_for, options.grace, options.dry_run, options.force)
        outcome.lines.append(str(report))
    except ManifestTableError as exc:
        outcome.ok, outcome.error = False, f"{type(exc).__name__}: {exc}"
        logger.error("%s: %s", uri, outcome.error)
    except Exception as exc:  # a bug or an unexpected failure: keep going with the other tables
        outcome.ok, outcome.error = False, f"unexpected {type(exc).__name__}: {exc}"
        logger.exception("%s: unexpected error", uri)
    return outcome


def _database(uri: str, options: JobOptions) -> Database | None:
    """The database at ``uri``, or None if a table (or nothing) is there."""
    try:
        return open_database(uri, storage_options=options.storage_options)
    except DatabaseNotFoundError:
        return None


def _maintain_database(db: Database, options: JobOptions, outcome: Outcome, compact: Compactor) -> None:
    """Each table's compaction, then one gc over every table (database/garbage_collection.py)."""
    if options.compact:
        for name in db.tables():
            try:
                line = _compact(db.table(name), options, outcome, compact)
            except TableNotFoundError:  # dropped or renamed meanwhile (TableRenamedError): the next run
                continue
            outcome.lines.append(f"{name}: " + line)
    outcome.lines.append(_database_gc(db, options))


def _database_gc(db: Database, options: JobOptions) -> str:
    return str(
        db.gc(
            retain_versions=options.retain_versions,
            retain_for=options.retain_for,
            grace=options.grace,
            dry_run=options.dry_run,
            force=options.force,
        )
    )


def _compact(table: Table, options: JobOptions, outcome: Outcome, compact: Compactor) -> str:
    if options.dry_run:
        target = options.target_file_size or table.write_options.target_file_size
        groups = plan_compaction(table.manifest(), target, options.min_deleted_fraction)
        return describe_plan(groups)
    try:
        info = compact(table, options.target_file_size, options.min_deleted_fraction)
    except CommitConflictError as exc:
        outcome.compaction_skipped = True
        logger.warning("%s: compaction skipped: %s", table.uri, exc)
        return f"compaction skipped: a concurrent commit conflicted ({exc})"
    return describe_compaction(info)


def _sync_mirrors(table: Table, outcome: Outcome) -> str:
    """Catch the mirrors up before GC (a lagging mirror holds GC back, docs/mirrors.md). A
    failure, of any kind (mirrors are best effort, as at a commit), is reported and GC still
    runs."""
    try:
        versions = table.sync_mirrors()
    except Exception as exc:
        outcome.ok, outcome.error = False, f"mirror sync failed: {type(exc).__name__}: {exc}"
        logger.error("%s: %s", table.uri, outcome.error)
        return outcome.error
    return "mirrors: " + ", ".join(f"{name} at version {v}" for name, v in versions.items())


def describe_plan(groups: list[CompactionGroup]) -> str:
    """What a dry run of compaction would do."""
    if not groups:
        return "compaction (dry run): nothing to do"
    files = sum(len(g.files) for g in groups)
    return f"compaction (dry run): would rewrite {count(files, 'file')} into {len(groups)}"


def describe_compaction(info: CommitInfo) -> str:
    if not info.committed:
        return "compaction: nothing to do"
    m = info.metrics
    return (
        f"compaction: version {info.version}: {count(m['files_removed'], 'file')} -> {m['files_added']}, "
        f"{count(m['rows_rewritten'], 'row')} rewritten, {count(m['rows_dropped'], 'deleted row')} dropped, "
        f"{m['bytes_removed']} -> {m['bytes_added']} bytes"
    )


# --- the job ----------------------------------------------------------------------------
def run_job(
    tables: list[str], options: JobOptions, compact: Compactor = local_compaction, show: Callable[[str], None] = print
) -> int:
    """Maintain every table in ``tables``, ``show`` a report per table and a summary; 0
    when every table is fine, 1 when any failed."""
    outcomes = []
    for uri in tables:
        outcome = maintain(uri, options, compact)
        outcomes.append(outcome)
        show(
            "\n".join([f"== {uri} ==", *outcome.lines, *([f"FAILED: {outcome.error}"] if not outcome.ok else [])])
            + "\n"
        )
    failed = [o for o in outcomes if not o.ok]
    skipped = sum(o.compaction_skipped for o in outcomes)
    show(
        "\n".join(
            [
                f"summary: {count(len(outcomes), 'table')}, {len(outcomes) - len(failed)} ok, {len(failed)} "
                f"failed, {count(skipped, 'compaction')} skipped{' (dry run)' if options.dry_run else ''}",
                *(f"  FAILED {o.uri}: {o.error}" for o in failed),
            ]
        )
    )
    return 1 if failed else 0

"""Maintenance commands: ``compact``, ``purge``, ``gc``, ``upgrade`` and ``repair`` on one table
(``purge`` and ``repair`` also on a database), and ``maintain``, the scheduled job (compaction
then GC on a table or every table under a root), which ``gc/maintain.py`` also runs. The
job's options are defined here once for both."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from ..commit import CommitInfo
from ..database import Database, DatabaseTable
from ..errors import InvalidArgumentError
from ..maintenance.job import JobOptions, describe_compaction, describe_plan, find_tables, run_job
from ..operations.compaction import plan_compaction
from ..table import Table
from ..wording import count
from .options import (
    PROG,
    checked,
    duration,
    fraction,
    open_from,
    open_table_or_database,
    retention,
    size,
    storage_options,
)
from .progress import activity


def compact(args: argparse.Namespace) -> None:
    table = open_from(args)
    if args.dry_run:
        target = args.target_file_size or table.write_options.target_file_size
        print(describe_plan(plan_compaction(table.manifest(), target, args.min_deleted_fraction)))
        return
    with activity(f"compacting {table.uri}"):
        info = table.compact(args.target_file_size, args.min_deleted_fraction)
    print(describe_compaction(info))


def purge(args: argparse.Namespace) -> None:
    """``Table.purge`` (a database: ``Database.purge``, every table, without ``--where``)."""
    target = open_table_or_database(args)
    if isinstance(target, Database) and args.where is not None:
        raise InvalidArgumentError("--where applies to a table; a database's tables are purged of deleted rows only")
    with activity(f"purging {target.uri}"):
        found = target.purge() if isinstance(target, Database) else {"": target.purge(args.where)}
    for name, info in found.items():
        print(f"{name + ': ' if name else ''}{describe_purge(info)}")


def describe_purge(info: CommitInfo) -> str:
    if not info.committed:
        return "purge: no live file holds a deleted row; nothing to do"
    m = info.metrics
    matched = f", {count(m['rows_deleted'], 'row')} matched --where" if "rows_deleted" in m else ""
    return (
        f"purge: version {info.version}: {count(m['files_removed'], 'file')} rewritten, "
        f"{count(m['rows_dropped'], 'deleted row')} dropped{matched}; run gc to remove the old files"
    )


def upgrade(args: argparse.Namespace) -> None:
    table = open_from(args)
    with activity(f"upgrading {table.uri}"):
        info = table.upgrade()
    print(
        f"upgraded {table.uri} to format version 2 at version {info.version}"
        if info.committed
        else f"{table.uri} is already at format version 2 (version {info.version})"
    )


def gc(args: argparse.Namespace) -> None:
    table = open_from(args)
    target: Database | Table = table
    if isinstance(table, DatabaseTable):  # a database collects its tables
        assert isinstance(table.database, Database)  # the facade that opened the table
        target = table.database
    with activity(f"collecting garbage in {target.uri}"):
        report = target.gc(
            retain_versions=args.retain_versions,
            retain_for=args.retain_for,
            grace=args.grace,
            dry_run=args.dry_run,
            force=args.force,
        )
    print(report)


def repair(args: argparse.Namespace) -> None:
    target = open_table_or_database(args)
    with activity(f"checking {target.uri} for missing objects"):
        found = target.repair(dry_run=args.dry_run)
    for report in found.values() if isinstance(found, dict) else [found]:
        print(report)


def maintain(args: argparse.Namespace) -> int:
    """The job; a setting it refuses or a root without tables is a usage error (exit code 2,
    as for gc/maintain.py: docs/operations.md), since retrying the same command cannot help."""
    try:
        options = job_options(args)
        options.check()
        tables = find_tables(args.uri, options.storage_options)
        if not tables:
            raise InvalidArgumentError(f"no table at or under {args.uri}")
    except InvalidArgumentError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    with activity(f"maintaining {count(len(tables), 'table')}"):
        return run_job(tables, options, show=lambda text: print(text, flush=True))


def job_options(args: argparse.Namespace) -> JobOptions:
    return JobOptions(
        dry_run=args.dry_run,
        retain_versions=args.retain_versions,
        retain_for=args.retain_for,
        grace=args.grace,
        target_file_size=args.target_file_size,
        min_deleted_fraction=args.min_deleted_fraction,
        compact=not args.no_compact,
        force=args.force,
        storage_options=storage_options(args),
    )


def add_gc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="plan and report; change nothing")
    parser.add_argument("--retain-versions", type=int, metavar="N", help="also keep the last N versions")
    parser.add_argument(
        "--retain-for",
        type=checked(retention),
        default=timedelta(days=7),
        metavar="DURATION",
        help="keep every version current within this long ('none': count only) (default: 7d)",
    )
    parser.add_argument(
        "--grace",
        type=checked(duration),
        default=None,
        metavar="DURATION",
        help="never delete an unreferenced object younger than this (default: the table's gc_grace "
        "property, 24h unless set; a shorter one needs --force)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a grace shorter than the table's gc_grace, or a retention shorter than the grace",
    )


def add_compaction_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-file-size",
        type=checked(size),
        metavar="SIZE",
        help="compaction target, e.g. 128MiB (default: the table's)",
    )
    parser.add_argument(
        "--min-deleted-fraction",
        type=checked(fraction),
        default=0.2,
        metavar="F",
        help="rewrite files with at least this fraction of rows deleted (default: 0.2)",
    )


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The scheduled job's options, shared by ``manifest-table maintain`` and gc/maintain.py."""
    add_gc_arguments(parser)
    add_compaction_arguments(parser)
    parser.add_argument("--no-compact", action="store_true", help="garbage collection only")


def add_commands(command: Any) -> None:
    """Register the maintenance commands; ``command(name, run, summary, *parents, **kw)`` adds one."""
    compacted = command("compact", compact, "merge small files and rewrite files with many deleted rows")
    add_compaction_arguments(compacted)
    compacted.add_argument("--dry-run", action="store_true", help="show what would be rewritten; change nothing")

    purged = command("purge", purge, "rewrite every file holding a deleted row (after deleting --where's rows)")
    purged.add_argument(
        "--where", metavar="EXPR", help="delete the rows matching this filter first, in the same commit"
    )

    collected = command("gc", gc, "expire old versions and delete objects no retained version needs")
    add_gc_arguments(collected)

    command("upgrade", upgrade, "move a format v1 table to format v2 in one commit (older versions stay readable)")
    repaired = command(
        "repair", repair, "commit a version without the objects the latest one references that are missing"
    )
    repaired.add_argument("--dry-run", action="store_true", help="report what is lost; commit nothing")

    job = command(
        "maintain", maintain, "compaction then GC on a table or every table under a root", metavar="ROOT_OR_URI"
    )
    add_job_arguments(job)

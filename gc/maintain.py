#!/usr/bin/env python3
"""Scheduled table maintenance: compaction, then garbage collection, on one table or on
every table under a root (a local directory or an ``s3://bucket/prefix``).

    python gc/maintain.py ROOT_OR_TABLE_URI [--dry-run] [--retain-versions N] [--retain-for 7d]
        [--grace 24h] [--target-file-size 128MiB] [--min-deleted-fraction 0.2] [--no-compact]
        [--force] [--log-level INFO]

Prints a report per table and a summary. Exit status: 0 when every table is fine, 1 when
any failed (the others are still processed), 2 for a usage error. Safe to run while writers
commit and alongside another copy of itself: a compaction that loses to a conflicting commit
is reported as skipped, and GC deletes are idempotent. See gc/README.md and docs/operations.md.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable
from pathlib import Path

try:
    import manifest_table  # noqa: F401
except ModuleNotFoundError:  # run from a source checkout that is not installed
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from manifest_table import CommitInfo, Table, open_table  # noqa: E402
from manifest_table.errors import CommitConflictError, InvalidArgumentError, ManifestTableError  # noqa: E402
from manifest_table.format.manifest import manifest_key  # noqa: E402
from manifest_table.format.pointer import POINTER_KEY  # noqa: E402
from manifest_table.maintenance import check_retention, plan_compaction  # noqa: E402
from manifest_table.storage import store_for_uri  # noqa: E402

log = logging.getLogger("manifest_table.maintenance.job")

TABLE_MARKERS = (POINTER_KEY, manifest_key(0))
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.IGNORECASE)
_DURATION_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
               **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")}}


# --- arguments --------------------------------------------------------------------------
def duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``24h``, ``7d``, ``2w`` or ``0``."""
    match = _DURATION.fullmatch(text.strip())
    if text.strip() == "0":
        return timedelta(0)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90s, 30m, 24h, 7d, 2w)")
    return timedelta(**{_DURATION_UNITS[match[2].lower()]: float(match[1])})


def retention(text: str) -> timedelta | None:
    """A duration, or ``none`` for count-based retention only (needs --force)."""
    return None if text.strip().lower() == "none" else duration(text)


def size(text: str) -> int:
    """Bytes: ``134217728``, ``128MiB``, ``64MB``, ``1GiB``."""
    match = _SIZE.fullmatch(text.strip())
    if not match or float(match[1]) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive size: {text!r} (use e.g. 128MiB, 64MB, 1GiB)")
    return int(float(match[1]) * _SIZE_UNITS[(match[2] or "").lower()])


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"not a fraction in (0, 1]: {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maintain.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("target", metavar="ROOT_OR_TABLE_URI",
                   help="a table, or a directory / s3:// prefix holding tables at any depth")
    p.add_argument("--dry-run", action="store_true", help="plan and report; change nothing")
    p.add_argument("--retain-versions", type=int, metavar="N", help="also keep the last N versions")
    p.add_argument("--retain-for", type=retention, default=timedelta(days=7), metavar="DURATION",
                   help="keep every version current within this long ('none': count only)")
    p.add_argument("--grace", type=duration, default=timedelta(hours=24), metavar="DURATION",
                   help="never delete an unreferenced object younger than this")
    p.add_argument("--target-file-size", type=size, metavar="SIZE",
                   help="compaction target (default: the library's, 128MiB)")
    p.add_argument("--min-deleted-fraction", type=fraction, default=0.2, metavar="F",
                   help="rewrite files with at least this fraction of rows deleted")
    p.add_argument("--no-compact", action="store_true", help="garbage collection only")
    p.add_argument("--force", action="store_true", help="allow a retention shorter than the grace period")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


# --- finding tables ---------------------------------------------------------------------
def find_tables(root: str) -> list[str]:
    """``root`` if it is a table, else every table below it (found by one LIST)."""
    store = store_for_uri(root)
    if any(store.head(marker) is not None for marker in TABLE_MARKERS):
        return [root]
    prefixes = {info.key[:-len(marker) - 1] for info in store.list() for marker in TABLE_MARKERS
                if info.key.endswith("/" + marker)}
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


def maintain(uri: str, args: argparse.Namespace, compact: Compactor = local_compaction) -> Outcome:
    """Compaction then GC on one table. Every failure is caught and reported: one broken
    table must not stop the others."""
    outcome = Outcome(uri)
    try:
        table = open_table(uri)
        if not args.no_compact:
            outcome.lines.append(_compact(table, args, outcome, compact))
        report = table.gc(args.retain_versions, args.retain_for, args.grace, args.dry_run, args.force)
        outcome.lines.append(str(report))
    except ManifestTableError as exc:
        outcome.ok, outcome.error = False, f"{type(exc).__name__}: {exc}"
        log.error("%s: %s", uri, outcome.error)
    except Exception as exc:  # a bug or an unexpected failure: keep going with the other tables
        outcome.ok, outcome.error = False, f"unexpected {type(exc).__name__}: {exc}"
        log.exception("%s: unexpected error", uri)
    return outcome


def _compact(table: Table, args: argparse.Namespace, outcome: Outcome, compact: Compactor) -> str:
    if args.dry_run:
        target = args.target_file_size or table.write_options.target_file_size
        groups = plan_compaction(table.manifest(), target, args.min_deleted_fraction)
        return (f"compaction (dry run): would rewrite {sum(len(g.files) for g in groups)} files "
                f"into {len(groups)}" if groups else "compaction (dry run): nothing to do")
    try:
        info = compact(table, args.target_file_size, args.min_deleted_fraction)
    except CommitConflictError as exc:
        outcome.compaction_skipped = True
        log.warning("%s: compaction skipped: %s", table.uri, exc)
        return f"compaction skipped: a concurrent commit conflicted ({exc})"
    if not info.committed:
        return "compaction: nothing to do"
    m = info.metrics
    return (f"compaction: version {info.version}: {m['files_removed']} files -> {m['files_added']}, "
            f"{m['rows_rewritten']} rows rewritten, {m['rows_dropped']} deleted rows dropped, "
            f"{m['bytes_removed']} -> {m['bytes_added']} bytes")


# --- the job ----------------------------------------------------------------------------
def main(argv: list[str] | None = None, compact: Compactor = local_compaction) -> int:
    p = parser()
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_retention(args.retain_versions, args.retain_for, args.grace, args.force)
        tables = find_tables(args.target)
    except InvalidArgumentError as exc:
        p.error(str(exc))
    except ManifestTableError as exc:
        log.error("cannot list %s: %s", args.target, exc)
        return 1
    if not tables:
        p.error(f"no table at or under {args.target}")

    outcomes = []
    for uri in tables:
        outcome = maintain(uri, args, compact)
        outcomes.append(outcome)
        print(f"== {uri} ==", *outcome.lines, *([f"FAILED: {outcome.error}"] if not outcome.ok else []),
              sep="\n", end="\n\n", flush=True)
    failed = [o for o in outcomes if not o.ok]
    skipped = sum(o.compaction_skipped for o in outcomes)
    print(f"summary: {len(outcomes)} tables, {len(outcomes) - len(failed)} ok, {len(failed)} failed, "
          f"{skipped} compactions skipped{' (dry run)' if args.dry_run else ''}")
    for o in failed:
        print(f"  FAILED {o.uri}: {o.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

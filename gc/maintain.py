#!/usr/bin/env python3
"""Scheduled table maintenance: compaction, then garbage collection, on one table or on
every table under a root (a local directory or an ``s3://bucket/prefix``).

    python gc/maintain.py ROOT_OR_TABLE_URI [--dry-run] [--retain-versions N] [--retain-for 7d]
        [--grace 24h] [--target-file-size 128MiB] [--min-deleted-fraction 0.2] [--no-compact]
        [--force] [--storage-option KEY=VALUE]... [--log-level INFO]

Prints a report per table and a summary. Exit status: 0 when every table is fine, 1 when
any failed (the others are still processed), 2 for a usage error. Safe to run while writers
commit and alongside another copy of itself: a compaction that loses to a conflicting commit
is reported as skipped, and GC deletes are idempotent. This is the scheduled entry point of
the job in ``manifest_table.maintenance.job`` (also ``manifest-table maintain``). See
gc/README.md and docs/operations.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

try:
    import manifest_table  # noqa: F401
except ModuleNotFoundError:  # run from a source checkout that is not installed
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from manifest_table.cli.maintain import add_job_arguments, job_options  # noqa: E402
from manifest_table.cli.options import duration, key_value, size  # noqa: E402,F401
from manifest_table.errors import InvalidArgumentError, ManifestTableError  # noqa: E402
from manifest_table.maintenance.job import Compactor, find_tables, local_compaction, run_job  # noqa: E402,F401

log = logging.getLogger("manifest_table.maintenance.job")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maintain.py", description=__doc__.split("\n\n")[0])
    p.add_argument("uri", metavar="ROOT_OR_TABLE_URI",
                   help="a table, or a directory / s3:// prefix holding tables at any depth")
    add_job_arguments(p)
    p.add_argument("--storage-option", dest="storage_options", action="append", default=[], type=key_value,
                   metavar="KEY=VALUE", help="an S3 option (endpoint_url, region, access_key_id, "
                   "secret_access_key, session_token); repeatable")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def main(argv: list[str] | None = None, compact: Compactor = local_compaction) -> int:
    p = parser()
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = job_options(args)
        options.check()
        tables = find_tables(args.uri, options.storage_options)
    except InvalidArgumentError as exc:
        p.error(str(exc))
    except ManifestTableError as exc:
        log.error("cannot list %s: %s", args.uri, exc)
        return 1
    if not tables:
        p.error(f"no table at or under {args.uri}")
    return run_job(tables, options, compact, show=lambda text: print(text, flush=True))


if __name__ == "__main__":
    sys.exit(main())

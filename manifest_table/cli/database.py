"""``manifest-table db create|tables|history|snapshot``: a database as a whole. Its tables
are taken by every other command as ``DB_URI/TABLE`` (docs/databases.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..database import create_database, open_database
from .options import instant, storage_options, whole_number
from .read import show_history, timestamp


def create(args: argparse.Namespace) -> None:
    db = create_database(args.uri, storage_options=storage_options(args))
    print(f"created database {db.uri} (version 0)")


def tables(args: argparse.Namespace) -> None:
    for name in open_database(args.uri, storage_options=storage_options(args)).tables(args.version, args.as_of):
        print(name)


def history(args: argparse.Namespace) -> None:
    show_history(
        open_database(args.uri, storage_options=storage_options(args)).history(args.limit), args.json, tables=True
    )


def snapshot(args: argparse.Namespace) -> None:
    """Every table at one database version: its rows, files and bytes."""
    snap = open_database(args.uri, storage_options=storage_options(args)).snapshot(args.version, args.as_of)
    facts: dict[str, Any] = {"version": snap.version, "tables": {}}
    for name in snap.tables():
        manifest = snap.table(name).manifest()
        facts["timestamp"] = timestamp(manifest.timestamp)
        facts["tables"][name] = {
            "live_rows": manifest.live_rows,
            "data_files": manifest.totals.files,
            "data_bytes": manifest.totals.bytes,
        }
    if args.json:
        print(json.dumps(facts, indent=2))
        return
    print(f"version {snap.version}" + (f" ({facts['timestamp']})" if "timestamp" in facts else ""))
    for name, t in facts["tables"].items():
        print(f"  {name}: {t['live_rows']} rows in {t['data_files']} files ({t['data_bytes']} bytes)")


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``db`` and its subcommands, on the top-level subparsers ``commands``."""
    db = commands.add_parser(
        "db",
        parents=[common],
        help="create a database, list its tables, history, snapshot",
        description="A database: tables committed together (its tables: DB_URI/TABLE).",
    )
    sub = db.add_subparsers(title="database commands", required=True, metavar="COMMAND")

    def command(name: str, run: Any, summary: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=summary, description=summary)
        parser.add_argument("uri", metavar="DB_URI", help="database location: a directory, file:// or s3://")
        parser.set_defaults(run=run)
        return parser

    def at_version(parser: argparse.ArgumentParser) -> None:
        travel = parser.add_mutually_exclusive_group()
        travel.add_argument("--version", type=int, metavar="N", help="as of database version N")
        travel.add_argument(
            "--as-of", type=instant, metavar="TIMESTAMP", help="as of an ISO 8601 time (no offset: UTC)"
        )

    command("create", create, "create an empty database")
    at_version(command("tables", tables, "list the tables"))
    listed = command("history", history, "list database versions, newest first, with the tables each changed")
    listed.add_argument("--limit", type=whole_number, metavar="N", help="show at most N versions")
    listed.add_argument("--json", action="store_true", help="print JSON")
    shown = command("snapshot", snapshot, "every table at one version: rows, files, bytes")
    at_version(shown)
    shown.add_argument("--json", action="store_true", help="print JSON")

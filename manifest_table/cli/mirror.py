"""``mirror``: turn a table's Iceberg and Delta mirrors on or off, or bring them up to date
(docs/mirrors.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..table import Table
from .options import PROG, open_from
from .progress import activity


def mirror(args: argparse.Namespace) -> int | None:
    wanted = [name for name in ("iceberg", "delta") if getattr(args, name)]
    if wanted and (args.off or args.sync):
        other = "--off" if args.off else "--sync"
        print(
            f"{PROG}: error: {other} cannot be combined with {' and '.join(f'--{n}' for n in wanted)}: "
            "--iceberg and --delta turn on exactly the mirrors named, --off turns them all off, "
            "--sync brings those on up to date",
            file=sys.stderr,
        )
        return 2
    table = open_from(args)
    if args.off or wanted:
        with activity(f"setting the mirrors of {table.uri}"):
            info = table.set_mirrors(wanted)
        print(
            f"{table.uri}: mirrors {', '.join(wanted) or 'off'}"
            + (f" from version {info.version}" if info.committed else " (unchanged)")
        )
    elif args.sync:
        with activity(f"syncing the mirrors of {table.uri}"):
            table.sync_mirrors()
    print(f"{table.uri}: {describe(versions(table))}")
    return None


def versions(table: Table) -> dict[str, int | None]:
    """Each mirror that is on, with the newest version it describes."""
    from ..mirrors.sync import status  # (fastavro and the mirrors load only where needed)

    return status(table.log, table.mirrors)


def describe(mirrored: dict[str, int | None]) -> str:
    if not mirrored:
        return "no mirrors"
    return ", ".join(
        f"{name} at version {v}" if v is not None else f"{name} (not written yet)" for name, v in mirrored.items()
    )


def add_commands(command: Any) -> None:
    """Register ``mirror``; ``command(name, run, summary, *parents, **kw)`` adds one."""
    sub = command("mirror", mirror, "turn Iceberg / Delta mirrors of a table on or off, or sync them")
    which = sub.add_mutually_exclusive_group()
    sub.add_argument("--iceberg", action="store_true", help="mirror to Iceberg v3 (with --delta: both)")
    sub.add_argument("--delta", action="store_true", help="mirror to Delta Lake (with --iceberg: both)")
    which.add_argument("--sync", action="store_true", help="bring every mirror up to the latest version")
    which.add_argument("--off", action="store_true", help="stop mirroring (the objects go with gc)")

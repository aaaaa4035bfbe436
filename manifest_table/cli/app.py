"""The ``manifest-table`` command line: parsing, logging, and how it ends.

A user mistake (a bad filter, a missing table, an unreadable file) ends with one line
``manifest-table: error: ...`` on stderr and exit code 1, or 2 for a command line that does
not parse. A reader that stops early (``| head``) ends it quietly with exit code 0. Any other
exception is a bug and keeps its traceback. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Callable
from importlib.metadata import version as package_version
from typing import Any, NoReturn

import pyarrow.fs as pafs

from ..errors import InvalidFilterError, ManifestTableError
from ..expressions.literals import QUOTE_HINT
from . import database, maintain, mirror, properties, read, write
from .options import common_options

PROG = read.PROG


def run() -> NoReturn:
    """The ``manifest-table`` process: ``main``, then an exit that cannot crash. pyarrow's S3
    filesystem can abort the interpreter's shutdown ("terminate called without an active
    exception", exit -6, about 1 run in 30 here: apache/arrow#34314, #41087) after a
    command has fully succeeded, so the process finalises S3 itself once nothing uses it."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.collect()  # drop the command's filesystem objects before S3 is finalised
    pafs.finalize_s3()
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code rather than exiting, so tests can call it."""
    parser = _parser()
    try:
        args = parser.parse_args(argv, namespace=argparse.Namespace(storage_options=[], verbose=0))
    except SystemExit as exc:  # a usage error (2), or --help / --version (0)
        return int(exc.code or 0)
    _configure_logging(args.verbose)
    try:
        return args.run(args) or 0
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (ManifestTableError, OSError) as exc:  # OSError: a missing, unreadable or unwritable path
        print(f"{PROG}: error: {_one_line(exc, args)}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common], description="Inspect, query, write and maintain manifest_table tables."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version('manifest_table')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    def command(
        name: str,
        run: Callable[[argparse.Namespace], Any],
        summary: str,
        *parents: argparse.ArgumentParser,
        metavar: str = "URI",
        aliases: list[str] | None = None,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name, parents=[common, *parents], help=summary, description=summary, aliases=aliases or []
        )
        sub.add_argument("uri", metavar=metavar, help="table location: a directory, file://, s3://, gs:// or az://")
        sub.set_defaults(run=run)
        return sub

    snapshot = argparse.ArgumentParser(add_help=False)
    snapshot.add_argument("--where", metavar="EXPR", help="filter, e.g. \"id > 5 AND name LIKE 'a%%'\"")
    travel = snapshot.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, metavar="N", help="read version N")
    travel.add_argument(
        "--as-of", metavar="TIMESTAMP", help="read the version current at an ISO 8601 time (no offset: UTC)"
    )

    read.add_commands(command, snapshot)
    write.add_commands(command)
    maintain.add_commands(command)
    mirror.add_commands(command)
    properties.add_commands(command)
    database.add_commands(commands, common)
    return parser


def _configure_logging(verbose: int) -> None:
    """``-v`` shows progress messages, ``-vv`` debug ones, on stderr."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("manifest_table").setLevel(
        logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    )


def _one_line(exc: BaseException, args: argparse.Namespace) -> str:
    """The error as one line; a filter's parse error keeps its expression but not the
    caret under it, and a double-quoted string gets the hint SQL users need."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    message = lines[0] + (f" {lines[1].strip()}" if len(lines) > 1 and lines[0].endswith(":") else "")
    where = getattr(args, "where", None) or ""
    if isinstance(exc, InvalidFilterError) and '"' in where and "single quotes" not in message:
        message += QUOTE_HINT
    return message


def _silence_stdout() -> None:
    """The reader has gone: point stdout at /dev/null so the interpreter's final flush does
    not complain about the pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (an in-process caller's capture)
        pass

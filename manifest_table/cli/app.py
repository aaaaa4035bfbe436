"""The ``manifest-table`` command line: parsing, logging, and how it ends.

A user mistake (a bad filter, a missing table, an unreadable file) ends with one line
``manifest-table: error: ...`` on stderr and exit code 1, or 2 for a command line that does
not parse. A reader that stops early (``| head``) ends it quietly with exit code 0. Any other
exception is a bug and keeps its traceback. See docs/cli.md.

The command starts at once: only the module of the command being run is imported (with the
library and pyarrow behind it), so ``--help``, ``--version`` and a usage error import none
of them. ``COMMANDS`` names each command's module and summary for that;
tests/cli/test_startup.py checks it against what the modules register.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .. import __version__
from ..errors import InvalidFilterError, ManifestTableError
from .options import PROG, common_options

COMMANDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "info": ("read", "show version, schema, size and row counts", ("describe",)),
    "history": ("read", "list versions, newest first", ()),
    "scan": ("read", "print rows, or write them to a file", ()),
    "count": ("read", "count live rows", ()),
    "changes": ("read", "print the rows changed since a version", ()),
    "inspect": ("read", "print the table's versions, data files or segments as a table", ()),
    "create": ("write", "create an empty table", ()),
    "append": ("write", "append Parquet, CSV, JSON-lines or Arrow files in one commit", ()),
    "delete": ("write", "delete the rows matching a filter", ()),
    "overwrite": ("write", "replace every row, or the rows matching --where, in one commit", ()),
    "update": ("write", "assign new values to the rows matching --where (every row without it)", ()),
    "upsert": ("write", "replace the rows whose key a file's rows hold and insert the others, in one commit", ()),
    "compact": ("maintain", "merge small files and rewrite files with many deleted rows", ()),
    "purge": ("maintain", "rewrite every file holding a deleted row (after deleting --where's rows)", ()),
    "gc": ("maintain", "expire old versions and delete objects no retained version needs", ()),
    "upgrade": ("maintain", "move a format v1 table to format v2 in one commit (older versions stay readable)", ()),
    "repair": ("maintain", "commit a version without the objects the latest one references that are missing", ()),
    "properties": ("properties", "show a table's or a database's properties, or set some in one commit", ()),
    "maintain": ("maintain", "compaction then GC on a table or every table under a root", ()),
    "mirror": ("mirror", "turn Iceberg / Delta mirrors of a table on or off, or sync them", ()),
    "db": ("database", "create a database, list its tables, history, snapshot", ()),
}
"""Every command: the module under cli/ that registers and runs it, its summary, its aliases."""


def run() -> NoReturn:
    """The ``manifest-table`` process: ``main``, then an exit that cannot crash. pyarrow's S3
    filesystem can abort the interpreter's shutdown ("terminate called without an active
    exception", exit -6, about 1 run in 30 here: apache/arrow#34314, #41087) after a
    command has fully succeeded, so the process finalises S3 itself once nothing uses it."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    fs = sys.modules.get("pyarrow.fs")  # not imported: S3 was never initialised
    if fs is not None:
        import gc

        gc.collect()  # drop the command's filesystem objects before S3 is finalised
        fs.finalize_s3()
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code rather than exiting, so tests can call it."""
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser(_command_of(argv))
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


def _command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names (aliases resolved; an unknown word as it is), or None: the
    first word that is not a global option or its value."""
    words = iter(argv)
    for word in words:
        if word == "--storage-option":
            next(words, None)
        elif not word.startswith("-"):
            return next((name for name, (_, _, aliases) in COMMANDS.items() if word in aliases), word)
    return None


def _parser(wanted: str | None, every: bool = False) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command ``wanted`` only (``every``: of every
    command); the others are their names and summaries, enough for ``--help`` and for a
    mistyped command."""
    common = common_options()
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common], description="Inspect, query, write and maintain manifest_table tables."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    modules = {module for module, _, _ in COMMANDS.values()} if every else set()
    if wanted in COMMANDS:
        modules.add(COMMANDS[wanted][0])
    for name, (module, summary, aliases) in COMMANDS.items():
        if module not in modules:
            commands.add_parser(name, help=summary, aliases=list(aliases))

    def command(
        name: str,
        run: Callable[[argparse.Namespace], Any],
        summary: str,
        *parents: argparse.ArgumentParser,
        metavar: str = "URI",
        aliases: list[str] | None = None,
    ) -> argparse.ArgumentParser:
        if not every and name != wanted:  # a sibling in the same module: not this run's
            return argparse.ArgumentParser(add_help=False)
        sub = commands.add_parser(
            name, parents=[common, *parents], help=summary, description=summary, aliases=aliases or []
        )
        sub.add_argument("uri", metavar=metavar, help="table location: a directory, file://, s3://, gs:// or az://")
        sub.set_defaults(run=run)
        return sub

    for module in sorted(modules):
        _register(importlib.import_module(f".{module}", __package__), command, commands, common)
    return parser


def _register(module: Any, command: Callable[..., Any], commands: Any, common: argparse.ArgumentParser) -> None:
    """A command module's ``add_commands``: ``db`` adds its own subcommands."""
    if module.__name__.endswith(".database"):
        module.add_commands(commands, common)
    else:
        module.add_commands(command)


def _configure_logging(verbose: int) -> None:
    """``-v`` shows progress messages, ``-vv`` debug ones, on stderr."""
    import logging  # (not for --help)

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("manifest_table").setLevel(
        logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    )


def _one_line(exc: BaseException, args: argparse.Namespace) -> str:
    """The error as one line, in the command line's words (``CLI_WORDS``): a filter's parse
    error keeps its expression but not the caret under it, and a double-quoted string gets
    the hint SQL users need."""
    from ..expressions.literals import QUOTE_HINT

    lines = str(exc).splitlines() or [type(exc).__name__]
    message = lines[0] + (f" {lines[1].strip()}" if len(lines) > 1 and lines[0].endswith(":") else "")
    where = getattr(args, "where", None) or ""
    if isinstance(exc, InvalidFilterError) and '"' in where and "single quotes" not in message:
        message += QUOTE_HINT
    for python, cli in _cli_words().items():
        message = message.replace(python, cli)
    return message


def _cli_words() -> dict[str, str]:
    """What the library's messages say in Python's words, in the command line's."""
    from ..format.manifest import DATABASE_HINT
    from ..format.schema import MERGE_HINT

    return {
        MERGE_HINT: "--schema-mode merge adds new columns",
        DATABASE_HINT: "use manifest-table db COMMAND DB_URI, and DB_URI/TABLE for its tables",
    }


def _silence_stdout() -> None:
    """The reader has gone: point stdout at /dev/null so the interpreter's final flush does
    not complain about the pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (an in-process caller's capture)
        pass

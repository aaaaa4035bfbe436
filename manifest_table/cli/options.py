"""Argument types (durations, sizes, fractions, KEY=VALUE, ...) and the options every command
shares (``--storage-option``, ``-v``). The maintenance job's script (gc/maintain.py) parses with them too."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from ..arguments import check_time, parse_duration, parse_size
from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..database import Database
    from ..table import Table

T = TypeVar("T")
PROG = "manifest-table"
duration = parse_duration
size = parse_size


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def whole_number(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def retention(text: str) -> timedelta | None:
    """A duration, or ``none`` for count-based retention only (needs ``force``)."""
    return None if text.strip().lower() == "none" else duration(text)


def instant(text: str) -> datetime:
    """``--as-of``, ``--since``, ``--until``: an ISO 8601 time, read as the API reads one."""
    try:
        return check_time(text)
    except InvalidArgumentError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r} (e.g. 2026-11-29T08:30:00, without an offset: UTC)"
        ) from None


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise InvalidArgumentError(f"not a fraction in (0, 1]: {text!r}")
    return value


def checked(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a library parser: its ``InvalidArgumentError`` message becomes
    argparse's usage error (exit 2) instead of a generic "invalid value"."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def common_options() -> argparse.ArgumentParser:
    """Options accepted before or after the command name; SUPPRESS keeps a subcommand from
    resetting a value given before it."""
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="an S3 option (endpoint_url, region, access_key_id, secret_access_key, session_token); repeatable",
    )
    common.add_argument("-v", "--verbose", action="count", help="log progress (-vv: debug)")
    return common


def storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    return dict(args.storage_options) or None


def open_from(args: argparse.Namespace) -> Table:
    from ..entry_points import open_table  # the library loads once a command runs

    return open_table(args.uri, storage_options=storage_options(args))


def open_table_or_database(args: argparse.Namespace) -> Table | Database:
    """The database at ``args.uri`` if there is one, else the table there."""
    from ..database import open_database
    from ..errors import DatabaseNotFoundError

    try:
        return open_database(args.uri, storage_options=storage_options(args))
    except DatabaseNotFoundError:
        return open_from(args)


class CsvDialect(NamedTuple):
    """How CSV files are read and written (``--delimiter``, ``--null-value``). Only the
    listed texts, unquoted, are null: pyarrow's default list (``NA``, ``NULL``, ``N/A``,
    ``NaN``, ...) turned Namibia's country code and every NaN into nulls."""

    delimiter: str = ","
    null_values: tuple[str, ...] = ("",)


def delimiter(text: str) -> str:
    """One character; ``\\t`` is a tab. Not one that unquoted values hold (digits, letters,
    ``.:+-`` and the space of numbers, dates and times), a quote or a line end."""
    character = "\t" if text == "\\t" else text
    if len(character) != 1 or character.isalnum() or character in '"\n\r .:+-':
        raise argparse.ArgumentTypeError(f"expected one character such as ',', ';', '|' or '\\t', got {text!r}")
    return character


def csv_options(reading: bool) -> argparse.ArgumentParser:
    """``--delimiter``, and for commands that read CSV ``--null-value``."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--delimiter",
        type=delimiter,
        default=",",
        metavar="CHAR",
        help="the CSV field separator (default ','; '\\t' for tabs)",
    )
    if reading:
        options.add_argument(
            "--null-value",
            dest="null_values",
            action="append",
            metavar="TEXT",
            help="an unquoted CSV field that means null; repeatable; replaces the default, "
            "which is only the empty field (give --null-value '' to keep it)",
        )
    return options


def dialect(args: argparse.Namespace) -> CsvDialect:
    nulls = getattr(args, "null_values", None)
    return CsvDialect(args.delimiter) if nulls is None else CsvDialect(args.delimiter, tuple(nulls))

"""Commands that write: ``create``, ``append``, ``delete``, ``overwrite``, ``update``, ``upsert``."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import pyarrow as pa

from ..commit import CommitInfo
from ..database import open_database
from ..entry_points import create_table
from ..errors import DatabaseNotFoundError, InvalidArgumentError, TableExistsError, TableNotFoundError
from ..format.manifest import FORMAT_VERSION, NEW_TABLE_FORMAT_VERSION
from ..operations.upsert import WHEN_MATCHED, WHEN_NOT_MATCHED, WHEN_NOT_MATCHED_BY_SOURCE
from ..table import Table
from ..wording import count
from .inputs import INPUT_FORMATS, read_input
from .jsonl import to_timestamp
from .options import csv_options, dialect, key_value, names, open_from, storage_options
from .progress import counted
from .read import metrics
from .schema_spec import file_schema, parse_schema

log = logging.getLogger("manifest_table.cli")


def create(args: argparse.Namespace) -> None:
    schema = parse_schema(args.schema) if args.schema is not None else file_schema(args.like, dialect(args))
    _create(args, schema)


def _create(args: argparse.Namespace, schema: pa.Schema) -> Table:
    format_version = getattr(args, "format_version", NEW_TABLE_FORMAT_VERSION)
    table = create_in_place(args.uri, schema, storage_options(args), format_version)
    print(f"created {table.uri} (version 0, format version {format_version}) with {count(len(schema), 'column')}")
    return table


def _open_or_create(args: argparse.Namespace) -> Table:
    """``append --create``: the table, created from the first file's schema when missing."""
    try:
        return open_from(args)
    except TableNotFoundError:
        schema = file_schema(args.files[0], dialect(args))
    try:
        return _create(args, schema)
    except TableExistsError:  # another writer created it meanwhile
        return open_from(args)


def create_in_place(uri: str, schema: pa.Schema, options: dict[str, str] | None, format_version: int) -> Table:
    """A table of the database ``uri`` names the parent of (``DB_URI/TABLE``), else a table at ``uri``."""
    parent, _, name = uri.rstrip("/").rpartition("/")
    if parent:
        try:
            db = open_database(parent, storage_options=options)
        except (DatabaseNotFoundError, InvalidArgumentError):
            pass
        else:
            return db.create_table(name, schema, format_version=format_version)
    return create_table(uri, schema, storage_options=options, format_version=format_version)


def append(args: argparse.Namespace) -> None:
    table = _open_or_create(args) if args.create else open_from(args)
    # Open every input first: a missing or unreadable file fails before any data is written.
    readers = [read_input(path, table.schema, dialect(args)) for path in args.files]
    with table.transaction() as tx:
        for path, reader in zip(args.files, readers):
            log.info("appending %s", path)
            tx.append(_counted(reader, f"appending {path}"))
        info = tx.commit()
    print(summary(info))


def overwrite(args: argparse.Namespace) -> None:
    table = open_from(args)
    readers = [read_input(path, table.schema, dialect(args)) for path in args.files]
    with table.transaction() as tx:
        for i, (path, reader) in enumerate(zip(args.files, readers)):
            log.info("writing %s", path)
            data = _counted(reader, f"writing {path}")
            if i == 0:
                tx.overwrite(data, args.where)
            else:
                tx.append(data)
        info = tx.commit()
    print(summary(info))


def delete(args: argparse.Namespace) -> None:
    info = open_from(args).delete(args.where)
    deleted = info.metrics.get("rows_deleted", 0)
    state = "is now at" if info.committed else "is unchanged at"
    print(f"deleted {deleted} row{'' if deleted == 1 else 's'}; the table {state} version {info.version}")


def update(args: argparse.Namespace) -> None:
    table = open_from(args)
    values = {name: typed_value(name, text, table.schema) for name, text in args.values}
    info = table.update(dict(args.set) or None, args.where, values=values or None)
    updated = info.metrics.get("rows_updated", 0)
    state = "is now at" if info.committed else "is unchanged at"
    print(f"updated {updated} row{'' if updated == 1 else 's'}; the table {state} version {info.version}")


def typed_value(name: str, text: str, schema: pa.Schema) -> Any:
    """``--value NAME=TEXT``: the text as a value of the column's type, parsed as ``append``
    parses CSV (a timestamp without an offset is UTC). An unknown column is left to the
    library, which names the nearest one."""
    if name not in schema.names:
        return text
    arrow_type = schema.field(name).type
    try:
        if pa.types.is_timestamp(arrow_type) and arrow_type.tz:
            return to_timestamp(pa.array([text]), arrow_type)[0].as_py()
        return pa.array([text]).cast(arrow_type)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgumentError(f"--value {name}={text!r} is not a value of type {arrow_type} ({exc})") from None


def upsert(args: argparse.Namespace) -> None:
    table = open_from(args)
    reader = read_input(args.file, table.schema, dialect(args))
    log.info("upserting %s", args.file)
    info = table.upsert(
        _counted(reader, f"upserting {args.file}"),
        args.on,
        when_matched=args.when_matched,
        when_not_matched=args.when_not_matched,
        when_not_matched_by_source=args.when_not_matched_by_source,
        columns=args.columns,
    )
    print(summary(info))


def add_commands(command: Any) -> None:
    """Register the writing commands; ``command(name, run, summary, *parents, **kw)`` adds one."""
    csv = csv_options(reading=True)
    created = command("create", create, "create an empty table", csv)
    schema = created.add_mutually_exclusive_group(required=True)
    schema.add_argument("--schema", metavar="SPEC", help="e.g. 'id:int64,name:string,ts:timestamp[us, tz=UTC]'")
    schema.add_argument(
        "--like",
        metavar="FILE",
        help="take the schema of a Parquet or Arrow file, or infer it from a CSV or JSON-lines file",
    )
    created.add_argument(
        "--format-version",
        type=int,
        choices=range(1, FORMAT_VERSION + 1),
        default=NEW_TABLE_FORMAT_VERSION,
        help=f"table format (default {NEW_TABLE_FORMAT_VERSION}; 1 is readable by releases before format v2)",
    )

    files_help = ", ".join(f"*{suffix}" for suffix in INPUT_FORMATS)
    appended = command("append", append, "append Parquet, CSV, JSON-lines or Arrow files in one commit", csv)
    appended.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    appended.add_argument(
        "--create",
        action="store_true",
        help="create the table from the first file's schema when there is none (as create --like)",
    )

    deleted = command("delete", delete, "delete the rows matching a filter")
    deleted.add_argument("where", metavar="WHERE", help='filter, e.g. "id IN (1, 2)"')

    replaced = command("overwrite", overwrite, "replace every row, or the rows matching --where, in one commit", csv)
    replaced.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    replaced.add_argument("--where", metavar="EXPR", help="replace only the rows matching this filter")

    updated = command("update", update, "assign new values to the rows matching --where (every row without it)")
    updated.add_argument("--where", metavar="EXPR", help="update only the rows matching this filter")
    updated.add_argument(
        "--set",
        action="append",
        type=key_value,
        default=[],
        metavar="COLUMN=EXPR",
        help="assign an expression, e.g. 'qty=qty + 1' or \"name='DE'\"; repeatable",
    )
    updated.add_argument(
        "--value",
        dest="values",
        action="append",
        type=key_value,
        default=[],
        metavar="COLUMN=TEXT",
        help="assign a plain value, never parsed as an expression, "
        "read as the column's type, e.g. status=shipped; repeatable",
    )

    merged = command(
        "upsert", upsert, "replace the rows whose key a file's rows hold and insert the others, in one commit", csv
    )
    merged.add_argument("file", metavar="FILE", help=files_help)
    merged.add_argument(
        "--on",
        required=True,
        type=names,
        metavar="COLUMNS",
        help="key columns, comma-separated (a key may appear once in FILE)",
    )
    merged.add_argument(
        "--when-matched",
        choices=WHEN_MATCHED,
        default="update",
        help="what to do with a row whose key the table holds (default: update)",
    )
    merged.add_argument(
        "--when-not-matched",
        choices=WHEN_NOT_MATCHED,
        default="insert",
        help="what to do with a row whose key it does not (default: insert)",
    )
    merged.add_argument(
        "--when-not-matched-by-source",
        choices=WHEN_NOT_MATCHED_BY_SOURCE,
        default="ignore",
        help="what to do with a table row whose key FILE lacks (default: ignore; delete: make "
        "the table's keys those of FILE)",
    )
    merged.add_argument(
        "--columns",
        type=names,
        metavar="COLUMNS",
        help="the columns a matched row's update sets, comma-separated (FILE may then omit "
        "the others; inserted rows get nulls there)",
    )


def summary(info: CommitInfo) -> str:
    if not info.committed:
        return f"nothing to commit; the table is unchanged at version {info.version}"
    return f"committed version {info.version} ({info.operation}): {metrics(info)}"


def _counted(reader: pa.RecordBatchReader, description: str) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(reader.schema, counted(reader, description))

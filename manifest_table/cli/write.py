"""Commands that write: ``create``, ``append``, ``delete``, ``overwrite``, ``upsert``."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import pyarrow as pa

from ..commit import CommitInfo
from ..database import open_database
from ..errors import DatabaseNotFoundError, InvalidArgumentError
from ..format.manifest import FORMAT_VERSION
from ..operations.upsert import WHEN_MATCHED, WHEN_NOT_MATCHED
from ..table import Table, create_table
from .inputs import INPUT_FORMATS, read_input
from .options import csv_options, dialect, names, open_from, storage_options
from .progress import counted
from .read import metrics
from .schema_spec import parquet_schema, parse_schema

log = logging.getLogger("manifest_table.cli")


def create(args: argparse.Namespace) -> None:
    schema = parse_schema(args.schema) if args.schema is not None else parquet_schema(args.like)
    table = create_in_place(args.uri, schema, storage_options(args), args.format_version)
    print(f"created {table.uri} (version 0, format version {args.format_version}) with {len(schema)} columns")


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
    table = open_from(args)
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


def upsert(args: argparse.Namespace) -> None:
    table = open_from(args)
    reader = read_input(args.file, table.schema, dialect(args))
    log.info("upserting %s", args.file)
    info = table.upsert(_counted(reader, f"upserting {args.file}"), args.on,
                        when_matched=args.when_matched, when_not_matched=args.when_not_matched)
    print(summary(info))


def add_commands(command: Any) -> None:
    """Register the writing commands; ``command(name, run, summary, *parents, **kw)`` adds one."""
    created = command("create", create, "create an empty table")
    schema = created.add_mutually_exclusive_group(required=True)
    schema.add_argument("--schema", metavar="SPEC", help="e.g. 'id:int64,name:string,ts:timestamp[us, tz=UTC]'")
    schema.add_argument("--like", metavar="FILE.parquet", help="take the schema of a Parquet file")
    created.add_argument("--format-version", type=int, choices=(1, FORMAT_VERSION), default=FORMAT_VERSION,
                         help=f"table format (default {FORMAT_VERSION}; 1 is readable by releases before format v2)")

    files_help = ", ".join(f"*{suffix}" for suffix in INPUT_FORMATS)
    csv = csv_options(reading=True)
    appended = command("append", append, "append Parquet, CSV, JSON-lines or Arrow files in one commit", csv)
    appended.add_argument("files", nargs="+", metavar="FILE", help=files_help)

    deleted = command("delete", delete, "delete the rows matching a filter")
    deleted.add_argument("where", metavar="WHERE", help="filter, e.g. \"id IN (1, 2)\"")

    replaced = command("overwrite", overwrite, "replace every row, or the rows matching --where, in one commit", csv)
    replaced.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    replaced.add_argument("--where", metavar="EXPR", help="replace only the rows matching this filter")

    merged = command("upsert", upsert, "replace the rows whose key a file's rows hold and insert the others, "
                     "in one commit", csv)
    merged.add_argument("file", metavar="FILE", help=files_help)
    merged.add_argument("--on", required=True, type=names, metavar="COLUMNS",
                        help="key columns, comma-separated (a key may appear once in FILE)")
    merged.add_argument("--when-matched", choices=WHEN_MATCHED, default="update",
                        help="what to do with a row whose key the table holds (default: update)")
    merged.add_argument("--when-not-matched", choices=WHEN_NOT_MATCHED, default="insert",
                        help="what to do with a row whose key it does not (default: insert)")


def summary(info: CommitInfo) -> str:
    if not info.committed:
        return f"nothing to commit; the table is unchanged at version {info.version}"
    return f"committed version {info.version} ({info.operation}): {metrics(info)}"


def _counted(reader: pa.RecordBatchReader, description: str) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(reader.schema, counted(reader, description))

"""Commands that write: ``create``, ``append``, ``delete``, ``overwrite``, ``update``, ``upsert``."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import pyarrow as pa

from ..commit import CommitInfo
from ..data.ingest import batches_of
from ..entry_points import create_from_rows, create_table
from ..errors import InvalidArgumentError, InvalidFilterError, TableNotFoundError
from ..expressions import parse_term, to_expr
from ..format.column_types import with_doubles
from ..format.manifest import FORMAT_VERSION, NEW_TABLE_FORMAT_VERSION
from ..operations.overwrite import check_within
from ..operations.upsert import WHEN_MATCHED, WHEN_NOT_MATCHED, WHEN_NOT_MATCHED_BY_SOURCE
from ..wording import count
from .inputs import INPUT_FORMATS, read_input
from .jsonl import to_timestamp
from .options import csv_options, dialect, key_value, names, open_from, storage_options
from .progress import counted
from .read import metrics
from .schema_spec import file_schema, parse_schema

logger = logging.getLogger("manifest_table.cli")


def create(args: argparse.Namespace) -> None:
    schema = parse_schema(args.schema) if args.schema is not None else file_schema(args.like, dialect(args))
    table = create_table(args.uri, schema, storage_options=storage_options(args), format_version=args.format_version)
    _created(table.uri, args.format_version, schema)


def _created(uri: str, format_version: int, schema: pa.Schema) -> None:
    print(f"created {uri} (version 0, format version {format_version}) with {count(len(schema), 'column')}")


def append(args: argparse.Namespace) -> None:
    try:
        table = open_from(args)
    except TableNotFoundError:
        if not args.create:
            raise
        _create_with_files(args)
        return
    # Open every input first: a missing or unreadable file fails before any data is written.
    readers = _readers(args, table.schema)
    with table.transaction() as tx:
        for path, reader in zip(args.files, readers):
            logger.info("appending %s", path)
            tx.append(_counted(reader, f"appending {path}"), args.schema_mode)
        info = tx.commit()
    print(summary(info))


def _create_with_files(args: argparse.Namespace) -> None:
    """``append --create`` where there is no table: one made from the first file's schema
    (with ``--schema-mode merge``, every file's columns) and the files' rows, committed
    together or not at all: a file that fails leaves no table (``create_with_rows``; a
    database's table: one database commit)."""
    schema = file_schema(args.files[0], dialect(args))
    if args.schema_mode == "merge":
        for path in args.files[1:]:
            schema = _with_new_columns(schema, path, args)
    readers = _readers(args, schema)
    batches = (b for path, r in zip(args.files, readers) for b in batches_of(_counted(r, f"appending {path}"), schema))
    rows = pa.RecordBatchReader.from_batches(schema, batches)
    table, info = create_from_rows(args.uri, schema, rows, storage_options(args))
    _created(table.uri, NEW_TABLE_FORMAT_VERSION, schema)
    print(summary(info))


def _readers(args: argparse.Namespace, schema: pa.Schema) -> list[pa.RecordBatchReader]:
    """Every input file opened as a stream of ``schema``'s columns (with ``--schema-mode
    merge``, plus the file's own new columns, typed as ``create --like`` types them)."""
    merge = getattr(args, "schema_mode", None) == "merge"
    files = args.files if hasattr(args, "files") else [args.file]
    return [read_input(p, _with_new_columns(schema, p, args) if merge else schema, dialect(args)) for p in files]


def _with_new_columns(schema: pa.Schema, path: str, args: argparse.Namespace) -> pa.Schema:
    found = file_schema(path, dialect(args))
    return pa.schema([*schema, *(f for f in found if f.name not in schema.names)])


def overwrite(args: argparse.Namespace) -> None:
    table = open_from(args)
    readers = _readers(args, table.schema)
    where = to_expr(args.where)
    with table.transaction() as tx:
        for i, (path, reader) in enumerate(zip(args.files, readers)):
            logger.info("writing %s", path)
            data = _counted(reader, f"writing {path}")
            if i == 0:
                tx.overwrite(data, where, args.schema_mode, require_match=False)  # checked below, every file
            else:
                tx.append(data, args.schema_mode)
        if where is not None and args.require_match:
            staging = tx.staging
            remedy = "add --no-require-match to write them anyway"
            check_within(table.io, staging.fields(), staging.changes.added, where.bind(staging.base.schema), remedy)
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
    for name, text in args.set:
        _check_set(name, text, table.schema)
    info = table.update(dict(args.set) or None, args.where, values=values or None)
    updated = info.metrics.get("rows_updated", 0)
    state = "is now at" if info.committed else "is unchanged at"
    print(f"updated {updated} row{'' if updated == 1 else 's'}; the table {state} version {info.version}")


def _check_set(name: str, text: str, schema: pa.Schema) -> None:
    """``--set NAME=EXPR`` must be an expression over the table's columns; plain text is for
    ``--value`` (the library says so in Python's words, ``values=``)."""
    if name not in schema.names:
        return  # the library names the nearest column
    try:
        parse_term(text).bind(schema)
    except InvalidFilterError as exc:
        raise InvalidArgumentError(
            f"--set {name}={text} is not an expression over the table's columns ({str(exc).splitlines()[0]}); "
            f"to store the text itself, use --value {name}={text}"
        ) from None


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
        return pa.array([text]).cast(with_doubles(arrow_type))[0].as_py()  # 1e39: refused, not float32 inf
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgumentError(f"--value {name}={text!r} is not a value of type {arrow_type} ({exc})") from None


def upsert(args: argparse.Namespace) -> None:
    table = open_from(args)
    (reader,) = _readers(args, table.schema)
    logger.info("upserting %s", args.file)
    info = table.upsert(
        _counted(reader, f"upserting {args.file}"),
        args.on,
        when_matched=args.when_matched,
        when_not_matched=args.when_not_matched,
        when_not_matched_by_source=args.when_not_matched_by_source,
        columns=args.columns,
        schema_mode=args.schema_mode,
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
    _schema_mode_option(appended)

    deleted = command("delete", delete, "delete the rows matching a filter")
    deleted.add_argument("where", metavar="WHERE", help='filter, e.g. "id IN (1, 2)"')

    replaced = command("overwrite", overwrite, "replace every row, or the rows matching --where, in one commit", csv)
    replaced.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    replaced.add_argument("--where", metavar="EXPR", help="replace only the rows matching this filter")
    replaced.add_argument(
        "--no-require-match",
        dest="require_match",
        action="store_false",
        help="with --where, write the files' rows even when some do not match it (by default "
        "that is an error: they would be kept beside the rows they were meant to replace)",
    )
    _schema_mode_option(replaced)

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
    _schema_mode_option(merged)


def _schema_mode_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--schema-mode",
        choices=("merge",),
        help="merge: add the columns of the files that the table lacks (nullable), in the same commit",
    )


def summary(info: CommitInfo) -> str:
    if not info.committed:
        return f"nothing to commit; the table is unchanged at version {info.version}"
    return f"committed version {info.version} ({info.operation}): {metrics(info)}"


def _counted(reader: pa.RecordBatchReader, description: str) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(reader.schema, counted(reader, description))

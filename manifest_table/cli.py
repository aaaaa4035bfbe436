"""The ``manifest-table`` command: inspect, query and write tables from a shell.

A user mistake (a bad filter, a missing table, an unreadable file) ends with a
``manifest-table: error: ...`` message on stderr and exit code 1, or 2 for a command line
that does not parse. Any other exception is a bug and keeps its traceback. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import re
import sys
from datetime import datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson
import pyarrow.parquet as pq

from .commit import CommitInfo
from .errors import InputFileError, InvalidArgumentError, ManifestTableError, VersionExpiredError
from .table import Table, create_table, open_table

PROG = "manifest-table"
PREVIEW_ROWS = 20

log = logging.getLogger("manifest_table.cli")


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code rather than exiting, so tests can call it."""
    parser = _parser()
    try:
        args = parser.parse_args(argv, namespace=argparse.Namespace(storage_options=[], verbose=0))
    except SystemExit as exc:  # a usage error (2), or --help / --version (0)
        return int(exc.code or 0)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("manifest_table").setLevel(
        logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING)
    try:
        args.run(args)
    except (ManifestTableError, OSError) as exc:  # OSError: a missing, unreadable or unwritable path
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0


# --- commands ----------------------------------------------------------------------------
def _info(args: argparse.Namespace) -> None:
    table = _open(args)
    manifest = table.manifest()
    facts = {
        "uri": table.uri,
        "version": f"{manifest.version} ({manifest.operation} at {_timestamp(manifest.timestamp)})",
        "oldest retained version": _oldest_retained(table, manifest.version),
        "data files": len(manifest.files),
        "live rows": manifest.live_rows,
        "deleted rows": sum(f.deleted_rows for f in manifest.files),
        "data bytes": sum(f.size for f in manifest.files),
    }
    width = max(map(len, facts)) + 1
    for name, value in facts.items():
        print(f"{name + ':':<{width}} {value}")
    print("schema:")
    for field in manifest.schema:
        print(f"  {field.name}: {field.type}{'' if field.nullable else ' not null'}")


def _history(args: argparse.Namespace) -> None:
    commits = _open(args).history(args.limit)
    if args.json:
        print(json.dumps([_commit_json(c) for c in commits], indent=2, default=str))
        return
    rows = [[str(c.version), _timestamp(c.timestamp), c.operation, _metrics(c)] for c in commits]
    sys.stdout.write(_aligned(["version", "timestamp", "operation", "metrics"], rows))


def _scan(args: argparse.Namespace) -> None:
    scan = _open(args).scan(args.columns, args.where, args.version, args.as_of)
    fmt = args.format or (args.output and _format_of(args.output)) or "table"
    if fmt == "parquet" and not args.output:
        raise InvalidArgumentError("--format parquet writes a file: add --output PATH")
    if args.limit is None:
        limit = None if args.output else PREVIEW_ROWS
    else:
        limit = args.limit or None  # 0: every row
    batches = _head(scan.to_batches(), limit)
    if args.output:
        with open(args.output, "wb") as sink:
            _WRITERS[fmt](batches, scan.schema, sink)
    else:
        sys.stdout.flush()
        _WRITERS[fmt](batches, scan.schema, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _count(args: argparse.Namespace) -> None:
    print(_open(args).scan([], args.where, args.version, args.as_of).count())


def _create(args: argparse.Namespace) -> None:
    schema = _parse_schema(args.schema) if args.schema is not None else _parquet_schema(args.like)
    table = create_table(args.uri, schema, storage_options=_storage_options(args))
    print(f"created {table.uri} (version 0) with {len(schema)} columns")


def _append(args: argparse.Namespace) -> None:
    table = _open(args)
    # Open every input first: a missing or unreadable file fails before any data is written.
    readers = [_read_input(path, table.schema) for path in args.files]
    with table.transaction() as tx:
        for path, reader in zip(args.files, readers):
            log.info("appending %s", path)
            tx.append(reader)
        info = tx.commit()
    print(_summary(info))


def _delete(args: argparse.Namespace) -> None:
    info = _open(args).delete(args.where)
    deleted = info.metrics.get("rows_deleted", 0)
    state = "is now at" if info.committed else "is unchanged at"
    print(f"deleted {deleted} row{'' if deleted == 1 else 's'}; the table {state} version {info.version}")


# --- the command line --------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    # Global options are accepted before or after the command name; SUPPRESS keeps a
    # subcommand from resetting a value given before it.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--storage-option", dest="storage_options", action="append", type=_key_value,
                        metavar="KEY=VALUE", help="an S3 option (endpoint_url, region, access_key_id, "
                        "secret_access_key, session_token); repeatable")
    common.add_argument("-v", "--verbose", action="count", help="log progress (-vv: debug)")

    parser = argparse.ArgumentParser(prog=PROG, parents=[common],
                                     description="Inspect, query and write manifest_table tables.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version('manifest_table')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], None], summary: str,
                *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common, *parents], help=summary, description=summary)
        sub.add_argument("uri", metavar="URI", help="table location: a directory, file:// or s3://")
        sub.set_defaults(run=run)
        return sub

    snapshot = argparse.ArgumentParser(add_help=False)
    snapshot.add_argument("--where", metavar="EXPR", help="filter, e.g. \"id > 5 AND name LIKE 'a%%'\"")
    travel = snapshot.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, metavar="N", help="read version N")
    travel.add_argument("--as-of", metavar="TIMESTAMP", help="read the version current at an ISO 8601 time")

    command("info", _info, "show version, schema, size and row counts")

    history = command("history", _history, "list versions, newest first")
    history.add_argument("--limit", type=_count_arg, metavar="N", help="show at most N versions")
    history.add_argument("--json", action="store_true", help="print JSON")

    scan = command("scan", _scan, "print rows, or write them to a file", snapshot)
    scan.add_argument("--columns", type=_names, metavar="A,B", help="columns to read (default: all)")
    scan.add_argument("--limit", type=_count_arg, metavar="N",
                      help=f"at most N rows, 0 for all (default: {PREVIEW_ROWS} when printing, all with --output)")
    scan.add_argument("--format", choices=list(_WRITERS),
                      help="output format (default: from the --output extension, else table)")
    scan.add_argument("--output", metavar="PATH", help="write to PATH instead of printing")

    command("count", _count, "count live rows", snapshot)

    create = command("create", _create, "create an empty table")
    schema = create.add_mutually_exclusive_group(required=True)
    schema.add_argument("--schema", metavar="SPEC", help="e.g. 'id:int64,name:string,ts:timestamp[us, tz=UTC]'")
    schema.add_argument("--like", metavar="FILE.parquet", help="take the schema of a Parquet file")

    append = command("append", _append, "append Parquet, CSV or JSON-lines files in one commit")
    append.add_argument("files", nargs="+", metavar="FILE", help="*.parquet, *.csv, *.json, *.jsonl or *.ndjson")

    delete = command("delete", _delete, "delete the rows matching a filter")
    delete.add_argument("where", metavar="WHERE", help="filter, e.g. \"id IN (1, 2)\"")
    return parser


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _count_arg(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def _storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    return dict(args.storage_options) or None


def _open(args: argparse.Namespace) -> Table:
    return open_table(args.uri, storage_options=_storage_options(args))


# --- schemas -----------------------------------------------------------------------------
_TYPES: dict[str, pa.DataType] = {
    **{f"{sign}int{bits}": getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)},
    "float32": pa.float32(), "float64": pa.float64(), "double": pa.float64(),
    "string": pa.string(), "bool": pa.bool_(), "date32": pa.date32(), "date": pa.date32(),
    "binary": pa.binary(),
}
_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=([^\]]+))?\]")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
# A comma not inside [...] or (...), where a type keeps its own parameters.
_FIELD_SEPARATOR = re.compile(r",(?![^\[(]*[\])])")


def _parse_schema(text: str) -> pa.Schema:
    """``'id:int64,name:string,ts:timestamp[us, tz=UTC]'`` -> a schema of nullable fields."""
    fields = []
    for item in _FIELD_SEPARATOR.split(text):
        name, sep, type_text = (part.strip() for part in item.partition(":"))
        if not sep or not name:
            raise InvalidArgumentError(f"expected NAME:TYPE in the schema, got {item.strip()!r}")
        fields.append(pa.field(name, _parse_type(type_text)))
    return pa.schema(fields)


def _parse_type(text: str) -> pa.DataType:
    """One type of the small vocabulary docs/cli.md lists, spelled as Arrow prints it."""
    if text in _TYPES:
        return _TYPES[text]
    if match := _DECIMAL.fullmatch(text):
        try:
            return pa.decimal128(int(match[1]), int(match[2]))
        except ValueError as exc:
            raise InvalidArgumentError(f"bad type {text!r}: {exc}") from None
    if match := _TIMESTAMP.fullmatch(text):
        timestamp = pa.timestamp(match[1], match[2] and match[2].strip())
        try:  # Arrow takes any zone name: resolve it now, not in every later read of the table
            pa.array([0], timestamp).cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise InvalidArgumentError(f"bad type {text!r}: {exc}") from None
        return timestamp
    raise InvalidArgumentError(f"unknown type {text!r}; known: {', '.join(_TYPES)}, "
                               "timestamp[UNIT] or timestamp[UNIT, tz=ZONE] (UNIT: s, ms, us, ns), decimal(P,S)")


def _parquet_schema(path: str) -> pa.Schema:
    try:
        return pq.read_schema(path).remove_metadata()
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read the schema of {path}: {exc}") from None


# --- input files -------------------------------------------------------------------------
_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


def _format_of(path: str) -> str | None:
    return _FORMATS.get(Path(path).suffix.lower())


def _read_input(path: str, schema: pa.Schema) -> pa.RecordBatchReader:
    """Stream one file, its format told by its extension. CSV and JSON values are parsed as
    the table's column types rather than guessed; an unquoted empty CSV field is null."""
    kind = _format_of(path)
    try:
        if kind == "parquet":
            reader = ds.dataset(path, format="parquet").scanner().to_reader()
        elif kind == "csv":
            reader = pacsv.open_csv(path, convert_options=pacsv.ConvertOptions(
                column_types={f.name: f.type for f in schema}, strings_can_be_null=True,
                quoted_strings_can_be_null=False))
        elif kind == "json":
            reader = pajson.open_json(path, parse_options=pajson.ParseOptions(explicit_schema=schema))
        else:
            raise InputFileError(f"cannot tell the format of {path}: name it {', '.join(f'*{s}' for s in _FORMATS)}")
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    return pa.RecordBatchReader.from_batches(reader.schema, _reported(path, reader))


def _reported(path: str, reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    """A bad value further into a file only shows while streaming: name the file then too."""
    try:
        yield from reader
    except pa.ArrowInvalid as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None


# --- output ------------------------------------------------------------------------------
def _head(batches: Iterator[pa.RecordBatch], limit: int | None) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` rows, saying on stderr when rows were left out, so that a preview
    is not mistaken for the whole result."""
    if limit is None:
        yield from batches
        return
    left = limit
    for batch in batches:
        if batch.num_rows > left:
            yield batch.slice(0, left)
            print(f"({PROG}: showing the first {limit} rows; --limit N shows more, 0 all)", file=sys.stderr)
            return
        yield batch
        left -= batch.num_rows


def _write_table(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    rows = [["null" if value is None else str(value) for value in row]
            for batch in batches for row in zip(*(column.to_pylist() for column in batch.columns))]
    sink.write(_aligned(schema.names, rows).encode())


def _write_csv(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    with pacsv.CSVWriter(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def _write_json_lines(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    for batch in batches:
        for row in batch.to_pylist():
            sink.write(json.dumps(row, default=_json_value).encode() + b"\n")


def _write_parquet(batches: Iterable[pa.RecordBatch], schema: pa.Schema, sink: BinaryIO) -> None:
    with pq.ParquetWriter(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


_WRITERS: dict[str, Callable[[Iterable[pa.RecordBatch], pa.Schema, BinaryIO], None]] = {
    "table": _write_table, "csv": _write_csv, "json": _write_json_lines, "parquet": _write_parquet}


def _json_value(value: Any) -> str:
    """JSON has no times, decimals or bytes: ISO 8601 for times (what ``append`` reads
    back), base64 for bytes, text for the rest."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _aligned(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(map(len, column)) for column in zip(header, *rows)]
    lines = [header, ["-" * width for width in widths], *rows]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() + "\n"
                   for line in lines)


# --- descriptions ------------------------------------------------------------------------
def _timestamp(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds")


def _metrics(info: CommitInfo) -> str:
    return " ".join(f"{name}={value}" for name, value in info.metrics.items())


def _summary(info: CommitInfo) -> str:
    if not info.committed:
        return f"nothing to commit; the table is unchanged at version {info.version}"
    return f"committed version {info.version} ({info.operation}): {_metrics(info)}"


def _commit_json(info: CommitInfo) -> dict[str, Any]:
    return {"version": info.version, "timestamp": _timestamp(info.timestamp), "operation": info.operation,
            "commit_id": info.commit_id, "metrics": info.metrics, "parameters": info.parameters}


def _oldest_retained(table: Table, latest: int) -> int:
    """Garbage collection expires a prefix of the versions, so a binary search finds the
    oldest retained one in O(log n) manifest reads instead of walking the history."""
    lo, hi = 0, latest
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            table.manifest(mid)
            hi = mid
        except VersionExpiredError:
            lo = mid + 1
    return lo

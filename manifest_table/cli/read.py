"""Commands that read: ``info`` (alias ``describe``), ``history``, ``scan``, ``count``,
``changes``, ``inspect``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError
from ..format.properties import LAYOUT
from ..lazy import lazy
from .mirror import describe as describe_mirrors
from .mirror import versions as mirror_versions
from .options import PROG, csv_options, instant, names, open_from, whole_number
from .output import OUTPUT_FORMATS, WRITERS, csv_writer
from .progress import counted

if TYPE_CHECKING:
    import pyarrow as pa

    from ..commit import CommitInfo
else:
    pa = lazy("pyarrow")

PREVIEW_ROWS = 20


def info(args: argparse.Namespace) -> None:
    table = open_from(args)
    manifest = table.manifest()
    facts: dict[str, Any] = {
        "uri": table.uri,
        "version": manifest.version,
        "operation": manifest.operation,
        "timestamp": timestamp(manifest.timestamp),
        "oldest_retained_version": table.log.oldest(manifest.version),
        "format_version": manifest.format_version,
        "data_files": manifest.totals.files,
        "live_rows": manifest.live_rows,
        "deleted_rows": manifest.totals.deleted,
        "data_bytes": manifest.totals.bytes,
        "segments": len(manifest.index.segments) if manifest.index else 0,
        "schema": [
            {"name": f.name, "type": str(f.type), "nullable": f.nullable, "field_id": fid}
            for f, fid in zip(manifest.schema, manifest.fields.ids)
        ],
    }
    if manifest.index is not None:
        facts["last_field_id"] = manifest.index.last_field_id
    for prop in LAYOUT:
        names: tuple[str, ...] = manifest.properties[prop]
        facts[prop.name] = list(names)
    facts["mirrors"] = mirror_versions(table)
    if args.json:
        print(json.dumps(facts, indent=2))
        return
    lines = {
        "uri": facts["uri"],
        "version": f"{facts['version']} ({facts['operation']} at {facts['timestamp']})",
        **{
            name.replace("_", " "): facts[name]
            for name in (
                "format_version",
                "oldest_retained_version",
                "data_files",
                "segments",
                "live_rows",
                "deleted_rows",
                "data_bytes",
            )
        },
        **{prop.name.replace("_", " "): ", ".join(facts[prop.name]) for prop in LAYOUT if facts[prop.name]},
        "mirrors": describe_mirrors(facts["mirrors"]),
    }
    width = max(map(len, lines)) + 1
    for name, value in lines.items():
        print(f"{name + ':':<{width}} {value}")
    print("schema:")
    for field, fid in zip(manifest.schema, manifest.fields.ids):
        print(
            f"  {field.name}: {field.type}{'' if field.nullable else ' not null'}"
            + (f" (field id {fid})" if manifest.index is not None else "")
        )


def history(args: argparse.Namespace) -> None:
    show_history(open_from(args).history(args.limit), args.json)


def show_history(commits: list[CommitInfo], as_json: bool, tables: bool = False) -> None:
    """Print commits as JSON or a table; ``tables``: a column of the tables each changed (a
    database's history)."""
    if as_json:
        print(json.dumps([_commit_json(c) for c in commits], indent=2, default=str))
        return
    columns = {
        "version": [str(c.version) for c in commits],
        "timestamp": [timestamp(c.timestamp) for c in commits],
        "operation": [c.operation for c in commits],
    }
    if tables:
        columns["tables"] = [
            " ".join(f"{n}:{op}" for n, op in c.parameters["tables"].items())
            + "".join(f" -{n}" for n in c.parameters["dropped"])
            + "".join(f" {a}->{b}" for a, b in c.parameters["renamed"].items())
            for c in commits
        ]
    columns["metrics"] = [metrics(c) for c in commits]
    schema = pa.schema([(n, pa.string()) for n in columns])
    rows = pa.table(list(columns.values()), schema=schema)
    sys.stdout.flush()
    WRITERS["table"](rows.to_batches(), schema, sys.stdout.buffer)


def scan(args: argparse.Namespace) -> None:
    table = open_from(args)
    scan = table.scan(args.columns, args.where, args.version, args.as_of)
    fmt = output_format(args)
    total = scan.count() if args.output and scan.where is None else None  # free without a filter
    emit(args, fmt, _head(scan.to_batches(), _limit(args, fmt), noted=args.limit is None), scan.schema, total)


def changes(args: argparse.Namespace) -> None:
    """The rows changed by the commits after ``--from`` up to ``--to`` (docs/changes.md)."""
    if args.start is None and args.since is None:
        raise InvalidArgumentError("changes needs --from VERSION (the last version already seen) or --since TIME")
    feed = open_from(args).changes(
        args.start, args.end, start_as_of=args.since, end_as_of=args.until, columns=args.columns, where=args.where
    )
    fmt = output_format(args)
    emit(args, fmt, _head(feed.to_batches(), _limit(args, fmt), noted=args.limit is None), feed.schema, None)
    logging.getLogger(__name__).info(
        "the changes of versions %d..%d; continue with --from %d",
        feed.start_version + 1,
        feed.end_version,
        feed.end_version,
    )


def inspect(args: argparse.Namespace) -> None:
    """The metadata tables of ``Table.inspect``, in any output format ``scan`` writes; the
    text table and CSV, which cannot hold nested values, leave out the files' ``stats``."""
    inspector = open_from(args).inspect
    if args.what == "history" and args.version is not None:
        raise InvalidArgumentError("--version applies to files and segments; history lists every version")
    found = inspector.history() if args.what == "history" else getattr(inspector, args.what)(args.version)
    fmt = output_format(args)
    if fmt in ("table", "csv") and "stats" in found.column_names:
        found = found.drop_columns(["stats"])
    emit(args, fmt, found.to_batches(), found.schema, found.num_rows)


def output_format(args: argparse.Namespace) -> str:
    """``--format``, else the one ``--output``'s extension names, else the text table; a
    binary format is refused on a terminal."""
    fmt = args.format or (args.output and OUTPUT_FORMATS.get(os.path.splitext(args.output)[1].lower())) or "table"
    if fmt in ("parquet", "arrow") and not args.output and sys.stdout.isatty():
        raise InvalidArgumentError(f"--format {fmt} is binary: add --output PATH or pipe it to a program")
    return fmt


def emit(
    args: argparse.Namespace, fmt: str, batches: Iterator[pa.RecordBatch], schema: pa.Schema, total: int | None
) -> None:
    """Write ``batches`` in ``fmt`` to ``--output`` (with progress) or stdout."""
    write = csv_writer(schema, args.delimiter) if fmt == "csv" else WRITERS[fmt]
    if args.output:
        with open(args.output, "wb") as sink:
            write(counted(batches, f"writing {args.output}", total), schema, sink)
    else:
        sys.stdout.flush()
        write(batches, schema, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def count(args: argparse.Namespace) -> None:
    """Without ``--where``, the manifest's own counts (``Manifest.live_rows``, what
    ``Scan.count`` answers then): no pyarrow is imported (docs/benchmarks.md, "Start-up")."""
    table = open_from(args)
    if args.where is None:
        print(table.manifest(args.version, args.as_of).live_rows)
    else:
        print(table.scan([], args.where, args.version, args.as_of).count())


def add_commands(command: Any) -> None:
    """Register the reading commands; ``command(name, run, summary, *parents, **kw)`` adds one."""
    snapshot = argparse.ArgumentParser(add_help=False)
    snapshot.add_argument("--where", metavar="EXPR", help="filter, e.g. \"id > 5 AND name LIKE 'a%%'\"")
    travel = snapshot.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, metavar="N", help="read version N")
    travel.add_argument(
        "--as-of",
        type=instant,
        metavar="TIMESTAMP",
        help="read the version current at an ISO 8601 time (no offset: UTC)",
    )
    described = command("info", info, "show version, schema, size and row counts", aliases=["describe"])
    described.add_argument("--json", action="store_true", help="print JSON")

    listed = command("history", history, "list versions, newest first")
    listed.add_argument("--limit", type=whole_number, metavar="N", help="show at most N versions")
    listed.add_argument("--json", action="store_true", help="print JSON")

    scanned = command("scan", scan, "print rows, or write them to a file", snapshot, csv_options(reading=False))
    scanned.add_argument("--columns", type=names, metavar="A,B", help="columns to read (default: all)")
    scanned.add_argument(
        "--limit",
        type=whole_number,
        metavar="N",
        help=f"at most N rows, 0 for all (default: {PREVIEW_ROWS} for a printed table, else all)",
    )
    _output_options(scanned)

    command("count", count, "count live rows", snapshot)

    changed = command("changes", changes, "print the rows changed since a version", csv_options(reading=False))
    start = changed.add_mutually_exclusive_group()
    start.add_argument("--from", dest="start", type=whole_number, metavar="V", help="changes after version V")
    start.add_argument("--since", type=instant, metavar="TIMESTAMP", help="changes committed after an ISO 8601 time")
    end = changed.add_mutually_exclusive_group()
    end.add_argument("--to", dest="end", type=whole_number, metavar="V", help="up to version V (default: the latest)")
    end.add_argument("--until", type=instant, metavar="TIMESTAMP", help="up to the version current at an ISO 8601 time")
    changed.add_argument("--where", metavar="EXPR", help="only changes of rows matching the filter")
    changed.add_argument("--columns", type=names, metavar="A,B", help="columns to show (default: all)")
    changed.add_argument(
        "--limit", type=whole_number, metavar="N", help=f"at most N rows, 0 for all (default: as scan, {PREVIEW_ROWS})"
    )
    _output_options(changed)

    inspected = command(
        "inspect", inspect, "print the table's versions, data files or segments as a table", csv_options(reading=False)
    )
    inspected.add_argument(
        "what",
        choices=("history", "files", "segments"),
        help="history: every version; files: a version's data files and their statistics; "
        "segments: the objects that list them",
    )
    inspected.add_argument(
        "--version", type=whole_number, metavar="N", help="files or segments of version N (default: the latest)"
    )
    _output_options(inspected)


# --- helpers ---------------------------------------------------------------------------
def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=list(WRITERS), help="output format (default: from the --output extension, else table)"
    )
    parser.add_argument("--output", metavar="PATH", help="write to PATH instead of stdout")


def _limit(args: argparse.Namespace, fmt: str) -> int | None:
    """``--limit`` (0: every row); by default a preview for a printed table, else every row."""
    if args.limit is None:
        return None if args.output or fmt != "table" else PREVIEW_ROWS
    return args.limit or None


def _head(batches: Iterator[pa.RecordBatch], limit: int | None, noted: bool) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` rows; ``noted`` (the default preview, not an explicit ``--limit``):
    saying on stderr when rows were left out, so that a preview is not mistaken for the whole
    result."""
    if limit is None:
        yield from batches
        return
    left = limit
    for batch in batches:
        if batch.num_rows > left:
            yield batch.slice(0, left)
            if noted:
                print(f"({PROG}: showing the first {limit} rows; --limit N shows more, 0 all)", file=sys.stderr)
            return
        yield batch
        left -= batch.num_rows


def timestamp(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds")


def metrics(info: CommitInfo) -> str:
    return " ".join(f"{name}={value}" for name, value in info.metrics.items())


def _commit_json(info: CommitInfo) -> dict[str, Any]:
    return {
        "version": info.version,
        "timestamp": timestamp(info.timestamp),
        "operation": info.operation,
        "commit_id": info.commit_id,
        "metrics": info.metrics,
        "parameters": info.parameters,
    }

"""``Table.inspect``: the table's metadata as pyarrow Tables (pyiceberg's ``table.inspect``),
to query with DuckDB, Polars or pandas like any data: its versions, the data files of a
version with their statistics, and the objects that list those files. Reads manifests and
segments only, never a data file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

from .commit import CommitInfo
from .format.entries import DataFile
from .format.stats import has_stats
from .log.version import Version


class Inspected(Protocol):
    """What ``Inspector`` reads of a table (``table.Table``, which makes one as ``inspect``)."""

    def manifest(self, version: int | None = None) -> Version: ...

    def history(self, limit: int | None = None) -> list[CommitInfo]: ...


HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", "UTC")),
        ("operation", pa.string()),
        ("commit_id", pa.string()),
        ("rows_added", pa.int64()),
        ("rows_deleted", pa.int64()),
        ("metrics", pa.string()),
        ("parameters", pa.string()),
    ]
)
"""``metrics`` and ``parameters`` are JSON objects (DuckDB: ``metrics->>'files_added'``)."""

FILE_COLUMNS = pa.schema(
    [
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("deleted_rows", pa.int64()),
        ("live_rows", pa.int64()),
        ("size", pa.int64()),
        ("deletes", pa.string()),
        ("cluster_run", pa.int64()),
    ]
)
"""The columns of ``files()`` before ``stats``; ``deletes`` is the tombstone object holding
the file's deletion bitmap (null: no deleted row); ``cluster_run`` the clustering run the
file belongs to (null: none; docs/operations.md, "Clustering")."""

SEGMENTS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("path", pa.string()),
        ("files", pa.int64()),
        ("rows", pa.int64()),
        ("deleted_rows", pa.int64()),
        ("size", pa.int64()),
    ]
)
"""One row per segment of a format v2 version, then one for the files listed in the
version's root itself (``kind`` ``"tail"``; a format v1 manifest lists every file there)."""


class Inspector:
    """``table.inspect.history()``, ``.files(version)``, ``.segments(version)``."""

    def __init__(self, table: Inspected) -> None:
        self._table = table

    def history(self) -> pa.Table:
        """Every retained version, newest first (``Table.history()`` as a table)."""
        commits = self._table.history()
        return pa.table(
            [
                [c.version for c in commits],
                [c.timestamp for c in commits],
                [c.operation for c in commits],
                [c.commit_id for c in commits],
                [c.metrics.get("rows_added", 0) for c in commits],
                [c.metrics.get("rows_deleted", 0) for c in commits],
                [json.dumps(c.metrics, default=str) for c in commits],
                [json.dumps(c.parameters, default=str) for c in commits],
            ],
            schema=HISTORY_SCHEMA,
        )

    def files(self, version: int | None = None) -> pa.Table:
        """The live data files of ``version`` (default: the latest), in the manifest's order,
        with ``stats``: per column that keeps statistics, its min, max and null count as the
        file's footer gave them (null: unknown; no ``stats`` column when no column keeps any)."""
        manifest = self._table.manifest(version)
        files = list(manifest.files)
        columns = [f for f in manifest.schema if has_stats(f.type)]
        stats_type = pa.struct(
            [(c.name, pa.struct([("min", c.type), ("max", c.type), ("null_count", pa.int64())])) for c in columns]
        )
        stats = pa.array([{c.name: _stats(f.stats.get(c.name)) for c in columns} for f in files], stats_type)
        core = [
            [f.path for f in files],
            [f.rows for f in files],
            [f.deleted_rows for f in files],
            [f.live_rows for f in files],
            [f.size for f in files],
            [f.deletes.path if f.deletes else None for f in files],
            [f.cluster_run for f in files],
        ]
        if not columns:  # no column keeps statistics (all nested): an empty struct has no Parquet form
            return pa.table(core, schema=FILE_COLUMNS)
        return pa.table([*core, stats], schema=FILE_COLUMNS.append(pa.field("stats", stats_type)))

    def segments(self, version: int | None = None) -> pa.Table:
        """The objects that list the files of ``version`` (default: the latest)."""
        manifest: Version = self._table.manifest(version)
        rows = []
        if manifest.index is not None:  # deleted rows as of this version: the root may override a segment's
            index = manifest.index
            rows += [
                _listing("segment", summary.path, segment.files(None, index.deletes))
                for summary, segment in zip(index.segments, manifest.segments(index.segments))
            ]
        rows.append(_listing("tail", None, manifest.tail))
        return pa.Table.from_pylist(rows, SEGMENTS_SCHEMA)


def _listing(kind: str, path: str | None, files: Sequence[DataFile]) -> dict[str, Any]:
    return {
        "kind": kind,
        "path": path,
        "files": len(files),
        "rows": sum(f.rows for f in files),
        "deleted_rows": sum(f.deleted_rows for f in files),
        "size": sum(f.size for f in files),
    }


def _stats(found: Any) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"min": found.min, "max": found.max, "null_count": found.null_count}

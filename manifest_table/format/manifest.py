"""The immutable manifest of one table version: the whole list of live data files.

A manifest is self-contained: reading one object gives a reader everything it needs to
plan a scan of that version (schema, files, statistics, deletion vectors)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Mapping

import pyarrow as pa

from ..errors import CorruptTableError
from ..expressions import ColumnStats
from .schema import decode_schema, encode_schema
from .stats import decode_stats, encode_stats

FORMAT_VERSION = 1
MANIFEST_PREFIX = "manifest/"


def manifest_key(version: int) -> str:
    return f"{MANIFEST_PREFIX}v{version:020d}.json"


def version_of_key(key: str) -> int | None:
    """The version a manifest key names, or None for any other key."""
    name = key[len(MANIFEST_PREFIX):] if key.startswith(MANIFEST_PREFIX) else ""
    if len(name) == 26 and name[0] == "v" and name.endswith(".json") and name[1:21].isdigit():
        return int(name[1:21])
    return None


@dataclass(frozen=True)
class DeletionVector:
    """Where a data file's bitmap of deleted row positions lives inside a tombstone object."""

    path: str
    offset: int
    length: int
    cardinality: int


@dataclass(frozen=True)
class DataFile:
    path: str
    rows: int
    size: int
    stats: Mapping[str, ColumnStats] = field(default_factory=dict, compare=False)
    encoded_stats: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """``stats`` as stored, kept from the manifest it was read from: every commit rewrites the
    whole file list, and re-encoding unchanged stats would dominate its cost."""
    deletes: DeletionVector | None = None

    @property
    def deleted_rows(self) -> int:
        return self.deletes.cardinality if self.deletes else 0

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows

    def with_deletes(self, deletes: DeletionVector | None) -> "DataFile":
        return replace(self, deletes=deletes)


@dataclass(frozen=True)
class Manifest:
    version: int
    parent_version: int | None
    timestamp_ms: int
    commit_id: str
    operation: str
    schema: pa.Schema
    files: tuple[DataFile, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    # Idempotency markers of external writers (streaming query id -> last committed batch id).
    app_transactions: dict[str, int] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, timezone.utc)

    @property
    def live_rows(self) -> int:
        return sum(f.live_rows for f in self.files)

    def file_map(self) -> dict[str, DataFile]:
        return {f.path: f for f in self.files}

    def to_json(self) -> bytes:
        doc = {
            "format_version": self.format_version,
            "version": self.version,
            "parent_version": self.parent_version,
            "timestamp_ms": self.timestamp_ms,
            "commit_id": self.commit_id,
            "operation": self.operation,
            "parameters": self.parameters,
            "metrics": self.metrics,
            "app_transactions": self.app_transactions,
            "schema": encode_schema(self.schema),
            "files": [_encode_file(f, self.schema) for f in self.files],
        }
        return json.dumps(doc, separators=(",", ":"), default=str).encode()

    @classmethod
    def from_json(cls, data: bytes, key: str = "manifest") -> "Manifest":
        try:
            doc = json.loads(data)
            if doc["format_version"] > FORMAT_VERSION:
                raise CorruptTableError(
                    f"{key} has format version {doc['format_version']}; this library reads up to "
                    f"{FORMAT_VERSION}: upgrade manifest_table")
            schema = decode_schema(doc["schema"])
            types = {f.name: f.type for f in schema}
            return cls(
                version=doc["version"],
                parent_version=doc["parent_version"],
                timestamp_ms=doc["timestamp_ms"],
                commit_id=doc["commit_id"],
                operation=doc["operation"],
                schema=schema,
                files=tuple(_decode_file(f, types) for f in doc["files"]),
                parameters=doc.get("parameters", {}),
                metrics=doc.get("metrics", {}),
                app_transactions=doc.get("app_transactions", {}),
                format_version=doc["format_version"],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTableError(f"{key} is not a valid manifest: {exc!r}") from exc


def _encode_file(f: DataFile, schema: pa.Schema) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": f.path, "rows": f.rows, "size": f.size,
                           "stats": f.encoded_stats if f.encoded_stats is not None
                           else encode_stats(f.stats, schema)}
    if f.deletes is not None:
        d = f.deletes
        doc["deletes"] = {"path": d.path, "offset": d.offset, "length": d.length,
                          "cardinality": d.cardinality}
    return doc


def _decode_file(doc: dict[str, Any], types: dict[str, pa.DataType]) -> DataFile:
    deletes = doc.get("deletes")
    return DataFile(
        path=doc["path"], rows=doc["rows"], size=doc["size"],
        stats=decode_stats(doc.get("stats", {}), types, doc["rows"]),
        encoded_stats=doc.get("stats", {}),
        deletes=DeletionVector(**deletes) if deletes else None,
    )

"""What a format-v2 root adds to a v1 manifest: field ids, table properties, totals, the
segment list with summaries, and the ``deletes`` override map (docs/format.md, "Format v2").

The root's ``tail`` has v1's entry shape with stats keyed by field id; manifest.py encodes
and decodes it with the v1 code through ``names_to_ids`` / ``ids_to_names``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from ..arguments import check_int
from ..errors import InvalidArgumentError
from .field_ids import FIELD_ID
from .json_fields import MAX_INT64, MISSING, corrupt, integer, of_type
from .keys import DATA_PREFIX, SEGMENT_PREFIX, stored_key
from .segment import SegmentSummary
from .stats import ColumnStats, encode_stats


@dataclass(frozen=True)
class Properties:
    """Table properties stored in every v2 root (so every writer applies the same limits)."""

    tail_limit: int = 32
    """File entries kept inline in the root before they are flushed into a segment."""
    deletes_limit: int = 64
    """Segment files whose new deletion vectors the root carries before the segments holding
    them are rewritten."""
    segment_target_files: int = 32_768
    """Entries a segment grows to by merging; below it a segment is small."""
    max_small_segments: int = 8
    """Small segments allowed before a commit merges two adjacent ones."""

    def __post_init__(self) -> None:
        for f in fields(self):
            check_int(f.name, getattr(self, f.name), minimum=1)

    @classmethod
    def of(cls, given: Mapping[str, Any] | None) -> Properties:
        """From a caller's dict; unknown names are an ``InvalidArgumentError``."""
        if given is None:
            return cls()
        if not isinstance(given, Mapping):
            raise InvalidArgumentError(f"properties must be a dict, not {type(given).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known, key=str)
        if unknown:
            raise InvalidArgumentError(f"unknown table properties {unknown}; known: {sorted(known)}")
        return cls(**given)


@dataclass(frozen=True)
class Totals:
    """Counts over a whole version: ``count()`` needs nothing else."""

    files: int
    rows: int
    deleted: int
    bytes: int


@dataclass(frozen=True)
class FileIndex:
    """Where a v2 version's file entries are: segments (in order), then the root's tail;
    ``deletes`` overrides the deletion vectors segments store for the files it names."""

    field_ids: tuple[int, ...]
    last_field_id: int
    properties: Properties
    totals: Totals
    segments: tuple[SegmentSummary, ...] = ()
    deletes: Mapping[str, Any] = field(default_factory=dict)
    """Data file path -> its current ``DeletionVector``."""
    name_mapping: Mapping[str, int] | None = None
    """Set by the first schema change: the column names files without field ids were written
    with -> their field ids (format/field_ids.py)."""

    def stats_by_id(self, stats: Mapping[str, ColumnStats], schema: pa.Schema) -> dict[str, Any]:
        return names_to_ids(encode_stats(stats, schema), schema, self.field_ids)


def with_field_ids(schema: pa.Schema, field_ids: Sequence[int]) -> pa.Schema:
    """``schema`` with each column's field id in its metadata, as Parquet writers read it."""
    return pa.schema(
        [f.with_metadata({**(f.metadata or {}), FIELD_ID: str(fid).encode()}) for f, fid in zip(schema, field_ids)],
        metadata=schema.metadata,
    )


def split_field_ids(schema: pa.Schema, key: str) -> tuple[pa.Schema, tuple[int, ...]]:
    """A stored schema -> (the schema without field ids, the ids)."""
    ids, plain = [], []
    for f in schema:
        metadata = dict(f.metadata or {})
        raw = metadata.pop(FIELD_ID, None)
        try:
            fid = int(raw) if raw is not None else None
        except ValueError:
            fid = None
        if fid is None or not 0 < fid < 2**31:
            raise corrupt(key, f"schema field {f.name!r} {FIELD_ID.decode()}", raw, "a positive integer")
        ids.append(fid)
        plain.append(f.with_metadata(metadata or None))
    if len(set(ids)) != len(ids):
        raise corrupt(key, "schema field ids", ids, "distinct ids")
    return pa.schema(plain, metadata=schema.metadata), tuple(ids)


def names_to_ids(stats: dict[str, Any], schema: pa.Schema, field_ids: Sequence[int]) -> dict[str, Any]:
    ids = {f.name: str(fid) for f, fid in zip(schema, field_ids)}
    return {ids[name]: entry for name, entry in stats.items() if name in ids}


def ids_to_names(stats: dict[str, Any], schema: pa.Schema, field_ids: Sequence[int]) -> dict[str, Any]:
    """Stats keyed by field id -> keyed by column name (ids of no current column are dropped:
    schema evolution keeps ids of dropped columns out of use)."""
    names = {str(fid): f.name for f, fid in zip(schema, field_ids)}
    return {names[fid]: entry for fid, entry in stats.items() if fid in names}


def encode_index(index: FileIndex, schema: pa.Schema) -> dict[str, Any]:
    mapping = {} if index.name_mapping is None else {"name_mapping": dict(index.name_mapping)}
    return {
        **mapping,
        "last_field_id": index.last_field_id,
        "properties": {f.name: getattr(index.properties, f.name) for f in fields(Properties)},
        "totals": vars(index.totals),
        "segments": [
            {
                "path": s.path,
                "files": s.files,
                "rows": s.rows,
                "deleted": s.deleted,
                "bytes": s.bytes,
                "stats": _stored_stats(index, s, schema),
            }
            for s in index.segments
        ],
        "deletes": {path: vars(ref) for path, ref in index.deletes.items()},
    }


def _stored_stats(index: FileIndex, summary: SegmentSummary, schema: pa.Schema) -> dict[str, Any]:
    """A summary's stats as the root stores them: as decoded or first encoded under this
    schema (``SegmentSummary.stored``), else encoded now."""
    key = (tuple(index.field_ids), schema)
    found = summary.stored.get(key)
    if found is None:
        found = summary.stored[key] = index.stats_by_id(summary.stats, schema)
    return found


def decode_index(
    doc: dict[str, Any], key: str, schema: pa.Schema, field_ids: tuple[int, ...], decode_stats: Any, decode_deletes: Any
) -> FileIndex:
    """The v2 fields of root ``key``. ``decode_stats(raw, rows, at)`` and
    ``decode_deletes(raw, rows, at)`` are manifest.py's checked decoders."""
    last = integer(doc, "last_field_id", key, max(field_ids, default=0), 2**31)
    raw_properties = of_type(doc, "properties", key, dict)
    known = {f.name for f in fields(Properties)}
    for name in known:
        integer(raw_properties, name, key, 1, MAX_INT64, "properties")
    properties = Properties(**{name: raw_properties[name] for name in known})
    raw_totals = of_type(doc, "totals", key, dict)
    totals = Totals(
        *(integer(raw_totals, name, key, 0, MAX_INT64, "totals") for name in ("files", "rows", "deleted", "bytes"))
    )
    if totals.deleted > totals.rows:
        raise corrupt(key, "totals.deleted", totals.deleted, f"at most totals.rows ({totals.rows})")
    segments = []
    layout = (tuple(field_ids), schema)
    for i, raw in enumerate(of_type(doc, "segments", key, list)):
        at = f"segments[{i}]"
        if type(raw) is not dict:
            raise corrupt(key, at, raw, "a JSON object")
        rows = integer(raw, "rows", key, 0, MAX_INT64, at)
        stats = ids_to_names(of_type(raw, "stats", key, dict, at), schema, field_ids)
        stored = {layout: names_to_ids(stats, schema, field_ids)}
        segments.append(
            SegmentSummary(
                path=stored_key(raw.get("path", MISSING), SEGMENT_PREFIX, key, f"{at}.path"),
                files=integer(raw, "files", key, 0, MAX_INT64, at),
                rows=rows,
                deleted=integer(raw, "deleted", key, 0, rows + 1, at),
                bytes=integer(raw, "bytes", key, 0, MAX_INT64, at),
                stats=decode_stats(stats, rows, f"{at}.stats"),
                stored=stored,
            )
        )
    if len({s.path for s in segments}) != len(segments):
        raise corrupt(key, "segments", [s.path for s in segments], "distinct segment keys")
    deletes = {}
    for path, raw in of_type(doc, "deletes", key, dict).items():
        stored_key(path, DATA_PREFIX, key, "deletes")
        # The file's rows are in its segment: the cardinality is checked against them there.
        deletes[path] = decode_deletes(raw, MAX_INT64 - 2, f"deletes[{path!r}]")
    return FileIndex(field_ids, last, properties, totals, tuple(segments), deletes, _name_mapping(doc, key, last))


def _name_mapping(doc: dict[str, Any], key: str, last: int) -> dict[str, int] | None:
    raw = of_type(doc, "name_mapping", key, dict, default=None)
    if raw is not None:
        for name in raw:
            integer(raw, name, key, 1, last + 1, "name_mapping")
        if len(set(raw.values())) != len(raw):
            raise corrupt(key, "name_mapping", raw, "one name per field id")
    return raw

"""What a format-v2 root adds to a v1 manifest: table properties (properties.py), totals,
the segment list with summaries, and the ``deletes`` override map (docs/format.md, "Format
v2"; format version 3 is the same root with properties 0.3.0 does not know); its field ids
and ``last_field_id`` are read with its schema (stored_schema.py).

The root's ``tail`` has v1's entry shape with stats keyed by field id; manifest.py encodes
and decodes it with the v1 code through ``names_to_ids`` / ``StoredSchema.by_name``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .json_fields import MAX_INT64, MISSING, corrupt, integer, of_type
from .keys import DATA_PREFIX, SEGMENT_PREFIX, stored_key
from .properties import TABLES, Properties
from .stats import ColumnStats, encode_stats
from .stored_schema import StoredSchema, names_to_ids


@dataclass(frozen=True)
class Totals:
    """Counts over a whole version: ``count()`` needs nothing else."""

    files: int
    rows: int
    deleted: int
    bytes: int


@dataclass(frozen=True)
class SegmentSummary:
    """What a root says about one segment: enough to skip it, and to count without it."""

    path: str
    files: int
    rows: int
    deleted: int
    bytes: int
    stats: Mapping[str, ColumnStats]
    stored: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)
    """``stats`` as a root stores them (keyed by field id), as read or first encoded, per
    stored schema (``StoredSchema.text``: the field ids are in it, and a rename or a widening
    is another text): each commit's root writes every summary again, and encoding 31 of them
    anew cost a 1-row append at 1M files 3 ms (``encode_index``). Keyed by the stored text,
    not the decoded schema: reading a root decodes no schema (stored_schema.py)."""


@dataclass(frozen=True)
class FileIndex:
    """Where a v2 version's file entries are: segments (in order), then the root's tail;
    ``deletes`` overrides the deletion vectors segments store for the files it names."""

    last_field_id: int
    properties: Properties
    totals: Totals
    segments: tuple[SegmentSummary, ...] = ()
    deletes: Mapping[str, Any] = field(default_factory=dict)
    """Data file path -> its current ``DeletionVector``."""
    name_mapping: Mapping[str, int] | None = None
    """Set by the first schema change: the column names files without field ids were written
    with -> their field ids (format/field_ids.py)."""


def encode_index(index: FileIndex, schema: StoredSchema) -> dict[str, Any]:
    """The v2 fields of a root of ``index`` under ``schema`` (one with field ids)."""
    text = schema.text()
    mapping = {} if index.name_mapping is None else {"name_mapping": dict(index.name_mapping)}
    return {
        **mapping,
        "last_field_id": index.last_field_id,
        "properties": index.properties.to_json(),
        "totals": vars(index.totals),
        "segments": [
            {
                "path": s.path,
                "files": s.files,
                "rows": s.rows,
                "deleted": s.deleted,
                "bytes": s.bytes,
                "stats": _stored_stats(s, schema, text),
            }
            for s in index.segments
        ],
        "deletes": {path: vars(ref) for path, ref in index.deletes.items()},
    }


def _stored_stats(summary: SegmentSummary, schema: StoredSchema, text: str) -> dict[str, Any]:
    """A summary's stats as the root stores them: as read or first encoded under the stored
    schema ``text`` (``SegmentSummary.stored``), else encoded now."""
    found = summary.stored.get(text)
    if found is None:
        plain, field_ids = schema.schema, schema.field_ids
        assert field_ids is not None  # (a root's schema has field ids: Manifest.__post_init__)
        found = summary.stored[text] = names_to_ids(encode_stats(summary.stats, plain), plain, field_ids)
    return found


def decode_index(
    doc: dict[str, Any], key: str, last: int, schema_text: str, decode_stats: Any, decode_deletes: Any
) -> FileIndex:
    """The v2 fields of root ``key`` besides its schema, ``last_field_id`` being ``last`` and
    the schema field ``schema_text`` (both read by manifest.py: ``StoredSchema``; the text keys
    the summaries' stats as read, ``SegmentSummary.stored``). ``decode_stats(raw, rows, at)``
    and ``decode_deletes(raw, rows, at)`` are manifest.py's checked decoders."""
    properties = Properties.from_json(doc.get("properties", MISSING), key, TABLES)
    raw_totals = of_type(doc, "totals", key, dict)
    totals = Totals(
        *(integer(raw_totals, name, key, 0, MAX_INT64, "totals") for name in ("files", "rows", "deleted", "bytes"))
    )
    if totals.deleted > totals.rows:
        raise corrupt(key, "totals.deleted", totals.deleted, f"at most totals.rows ({totals.rows})")
    segments = []
    for i, raw in enumerate(of_type(doc, "segments", key, list)):
        at = f"segments[{i}]"
        if type(raw) is not dict:
            raise corrupt(key, at, raw, "a JSON object")
        rows = integer(raw, "rows", key, 0, MAX_INT64, at)
        stats = of_type(raw, "stats", key, dict, at)
        segments.append(
            SegmentSummary(
                path=stored_key(raw.get("path", MISSING), SEGMENT_PREFIX, key, f"{at}.path"),
                files=integer(raw, "files", key, 0, MAX_INT64, at),
                rows=rows,
                deleted=integer(raw, "deleted", key, 0, rows + 1, at),
                bytes=integer(raw, "bytes", key, 0, MAX_INT64, at),
                stats=decode_stats(stats, rows, f"{at}.stats"),
                stored={schema_text: stats},
            )
        )
    if len({s.path for s in segments}) != len(segments):
        raise corrupt(key, "segments", [s.path for s in segments], "distinct segment keys")
    deletes = {}
    for path, raw in of_type(doc, "deletes", key, dict).items():
        stored_key(path, DATA_PREFIX, key, "deletes")
        # The file's rows are in its segment: the cardinality is checked against them there.
        deletes[path] = decode_deletes(raw, MAX_INT64 - 2, f"deletes[{path!r}]")
    return FileIndex(last, properties, totals, tuple(segments), deletes, _name_mapping(doc, key, last))


def _name_mapping(doc: dict[str, Any], key: str, last: int) -> dict[str, int] | None:
    raw = of_type(doc, "name_mapping", key, dict, default=None)
    if raw is not None:
        for name in raw:
            integer(raw, name, key, 1, last + 1, "name_mapping")
        if len(set(raw.values())) != len(raw):
            raise corrupt(key, "name_mapping", raw, "one name per field id")
    return raw

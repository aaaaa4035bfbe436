"""Iceberg's Avro files: manifests (one entry per data file or deletion vector) and manifest
lists (one entry per manifest), written and read with ``fastavro`` in the v3 schemas of the
Iceberg spec, field ids included (readers resolve Avro fields by them)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from ..lazy import lazy

if TYPE_CHECKING:
    import fastavro
else:
    fastavro = lazy("fastavro")


FORMAT_VERSION = "3"
ADDED = 1
DATA, DELETES = 0, 1
PATH_FIELD = 2147483546
"""The reserved field id of a position delete's ``file_path``: a deletion vector's bounds on it
name the one data file it applies to, which is how pyiceberg matches them."""


def _optional(name: str, avro_type: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None, "field-id": field_id}


def _map(name: str, field_id: int, key_id: int, value_id: int, value: str) -> dict[str, Any]:
    """Iceberg writes a map with int keys as an array of key/value records. Written here as
    always present (an empty array for no entries), not as a union with null: fastavro checks
    which branch of a union a value fits by validating it whole, which made writing a
    manifest 0.4 ms per entry. Readers resolve a field that is always there as an optional
    one (Avro schema resolution; readers match by field id)."""
    items = {
        "type": "record",
        "name": f"k{key_id}_v{value_id}",
        "fields": [
            {"name": "key", "type": "int", "field-id": key_id},
            {"name": "value", "type": value, "field-id": value_id},
        ],
    }
    return {"name": name, "type": {"type": "array", "logicalType": "map", "items": items}, "field-id": field_id}


_DATA_FILE = {
    "type": "record",
    "name": "r2",
    "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": {"type": "record", "name": "r102", "fields": []}, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        _map("column_sizes", 108, 117, 118, "long"),
        _map("value_counts", 109, 119, 120, "long"),
        _map("null_value_counts", 110, 121, 122, "long"),
        _map("nan_value_counts", 137, 138, 139, "long"),
        _map("lower_bounds", 125, 126, 127, "bytes"),
        _map("upper_bounds", 128, 129, 130, "bytes"),
        _optional("key_metadata", "bytes", 131),
        _optional("split_offsets", {"type": "array", "items": "long", "element-id": 133}, 132),
        _optional("equality_ids", {"type": "array", "items": "int", "element-id": 136}, 135),
        _optional("sort_order_id", "int", 140),
        _optional("first_row_id", "long", 142),
        _optional("referenced_data_file", "string", 143),
        _optional("content_offset", "long", 144),
        _optional("content_size_in_bytes", "long", 145),
    ],
}
MANIFEST_ENTRY = fastavro.parse_schema(
    {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            _optional("snapshot_id", "long", 1),
            _optional("sequence_number", "long", 3),
            _optional("file_sequence_number", "long", 4),
            {"name": "data_file", "type": _DATA_FILE, "field-id": 2},
        ],
    }
)
_FIELD_SUMMARY = {
    "type": "record",
    "name": "r508",
    "fields": [
        {"name": "contains_null", "type": "boolean", "field-id": 509},
        _optional("contains_nan", "boolean", 518),
        _optional("lower_bound", "bytes", 510),
        _optional("upper_bound", "bytes", 511),
    ],
}
MANIFEST_FILE = fastavro.parse_schema(
    {
        "type": "record",
        "name": "manifest_file",
        "fields": [
            {"name": "manifest_path", "type": "string", "field-id": 500},
            {"name": "manifest_length", "type": "long", "field-id": 501},
            {"name": "partition_spec_id", "type": "int", "field-id": 502},
            {"name": "content", "type": "int", "field-id": 517},
            {"name": "sequence_number", "type": "long", "field-id": 515},
            {"name": "min_sequence_number", "type": "long", "field-id": 516},
            {"name": "added_snapshot_id", "type": "long", "field-id": 503},
            {"name": "added_files_count", "type": "int", "field-id": 504},
            {"name": "existing_files_count", "type": "int", "field-id": 505},
            {"name": "deleted_files_count", "type": "int", "field-id": 506},
            {"name": "added_rows_count", "type": "long", "field-id": 512},
            {"name": "existing_rows_count", "type": "long", "field-id": 513},
            {"name": "deleted_rows_count", "type": "long", "field-id": 514},
            _optional("partitions", {"type": "array", "items": _FIELD_SUMMARY, "element-id": 508}, 507),
            _optional("key_metadata", "bytes", 519),
            _optional("first_row_id", "long", 520),
        ],
    }
)


def write_avro(schema: Any, records: Iterable[dict[str, Any]], metadata: dict[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec="deflate", metadata=metadata)
    return out.getvalue()


def read_avro(data: bytes) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", list(fastavro.reader(io.BytesIO(data))))


def manifest(entries: list[dict[str, Any]], content: int, schema_json: dict[str, Any]) -> bytes:
    """A manifest of ``entries`` (all data files, or all deletion vectors) written under the
    table schema ``schema_json``."""
    return write_avro(
        MANIFEST_ENTRY,
        entries,
        {
            "schema": json.dumps(schema_json),
            "schema-id": str(schema_json["schema-id"]),
            "partition-spec": "[]",
            "partition-spec-id": "0",
            "format-version": FORMAT_VERSION,
            "content": "deletes" if content else "data",
        },
    )


def manifest_list(
    files: list[dict[str, Any]], snapshot_id: int, parent_id: int | None, sequence: int, first_row_id: int
) -> bytes:
    return write_avro(
        MANIFEST_FILE,
        files,
        {
            "snapshot-id": str(snapshot_id),
            "parent-snapshot-id": str(parent_id) if parent_id is not None else "null",
            "sequence-number": str(sequence),
            "first-row-id": str(first_row_id),
            "format-version": FORMAT_VERSION,
        },
    )


def entry(data_file: dict[str, Any], sequence: int | None = None) -> dict[str, Any]:
    """A manifest entry, status ADDED. Snapshot id and sequence numbers left null are
    inherited from the manifest's entry in the manifest list; ``sequence`` sets them."""
    return {
        "status": ADDED,
        "snapshot_id": None,
        "sequence_number": sequence,
        "file_sequence_number": sequence,
        "data_file": {
            "partition": {},
            "column_sizes": [],
            "value_counts": [],
            "null_value_counts": [],
            "nan_value_counts": [],
            "lower_bounds": [],
            "upper_bounds": [],
            "key_metadata": None,
            "split_offsets": None,
            "equality_ids": None,
            "sort_order_id": None,
            "first_row_id": None,
            "referenced_data_file": None,
            "content_offset": None,
            "content_size_in_bytes": None,
            **data_file,
        },
    }


def as_map(values: dict[int, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in sorted(values.items())]

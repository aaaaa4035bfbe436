"""What the Iceberg v3 spec asks of a table's metadata, checked over every metadata file of a
mirror (iceberg.apache.org/spec: "Table Metadata Fields", "Snapshots", "Manifest Lists",
"Row Lineage", appendix D's single-value form of bounds). The readers of the mirror matrix
read metadata that breaks several of these rules (wrong counts in a manifest list, a sequence
number behind its snapshots, bounds in the wrong byte order): a later reader, a filter that
prunes by the bounds, or a writer that commits on top, need not. Manifests are read with
fastavro, not with the mirror's own Avro code, and every data file's bounds and null counts
are checked against the file's own values. Returns the problems found, each naming its
metadata file."""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import manifest_table as mt

DATA = 0
"""A manifest's content: data files (1: deletes)."""
ADDED, DELETED = 1, 2
"""An entry's status."""


def problems(t: mt.Table, versions: list[int] | None = None) -> list[str]:
    """The problems of the metadata files of ``t``'s Iceberg mirror (of ``versions``, default
    every one), every version synced."""
    t.sync_mirrors()
    root = Path(t.uri)
    found: list[str] = []
    retained = {info.version for info in t.history()}
    if versions is None:
        versions = sorted(int(p.name[1:].split(".")[0]) for p in (root / "metadata").glob("v*.metadata.json"))
    for version in versions:
        metadata = json.loads((root / "metadata" / f"v{version}.metadata.json").read_text())
        schema = t.manifest(version=version).schema if version in retained else None
        found += [f"v{version}.metadata.json: {p}" for p in _metadata(root, metadata, schema)]
    return found


def _metadata(root: Path, metadata: dict[str, Any], schema: pa.Schema | None) -> list[str]:
    """``schema``: our version's, when it is retained."""
    found = []
    snapshots, location = metadata["snapshots"], metadata["location"]
    if Path(location.removeprefix("file://")) != root:
        found.append(f"location {location}, the table is at {root}")
    if metadata["last-sequence-number"] < max(s["sequence-number"] for s in snapshots):
        found.append("last-sequence-number behind a snapshot's sequence-number")
    schemas = {s["schema-id"]: s for s in metadata["schemas"]}
    ids = [i for kept in schemas.values() for i in _field_ids(kept["fields"])]
    if metadata["last-column-id"] < max(ids, default=0):
        found.append(f"last-column-id {metadata['last-column-id']} below a field id {max(ids)}")
    current_schema = schemas[metadata["current-schema-id"]]
    mapping = json.loads(metadata["properties"].get("schema.name-mapping.default", "[]"))
    mapped = {m.get("field-id"): m["names"] for m in mapping}
    if any(not mapped.get(f["id"]) for f in current_schema["fields"]):  # (names: the files')
        found.append("the name mapping lacks a column (files without field ids are read by it)")
    if schema is not None and {f["name"]: not f["required"] for f in current_schema["fields"]} != {
        f.name: f.nullable for f in schema
    }:
        found.append("the current schema's required flags are not the table's nullability")
    for older, newer in zip(snapshots, snapshots[1:]):
        if newer["sequence-number"] <= older["sequence-number"]:
            found.append(f"snapshot {newer['snapshot-id']}: sequence-number not past its predecessor's")
        if newer["first-row-id"] < older["first-row-id"] + older["added-rows"]:
            found.append(f"snapshot {newer['snapshot-id']}: first-row-id inside its predecessor's rows")
    log = metadata["snapshot-log"]
    if [e["snapshot-id"] for e in log] != [s["snapshot-id"] for s in snapshots] or any(
        later["timestamp-ms"] < earlier["timestamp-ms"] for earlier, later in zip(log, log[1:])
    ):
        found.append("the snapshot-log is not every snapshot in time order (as-of-time reads go by it)")
    current = next(s for s in snapshots if s["snapshot-id"] == metadata["current-snapshot-id"])
    if metadata["next-row-id"] < current["first-row-id"] + current["added-rows"]:
        found.append("next-row-id inside the current snapshot's rows")
    for snapshot in snapshots:
        found += _snapshot(root, snapshot, location, schemas[snapshot["schema-id"]])
    return found


def _snapshot(root: Path, snapshot: dict[str, Any], location: str, schema: dict[str, Any]) -> list[str]:
    found = []
    sid = snapshot["snapshot-id"]
    entries = read_avro(root, location, snapshot["manifest-list"], found)
    records = 0
    for entry in entries:
        data = entry["content"] == DATA
        if (entry["first_row_id"] is None) == data:
            found.append(f"{entry['manifest_path']}: first_row_id {entry['first_row_id']}, content {entry['content']}")
        files = [f for f in read_avro(root, location, entry["manifest_path"], found) if f["status"] != DELETED]
        added = [f for f in files if f["status"] == ADDED and entry["added_snapshot_id"] == sid]
        if entry["added_snapshot_id"] == sid and (
            entry["added_files_count"] != len(added)
            or entry["added_rows_count"] != sum(f["data_file"]["record_count"] for f in added)
        ):
            found.append(f"{entry['manifest_path']}: added counts unlike its added entries")
        for f in files:
            if not f["data_file"]["file_path"].startswith(location + "/"):
                found.append(f"{f['data_file']['file_path']} outside the table's location")
            elif data:
                found += _bounds(root / f["data_file"]["file_path"][len(location) + 1 :], f["data_file"], schema)
        records += sum(f["data_file"]["record_count"] for f in files) if data else 0
    if snapshot["summary"].get("total-records") != str(records):
        found.append(f"total-records {snapshot['summary'].get('total-records')}, its files hold {records}")
    return [f"snapshot {sid}: {p}" for p in found]


def read_avro(root: Path, location: str, path: str, found: list[str]) -> list[dict[str, Any]]:
    """The records of the Avro file at ``path`` (absolute, under ``location``, the table's
    ``root``); a path elsewhere is a problem, added to ``found``."""
    if not path.startswith(location + "/"):
        found.append(f"{path} outside the table's location")
        return []
    with open(root / path[len(location) + 1 :], "rb") as f:
        return list(fastavro.reader(f))


def _field_ids(fields: list[dict[str, Any]]) -> list[int]:
    ids = []
    for field in fields:
        ids.append(field["id"])
        kind = field["type"]
        if isinstance(kind, dict):
            ids += _field_ids(kind.get("fields", []))
            ids += [kind[k] for k in ("element-id", "key-id", "value-id") if k in kind]
            for k in ("element", "key", "value"):
                if isinstance(kind.get(k), dict):
                    ids += _field_ids(kind[k].get("fields", []))
    return ids


_ALWAYS_BOUNDED = ("boolean", "int", "long", "date", "timestamp")
"""Types whose every value our stats bound (long strings, NaN and decimals may go unbounded;
times have no stats: format/stats.py)."""
_PACKED = {"int": "<i", "date": "<i", "long": "<q", "time": "<q", "float": "<f", "double": "<d"}


def _bounds(path: Path, entry: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The entry's null counts and bounds against the file's own values, column by column (by
    field id; a column the file lacks is null in every row): a bound past a value, or a null
    count that is not the file's, makes a reader skip a file that matches."""
    found: list[str] = []
    table = pq.read_table(path)
    by_id = {int(f.metadata[b"PARQUET:field_id"]): table.column(i)
             for i, f in enumerate(table.schema) if f.metadata and b"PARQUET:field_id" in f.metadata}
    nulls, lows, highs = ({e["key"]: e["value"] for e in entry[k] or []}
                          for k in ("null_value_counts", "lower_bounds", "upper_bounds"))
    for field in schema["fields"]:
        fid, kind = field["id"], field["type"]
        column = by_id.get(fid)
        actual_nulls = table.num_rows if column is None else column.null_count
        if fid in nulls and nulls[fid] != actual_nulls:
            found.append(f"{path.name}: field {fid} null_value_counts {nulls[fid]}, the file has {actual_nulls}")
        if column is None or not isinstance(kind, str):
            continue
        values = [v for v in _comparable(column, kind) if v is not None]
        raw = {"lower": lows.get(fid), "upper": highs.get(fid)}
        if values and None in raw.values() and kind.startswith(_ALWAYS_BOUNDED):
            found.append(f"{path.name}: field {fid} ({kind}) has values but no bounds (readers cannot prune by it)")
        for name, bound in ((name, b) for name, b in raw.items() if b is not None):
            problem = _bound_problem(bound, kind, name, values)
            if problem:
                found.append(f"{path.name}: field {fid} ({kind}) {problem}")
    return found


def _bound_problem(raw: bytes, kind: str, name: str, values: list[Any]) -> str | None:
    """What is wrong with the ``name`` ("lower" or "upper") bound ``raw`` of ``values``, if anything."""
    if kind.startswith("decimal"):
        unscaled = int.from_bytes(raw, "big", signed=True)
        if len(raw) != max(1, (unscaled.bit_length() + 8) // 8):
            return f"{name} bound in {len(raw)} bytes, not the fewest"
    bound = _decoded(raw, kind)
    if isinstance(bound, float) and math.isnan(bound):
        return f"{name} bound NaN (the spec's bounds leave NaN out)"
    if values and (bound > min(values) if name == "lower" else bound < max(values)):
        return f"{name} bound {bound!r} excludes a value"
    return None


def _comparable(column: pa.ChunkedArray, kind: str) -> list[Any]:
    """The column's values as its Iceberg bounds compare: numbers of the type's unit, NaN left out."""
    if kind.startswith("timestamp"):
        unit = "ns" if kind.endswith("_ns") else "us"
        column = pc.cast(column, pa.timestamp(unit, column.type.tz)).cast(pa.int64())
    elif kind == "date":
        column = column.cast(pa.date32()).cast(pa.int32())
    elif kind == "time":
        column = column.cast(pa.int64())
    return [v for v in column.to_pylist() if not (isinstance(v, float) and v != v)]


def _decoded(raw: bytes, kind: str) -> Any:
    """Iceberg's single-value binary form (the spec's appendix D)."""
    if kind.startswith("timestamp"):
        kind = "long"
    if kind in _PACKED:
        return struct.unpack(_PACKED[kind], raw)[0]
    if kind == "boolean":
        return bool(raw[0])
    if kind == "string":
        return raw.decode()
    if kind.startswith("decimal"):
        scale = int(kind.split(",")[1].rstrip(")"))
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
    return raw

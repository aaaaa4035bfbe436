"""What the Iceberg v3 spec asks of a table's metadata, checked over every metadata file of a
mirror (iceberg.apache.org/spec: "Table Metadata Fields", "Snapshots", "Manifest Lists",
"Row Lineage"). The readers of the mirror matrix read metadata that breaks several of these
rules (wrong counts in a manifest list, a sequence number behind its snapshots): a later
reader, or a writer that commits on top, need not. Manifests are read with fastavro, not with
the mirror's own Avro code. Returns the problems found, each naming its metadata file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro

import manifest_table as mt

DATA, DELETES = 0, 1
ADDED = 1


def problems(t: mt.Table, versions: list[int] | None = None) -> list[str]:
    """The problems of the metadata files of ``t``'s Iceberg mirror (of ``versions``, default
    every one), every version synced."""
    t.sync_mirrors()
    root = Path(t.uri)
    found: list[str] = []
    paths = sorted((root / "metadata").glob("v*.metadata.json"))
    for path in paths if versions is None else [root / "metadata" / f"v{v}.metadata.json" for v in versions]:
        metadata = json.loads(path.read_text())
        found += [f"{path.name}: {p}" for p in _metadata(root, metadata)]
    return found


def _metadata(root: Path, metadata: dict[str, Any]) -> list[str]:
    found = []
    snapshots, location = metadata["snapshots"], metadata["location"]
    if Path(location.removeprefix("file://")) != root:
        found.append(f"location {location}, the table is at {root}")
    if metadata["last-sequence-number"] < max(s["sequence-number"] for s in snapshots):
        found.append("last-sequence-number behind a snapshot's sequence-number")
    ids = [i for schema in metadata["schemas"] for i in _field_ids(schema["fields"])]
    if metadata["last-column-id"] < max(ids, default=0):
        found.append(f"last-column-id {metadata['last-column-id']} below a field id {max(ids)}")
    current_schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
    mapping = json.loads(metadata["properties"].get("schema.name-mapping.default", "[]"))
    mapped = {m.get("field-id"): m["names"] for m in mapping}
    if any(not mapped.get(f["id"]) for f in current_schema["fields"]):  # (names: the files')
        found.append("the name mapping lacks a column (files without field ids are read by it)")
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
        found += _snapshot(root, snapshot, location)
    return found


def _snapshot(root: Path, snapshot: dict[str, Any], location: str) -> list[str]:
    found = []
    sid = snapshot["snapshot-id"]
    entries = _avro(root, location, snapshot["manifest-list"], found)
    records = 0
    for entry in entries:
        data = entry["content"] == DATA
        if (entry["first_row_id"] is None) == data:
            found.append(f"{entry['manifest_path']}: first_row_id {entry['first_row_id']}, content {entry['content']}")
        files = [f for f in _avro(root, location, entry["manifest_path"], found) if f["status"] != 2]
        added = [f for f in files if f["status"] == ADDED and entry["added_snapshot_id"] == sid]
        if entry["added_snapshot_id"] == sid and (
            entry["added_files_count"] != len(added)
            or entry["added_rows_count"] != sum(f["data_file"]["record_count"] for f in added)
        ):
            found.append(f"{entry['manifest_path']}: added counts unlike its added entries")
        for f in files:
            if not f["data_file"]["file_path"].startswith(location + "/"):
                found.append(f"{f['data_file']['file_path']} outside the table's location")
        records += sum(f["data_file"]["record_count"] for f in files) if data else 0
    if snapshot["summary"].get("total-records") != str(records):
        found.append(f"total-records {snapshot['summary'].get('total-records')}, its files hold {records}")
    return [f"snapshot {sid}: {p}" for p in found]


def _avro(root: Path, location: str, path: str, found: list[str]) -> list[dict[str, Any]]:
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

"""The Iceberg v3 mirror: ``metadata/v<N>.metadata.json`` describes our version N
(docs/mirrors.md, "Iceberg").

1. Plan the version's manifests (iceberg_manifests.py): reuse the previous version's, write
   new ones for what the commit changed, Puffin files first.
2. Write the manifest list (``metadata/snap-<snapshot id>-<uuid>.avro``).
3. Create ``metadata/v<N>.metadata.json`` with put-if-absent: that create is the mirror's
   commit point. Found taken, another writer mirrored N first: its version stands, and the
   objects written here are left to garbage collection (a lost response may hide that the
   create was ours, so they are never deleted here).
4. Advance ``metadata/version-hint.text`` to N (never backwards).
Snapshot ids come from our commit ids and sequence numbers from our versions (N + 1), so every
writer describes a version the same way; a snapshot's summary names our version."""

from __future__ import annotations

import json
import re
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound, PreconditionFailed
from ..format.keys import METADATA_PREFIX, key_problem
from ..format.manifest import manifest_key
from ..format.mirrors import ICEBERG, setting
from ..format.properties import CLUSTER_BY, SORT_BY
from ..log.version import Version
from ..process_pools import ProcessLock
from .change import tombstones_of
from .iceberg_avro import DATA, manifest_list, read_avro
from .iceberg_manifests import ManifestPlanner, NewManifest, slot_of
from .iceberg_schema import name_mapping, schema_json
from .source import Source, advance_hint, strict_json

HINT = f"{METADATA_PREFIX}version-hint.text"
VERSION_PROPERTY = "manifest-table.version"
_METADATA = re.compile(r"metadata/v([0-9]+)\.metadata\.json")
_STATES: OrderedDict[tuple[str, int], IcebergState] = OrderedDict()
_STATES_LOCK = ProcessLock()


def metadata_key(version: int) -> str:
    return f"{METADATA_PREFIX}v{version}.metadata.json"


def snapshot_id(manifest: Version) -> int:
    return int(manifest.commit_id[:15], 16)


@dataclass(frozen=True)
class IcebergState:
    """A mirrored version: its metadata and its manifest list's entries by slot."""

    version: int
    metadata: dict[str, Any]
    manifests: dict[str, dict[str, Any]]


def read_state(src: Source, version: int) -> IcebergState | None:
    """The mirror of ``version``, or None if it has none or describes the table at another
    location (cached: mirror objects are write-once)."""
    with _STATES_LOCK:
        found = _STATES.get((src.location, version))
    if found is not None:
        return found
    try:
        metadata = json.loads(src.store.get(metadata_key(version)))
    except NotFound:
        return None
    if metadata.get("location") != src.location:
        return None  # the table was moved: its files have new locations, start over
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    list_key = key_in(src.location, current["manifest-list"])
    if list_key is None:
        return None  # not a list of ours: start over
    entries = read_avro(src.store.get(list_key))
    if any(key_in(src.location, e["manifest_path"]) is None for e in entries):
        return None
    state = IcebergState(version, metadata, {slot_of(e["manifest_path"]): e for e in entries})
    _remember(src, state)
    return state


def key_in(location: str, path: str) -> str | None:
    """The key of ``path`` under the Iceberg ``location`` that names it, if it is a key of the
    mirror's (``key_problem``, the one key check); None for any other path, which is then never
    read: paths in Iceberg metadata are absolute, and a moved table's old files name the old
    location."""
    if not path.startswith(location + "/"):
        return None
    key = path[len(location) + 1 :]
    return key if key_problem(key, METADATA_PREFIX) is None else None


def _remember(src: Source, state: IcebergState) -> None:
    with _STATES_LOCK:
        _STATES[(src.location, state.version)] = state
        while len(_STATES) > 8:
            _STATES.popitem(last=False)


def has(src: Source, version: int) -> bool:
    return src.store.head(metadata_key(version)) is not None


def latest(src: Source) -> int | None:
    """The newest mirrored version: the hint, then probing forward (the hint may lag)."""
    try:
        version: int | None = int(src.store.get(HINT).decode().strip())
    except (NotFound, ValueError):
        found = [int(m.group(1)) for info in src.store.list(METADATA_PREFIX) if (m := _METADATA.fullmatch(info.key))]
        version = max(found, default=None)
    if version is None:
        return None
    while src.store.head(metadata_key(version + 1)) is not None:
        version += 1
    return version if src.store.head(metadata_key(version)) is not None else None


def write_version(
    src: Source,
    cur: Version,
    prev: Version | None,
    prev_state: IcebergState | None,
    new_tombstones: dict[str, dict[int, str]] | None,
) -> bool:
    """Mirror ``cur``, incrementally from ``prev`` (the version before it) and its mirror
    ``prev_state``, or whole when ``prev_state`` is None. False when another writer mirrored it
    first. ``new_tombstones``: the tombstones ``cur`` references first (None: work them out)."""
    fields = cur.fields
    prev_meta = prev_state.metadata if prev_state is not None else None
    schemas, schema_id = _schemas(prev_meta, fields)
    if prev_state is None:
        prev, new_tombstones = None, tombstones_of(list(cur.files))
    plan = ManifestPlanner(
        src, cur, prev, prev_state.manifests if prev_state else {}, schemas[schema_id], new_tombstones or {}
    ).run()
    sid, sequence = snapshot_id(cur), cur.version + 1
    first_row_id = prev_meta["next-row-id"] if prev_meta else 0
    entries, next_row_id = list(plan.reused.values()), first_row_id
    for new in plan.new:
        entries.append(_list_entry(src, new, sid, sequence, next_row_id if new.content == DATA else None))
        next_row_id += new.rows if new.content == DATA else 0
    parent = prev_meta["current-snapshot-id"] if prev_meta else None
    list_key = f"{METADATA_PREFIX}snap-{sid}-{uuid.uuid4().hex}.avro"
    written = src.put_all([*plan.pending, (list_key, manifest_list(entries, sid, parent, sequence, first_row_id))])
    snapshot = {
        "snapshot-id": sid,
        **({"parent-snapshot-id": parent} if parent is not None else {}),
        "sequence-number": sequence,
        "timestamp-ms": cur.timestamp_ms,
        "manifest-list": f"{src.location}/{list_key}",
        "schema-id": schema_id,
        "first-row-id": first_row_id,
        "added-rows": next_row_id - first_row_id,
        "summary": {
            "operation": _operation(cur, plan.new),
            VERSION_PROPERTY: str(cur.version),
            "manifest-table.commit-id": cur.commit_id,
            "total-records": str(cur.totals.rows),
            "total-data-files": str(cur.totals.files),
        },
    }
    metadata = _metadata(src, cur, prev_meta, schemas, snapshot, next_row_id)  # (while the PUTs run)
    data = strict_json(metadata).encode()
    written()
    if (
        not src.commit_point(metadata_key(cur.version), data, cur.gc_grace)
        and src.store.get(metadata_key(cur.version)) != data
    ):
        return False
    _remember(src, IcebergState(cur.version, metadata, {slot_of(e["manifest_path"]): e for e in entries}))
    advance(src, cur.version)
    return True


def advance(src: Source, version: int) -> None:
    """Move ``version-hint.text`` to ``version`` (never backwards)."""
    advance_hint(src, HINT, version, lambda v: str(v).encode(), lambda b: int(b.decode().strip()))


def drop_snapshots_before(src: Source, version: int, oldest: int) -> bool:
    """Rewrite ``version``'s metadata file without the snapshots of versions before
    ``oldest`` (garbage collection expires them). False when it lists none (or is absent).
    Compare-and-swap, re-read after a lost race: the file's meaning never changes, only what
    it offers for time travel."""
    for _ in range(_REWRITE_ATTEMPTS):
        try:
            data, etag = src.store.get_with_etag(metadata_key(version))
        except NotFound:
            return False
        metadata = json.loads(data)
        kept = [s for s in metadata["snapshots"] if int(s["summary"][VERSION_PROPERTY]) >= oldest]
        if len(kept) == len(metadata["snapshots"]):
            return False
        ids = {s["snapshot-id"] for s in kept}
        metadata["snapshots"] = kept
        metadata["snapshot-log"] = [e for e in metadata["snapshot-log"] if e["snapshot-id"] in ids]
        try:
            src.store.put_if_match(metadata_key(version), strict_json(metadata).encode(), etag)
            return True
        except PreconditionFailed:
            continue
    return True


_REWRITE_ATTEMPTS = 4


def _list_entry(src: Source, new: NewManifest, sid: int, sequence: int, first_row_id: int | None) -> dict[str, Any]:
    return {
        "manifest_path": f"{src.location}/{new.key}",
        "manifest_length": new.length,
        "partition_spec_id": 0,
        "content": new.content,
        "sequence_number": sequence,
        "min_sequence_number": 0 if new.content == DATA else sequence,
        "added_snapshot_id": sid,
        "added_files_count": new.files,
        "existing_files_count": 0,
        "deleted_files_count": 0,
        "added_rows_count": new.rows,
        "existing_rows_count": 0,
        "deleted_rows_count": 0,
        "partitions": [],
        "key_metadata": None,
        "first_row_id": first_row_id,
    }


def _operation(cur: Version, new: list[NewManifest]) -> str:
    if cur.operation == "append" or (cur.operation == "create" and not new):
        return "append"
    if cur.operation == "delete":
        return "delete"
    return "overwrite" if new and cur.operation not in ("compact", "upgrade") else "replace"


def _schemas(prev_meta: dict[str, Any] | None, fields: Any) -> tuple[dict[int, dict[str, Any]], int]:
    """The schemas a metadata file keeps (by id) and the current one's id: the previous
    file's id when the columns are the same, else a new one."""
    schemas = {s["schema-id"]: s for s in (prev_meta or {}).get("schemas", [])}
    wanted = schema_json(fields, 0)["fields"]
    for schema_id, schema in schemas.items():
        if schema["fields"] == wanted:
            return schemas, schema_id
    schema_id = max(schemas, default=-1) + 1
    schemas[schema_id] = schema_json(fields, schema_id)
    return schemas, schema_id


def _metadata(
    src: Source,
    cur: Version,
    prev_meta: dict[str, Any] | None,
    schemas: dict[int, dict[str, Any]],
    snapshot: dict[str, Any],
    next_row_id: int,
) -> dict[str, Any]:
    listed = setting(cur.mirrors[ICEBERG], ICEBERG)
    snapshots = _retained_snapshots(src, prev_meta["snapshots"] if prev_meta else [], cur.version, listed) + [snapshot]
    used = {s["schema-id"] for s in snapshots}
    return {
        "format-version": 3,
        "table-uuid": cur.mirrors[ICEBERG]["table_uuid"],
        "location": src.location,
        "last-sequence-number": snapshot["sequence-number"],
        "last-updated-ms": cur.timestamp_ms,
        "last-column-id": cur.index.last_field_id,  # type: ignore[union-attr]
        "current-schema-id": snapshot["schema-id"],
        "schemas": [schemas[i] for i in sorted(schemas) if i in used],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        **sort_orders(cur),
        "properties": {"schema.name-mapping.default": name_mapping(cur.fields), VERSION_PROPERTY: str(cur.version)},
        "current-snapshot-id": snapshot["snapshot-id"],
        "next-row-id": next_row_id,
        "refs": {"main": {"snapshot-id": snapshot["snapshot-id"], "type": "branch"}},
        "snapshots": snapshots,
        "snapshot-log": [{"timestamp-ms": s["timestamp-ms"], "snapshot-id": s["snapshot-id"]} for s in snapshots],
        "metadata-log": [],
        "statistics": [],
        "partition-statistics": [],
    }


def sort_orders(cur: Version) -> dict[str, Any]:
    """The table's sort order as Iceberg states one: ``sort_by`` (every appended batch is
    sorted by it), else a one-column ``cluster_by`` (a plain sort); a curve over several
    columns is no Iceberg sort order. Its id is a hash of its fields: one id, one order."""
    names: tuple[str, ...] = cur.properties[SORT_BY] or (
        cur.properties[CLUSTER_BY] if len(cur.properties[CLUSTER_BY]) == 1 else ()
    )
    unsorted = {"order-id": 0, "fields": []}
    if not names:
        return {"default-sort-order-id": 0, "sort-orders": [unsorted]}
    ids = dict(zip(cur.fields.schema.names, cur.fields.ids))
    fields = [
        {"transform": "identity", "source-id": ids[name], "direction": "asc", "null-order": "nulls-last"}
        for name in names
    ]
    order_id = 1 + zlib.crc32(strict_json(fields).encode()) % (2**31 - 2)
    return {"default-sort-order-id": order_id, "sort-orders": [unsorted, {"order-id": order_id, "fields": fields}]}


def _retained_snapshots(
    src: Source, snapshots: list[dict[str, Any]], version: int, listed: int
) -> list[dict[str, Any]]:
    """The previous file's snapshots of versions our garbage collection still retains (it
    expires a prefix: a binary search of HEADs finds the oldest), the newest ``listed - 1``
    (format/mirrors.py, ``max_snapshots``)."""
    snapshots = snapshots[-(listed - 1) :] if listed > 1 and src.log.every_version_changes else []
    if not snapshots:  # (a database's table: which older states are retained is the database's to say)
        return []
    versions = [int(s["summary"][VERSION_PROPERTY]) for s in snapshots]
    lo, hi = versions[0], version
    if src.store.head(manifest_key(lo)) is None:  # rare: gc expired some since the last commit
        while lo < hi:
            mid = (lo + hi) // 2
            if src.store.head(manifest_key(mid)) is not None:
                hi = mid
            else:
                lo = mid + 1
    return [s for s, v in zip(snapshots, versions) if v >= lo]

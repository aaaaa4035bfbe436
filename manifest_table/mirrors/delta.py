"""The Delta mirror: ``_delta_log/<N as 20 digits>.json`` is our version N (docs/mirrors.md,
"Delta").

1. Write the Delta DV files of the tombstones the version references first (delta_dv.py).
2. Create the version's JSON commit with put-if-absent (the mirror's commit point, as in
   Delta itself): ``remove`` for each file gone or whose deletion vector changed (with the
   vector it had), ``add`` for each new file or new vector, ``metaData`` / ``protocol`` when
   the schema or the features it needs changed. Taken means another writer mirrored N first.
3. Every ``checkpoint_interval`` versions write a checkpoint (every live file) and advance
   ``_last_checkpoint`` (never backwards). A mirror starts with a checkpoint and a JSON commit
   of the same version holding every file: readers find that version's time in it.
The protocol asks only for what a version uses (``protocol``): deletion vectors while a live
file has one, column mapping (``name`` mode: files carry each column under its physical name,
format/field_ids.py) while a column's name differs from its physical name, so a table never
renamed stays readable by readers without column mapping. Every commit records our commit
time as Delta's in-commit timestamp (writer version 7). All JSON is strict: a non-finite
bound is left out, as NaN is."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import NotFound
from ..format.field_ids import FieldIds
from ..format.keys import DELTA_LOG_PREFIX
from ..format.manifest import DataFile
from ..format.mirrors import DELTA, setting
from ..format.properties import CLUSTER_BY
from ..lazy import lazy
from ..log.version import Version
from .change import VersionChange, tombstones_of
from .columns import Bounds, bounds_of
from .delta_dv import descriptor, dv_file, dv_key
from .source import Source, advance_hint, strict_json
from .types import delta_type

if TYPE_CHECKING:
    import pyarrow.parquet as pq
else:
    pq = lazy("pyarrow.parquet")

LAST_CHECKPOINT = f"{DELTA_LOG_PREFIX}_last_checkpoint"
CLUSTERING = "delta.clustering"
_ENTRY = re.compile(r"_delta_log/([0-9]{20})\.(json|checkpoint\.parquet)")


def json_key(version: int) -> str:
    return f"{DELTA_LOG_PREFIX}{version:020d}.json"


def checkpoint_key(version: int) -> str:
    return f"{DELTA_LOG_PREFIX}{version:020d}.checkpoint.parquet"


def has(src: Source, version: int) -> bool:
    return src.store.head(json_key(version)) is not None or src.store.head(checkpoint_key(version)) is not None


def latest(src: Source) -> int | None:
    """The newest mirrored version: the last checkpoint (or a LIST), then probing forward."""
    try:
        version: int | None = json.loads(src.store.get(LAST_CHECKPOINT))["version"]
    except (NotFound, ValueError, KeyError, TypeError):
        found = [int(m.group(1)) for info in src.store.list(DELTA_LOG_PREFIX) if (m := _ENTRY.fullmatch(info.key))]
        version = max(found, default=None)
    if version is None:
        return None
    while src.store.head(json_key(version + 1)) is not None:
        version += 1
    exists = src.store.head(json_key(version)) or src.store.head(checkpoint_key(version))
    return version if exists is not None else None


# --- table-level actions ------------------------------------------------------------------
def column_mapping(fields: FieldIds) -> bool:
    """Whether Delta must map columns: some column's files carry it under another name (a
    rename, or a name reused after a drop). A drop alone needs no mapping: the dropped
    column's physical name is never reused, and readers ignore file columns the schema lacks."""
    return any(f.name != physical for f, physical in zip(fields.schema, fields.physical_names))


def _schema(fields: FieldIds) -> str:
    mapped = column_mapping(fields)
    return strict_json(
        {
            "type": "struct",
            "fields": [
                {
                    "name": f.name,
                    "type": delta_type(f.type),
                    "nullable": f.nullable,
                    "metadata": {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": physical}
                    if mapped
                    else {},
                }
                for fid, f, physical in zip(fields.ids, fields.schema, fields.physical_names)
            ],
        }
    )


def protocol(manifest: Version) -> dict[str, Any]:
    """The features ``manifest`` uses, no more: a reader that lacks one still reads versions
    that do not use it (deltalake's pyarrow path and Polars refuse column mapping)."""
    fields = manifest.fields
    readers = [
        name
        for name, used in (
            ("columnMapping", column_mapping(fields)),
            ("deletionVectors", manifest.totals.deleted > 0),
            ("timestampNtz", any(delta_type(f.type) == "timestamp_ntz" for f in fields.schema)),
        )
        if used
    ]
    # Spark's Delta takes a NOT NULL column for an invariant: writer version 7 must list it.
    writers = [*readers, "inCommitTimestamp"] + (["invariants"] if any(not f.nullable for f in fields.schema) else [])
    writers += ["domainMetadata", "clustering"] if manifest.properties[CLUSTER_BY] else []
    if not readers:
        return {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writers}
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": writers}


def clustering(manifest: Version) -> dict[str, Any] | None:
    """The ``delta.clustering`` domain of a table with ``cluster_by``: its columns by physical
    name (Delta's liquid clustering orders along a Hilbert curve over them, as ours does)."""
    columns: tuple[str, ...] = manifest.properties[CLUSTER_BY]
    if not columns:
        return None
    physical = dict(zip(manifest.fields.schema.names, manifest.fields.physical_names))
    configuration = {"clusteringColumns": [[physical[name]] for name in columns], "domainName": CLUSTERING}
    return {"domain": CLUSTERING, "configuration": strict_json(configuration), "removed": False}


def metadata(manifest: Version) -> dict[str, Any]:
    options, index = manifest.mirrors[DELTA], manifest.index
    assert index is not None
    configuration = {
        "delta.enableInCommitTimestamps": "true",
        "delta.checkpointInterval": str(setting(options, DELTA)),
    }
    if manifest.totals.deleted > 0:
        configuration["delta.enableDeletionVectors"] = "true"
    if column_mapping(manifest.fields):
        configuration["delta.columnMapping.mode"] = "name"
        configuration["delta.columnMapping.maxColumnId"] = str(index.last_field_id)
    return {
        "id": options["table_id"],
        "format": {"provider": "parquet", "options": {}},
        "schemaString": _schema(manifest.fields),
        "partitionColumns": [],
        "configuration": configuration,
    }


# --- file actions ---------------------------------------------------------------------------
_BOUNDED = ("byte", "short", "integer", "long", "float", "double", "string", "date")
"""The types whose bounds Delta's JSON stats hold exactly (not timestamps, which Delta
truncates to milliseconds, nor decimals)."""


def add_actions(
    src: Source, files: Sequence[DataFile], bounds: dict[int, Bounds], fields: FieldIds, when: int
) -> list[dict[str, Any]]:
    """``add`` actions of ``files``, with their statistics keyed by physical name. The stats
    cover every row of a file, deleted ones included: with a deletion vector they are "wide"
    (``tightBounds`` false), as the protocol allows."""
    columns = []
    for fid, column, physical in zip(fields.ids, fields.schema, fields.physical_names):
        b = bounds[fid]
        exact = delta_type(column.type) in _BOUNDED and b.mins is not None
        columns.append(
            (
                physical,
                b.mins.to_pylist() if exact else None,  # type: ignore[union-attr]
                b.maxs.to_pylist() if exact else None,  # type: ignore[union-attr]
                b.nulls,
            )
        )
    out = []
    for i, f in enumerate(files):
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for physical, mins, maxs, null_counts in columns:
            if null_counts is not None and null_counts[i] is not None:
                nulls[physical] = null_counts[i]
            for values, into in ((mins, lows), (maxs, highs)):
                value = values[i] if values is not None else None
                if _bound(value):
                    into[physical] = value.isoformat() if isinstance(value, date) else value
        stats = {
            "numRecords": f.rows,
            "tightBounds": f.deletes is None,
            "minValues": lows,
            "maxValues": highs,
            "nullCount": nulls,
        }
        action = {
            "path": f.path,
            "partitionValues": {},
            "size": f.size,
            "modificationTime": when,
            "dataChange": True,
            "stats": strict_json(stats),
        }
        if f.deletes is not None:
            action["deletionVector"] = descriptor(f.deletes, src.tombstones)
        out.append(action)
    return out


def _bound(value: Any) -> bool:
    """A value a JSON bound can hold: NaN and infinities are no bounds (JSON has neither)."""
    return value is not None and not (isinstance(value, float) and not math.isfinite(value))


def _remove(src: Source, f: DataFile, when: int) -> dict[str, Any]:
    action = {
        "path": f.path,
        "deletionTimestamp": when,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {},
        "size": f.size,
    }
    if f.deletes is not None:
        action["deletionVector"] = descriptor(f.deletes, src.tombstones)
    return action


def write_dv_files(src: Source, tombstones: Iterable[str]) -> None:
    for tombstone in tombstones:
        src.create(dv_key(tombstone), dv_file(src.tombstones.object(tombstone), src.tombstones.bitmaps(tombstone)))


# --- commits and checkpoints -----------------------------------------------------------------
def _commit_info(cur: Version) -> dict[str, Any]:
    """The first action of every commit: our version, and our commit time as Delta's
    in-commit timestamp (strictly increasing, as ours are: commit/builder.py)."""
    return {
        "commitInfo": {
            "inCommitTimestamp": cur.timestamp_ms,
            "timestamp": cur.timestamp_ms,
            "operation": cur.operation.upper(),
            "operationParameters": {},
            "engineInfo": "manifest_table",
            "isBlindAppend": cur.operation == "append",
            "manifest_table": {"version": cur.version, "commit_id": cur.commit_id},
        }
    }


def _lines(actions: Iterable[dict[str, Any]]) -> bytes:
    return "".join(strict_json(a) + "\n" for a in actions).encode()


def write_commit(src: Source, change: VersionChange) -> bool:
    """Mirror ``change.cur`` as one JSON commit on the mirror of ``change.prev``. False when
    another writer mirrored it first."""
    cur, prev, when = change.cur, change.prev, change.cur.timestamp_ms
    write_dv_files(src, change.new_tombstones)
    actions = [_commit_info(cur)]
    if protocol(cur) != protocol(prev):
        actions.append({"protocol": protocol(cur)})
    if prev.mirrors.get(DELTA) != cur.mirrors[DELTA] or metadata(cur) != metadata(prev):
        actions.append({"metaData": metadata(cur)})
    domain = clustering(cur)
    if domain is not None and domain != clustering(prev):  # set or changed (reset: the next checkpoint drops it)
        actions.append({"domainMetadata": domain})
    actions += [{"remove": _remove(src, f, when)} for f in change.removed]
    actions += [{"remove": _remove(src, old, when)} for old, _ in change.redeleted]
    added = change.added + [new for _, new in change.redeleted]
    actions += [{"add": a} for a in add_actions(src, added, bounds_of(cur, added), cur.fields, when)]
    if not src.commit_point(json_key(cur.version), _lines(actions), cur.gc_grace):
        return False
    if cur.version % setting(cur.mirrors[DELTA], DELTA) == 0:
        write_checkpoint(src, cur)
    return True


def start(src: Source, cur: Version) -> None:
    """Start the mirror at ``cur``: a checkpoint, then a JSON commit of the same version with
    every file (a reader finds the version's time there: a log of checkpoints alone has no
    commit time for its first version, and deltalake then refuses any earlier time)."""
    actions = write_checkpoint(src, cur)
    src.commit_point(json_key(cur.version), _lines([_commit_info(cur), *actions]), cur.gc_grace)


def write_checkpoint(src: Source, cur: Version) -> list[dict[str, Any]]:
    """A checkpoint of ``cur`` from its manifest (every live file, and the DV files of every
    vector they have), then ``_last_checkpoint``; returns its actions. Create-only: a
    concurrent writer's checkpoint of the same version is as good."""
    rows = [{"protocol": protocol(cur)}, {"metaData": metadata(cur)}]
    domain = clustering(cur)
    rows += [{"domainMetadata": domain}] if domain else []
    for files, segment in _parts(cur):
        write_dv_files(src, tombstones_of(files))
        rows += [
            {"add": a} for a in add_actions(src, files, bounds_of(cur, files, segment), cur.fields, cur.timestamp_ms)
        ]
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    src.commit_point(checkpoint_key(cur.version), sink.getvalue().to_pybytes(), cur.gc_grace)
    advance_hint(
        src,
        LAST_CHECKPOINT,
        cur.version,
        lambda v: json.dumps({"version": v, "size": len(rows)}).encode(),
        lambda b: json.loads(b)["version"],
    )
    return rows


def _parts(manifest: Version) -> Iterable[tuple[list[DataFile], str | None]]:
    """A version's files, segment by segment (with the segment's key), then its tail."""
    index = manifest.index
    for summary in index.segments if index is not None else ():
        yield manifest.segment(summary.path).files(None, index.deletes), summary.path  # type: ignore[union-attr]
    yield list(manifest.tail), None


_STRINGS = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _STRINGS),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("tags", _STRINGS),
                    ("deletionVector", _DV),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", _STRINGS),
                    ("size", pa.int64()),
                    ("deletionVector", _DV),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _STRINGS)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _STRINGS),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]),
        ),
    ]
)

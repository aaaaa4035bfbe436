"""What the Delta protocol asks of a log, checked action by action over a mirror's
``_delta_log`` (PROTOCOL.md of delta-io/delta, "Table Features", "Add File and Remove File",
"In-Commit Timestamps", "Column Mapping", "Checkpoints"). The readers of the mirror matrix load
logs that break several of these rules (a feature in use but not listed, a row count of live
rows where the file's is asked): a writer that honours the protocol, or a later reader, need
not. Returns the problems found, each naming its commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import manifest_table as mt
from manifest_table.format.mirrors import DELTA, setting


def problems(t: mt.Table) -> list[str]:
    """The problems of the Delta mirror's log of ``t``, every retained version synced."""
    t.sync_mirrors()
    interval = setting(t.manifest().mirrors[DELTA], DELTA)
    retained = [info.version for info in t.history()]
    nullable = {v: {f.name: f.nullable for f in t.manifest(version=v).schema} for v in retained}
    root = Path(t.uri)
    log = root / "_delta_log"
    found: list[str] = []
    commits = sorted(int(p.name[:20]) for p in log.glob("*.json"))
    checkpoints = {int(p.name[:20]) for p in log.glob("*.checkpoint.parquet")}
    start = max((c for c in checkpoints if c <= commits[0]), default=None)
    state: dict[str, Any] = {}
    if start is not None:
        for row in pq.read_table(log / f"{start:020d}.checkpoint.parquet").to_pylist():
            for kind in ("protocol", "metaData"):
                if row[kind] is not None:
                    state[kind] = row[kind]
            if (row["domainMetadata"] or {}).get("domain") == "delta.clustering":
                state["clustering"] = row["domainMetadata"]
        state["metaData"]["configuration"] = dict(state["metaData"]["configuration"])  # (a map: pairs)
    for version in commits:
        where = f"_delta_log/{version:020d}.json"
        actions = [json.loads(line) for line in (log / f"{version:020d}.json").read_text().splitlines() if line]
        for action in actions:
            state.update({k: v for k, v in action.items() if k in ("protocol", "metaData")})
            if action.get("domainMetadata", {}).get("domain") == "delta.clustering":
                state["clustering"] = action["domainMetadata"]
        found += [f"{where}: {p}" for p in _commit(root, actions, state)]
        if version in nullable:
            schema = json.loads(state["metaData"]["schemaString"])
            got = {f["name"]: f["nullable"] for f in schema["fields"]}
            if got != nullable[version]:
                found.append(f"{where}: nullable {got}, the table's {nullable[version]}")
        if version % interval == 0 and version not in checkpoints and version != commits[0]:
            found.append(f"{where}: no checkpoint at a multiple of delta.checkpointInterval {interval}")
    hint = json.loads((log / "_last_checkpoint").read_text())
    rows = pq.read_metadata(log / f"{hint['version']:020d}.checkpoint.parquet").num_rows
    if hint.get("size") != rows:
        found.append(f"_last_checkpoint: size {hint.get('size')}, its checkpoint has {rows} actions")
    return found


def _commit(root: Path, actions: list[dict[str, Any]], state: dict[str, Any]) -> list[str]:
    protocol, metadata = state["protocol"], state["metaData"]
    config = metadata["configuration"]
    readers, writers = protocol.get("readerFeatures"), protocol.get("writerFeatures") or []
    timestamp = actions[0].get("commitInfo", {}).get("inCommitTimestamp")
    found = []
    if (protocol["minReaderVersion"] == 3) != (readers is not None) or readers == []:
        found.append(f"minReaderVersion {protocol['minReaderVersion']} with readerFeatures {readers}")
    if not set(readers or []) <= set(writers):
        found.append(f"readerFeatures {readers} not all in writerFeatures {writers}")
    enabled = config.get("delta.enableInCommitTimestamps") == "true"
    if isinstance(timestamp, int) and not enabled:
        found.append("an inCommitTimestamp, but in-commit timestamps not enabled: readers take the file's time")
    if enabled and "inCommitTimestamp" not in writers:
        found.append("in-commit timestamps enabled, inCommitTimestamp not in writerFeatures")
    if enabled and not isinstance(timestamp, int):
        found.append("in-commit timestamps enabled, the first action is no commitInfo with one")
    if not str(config.get("delta.checkpointInterval", "")).isdigit():
        found.append(f"delta.checkpointInterval is {config.get('delta.checkpointInterval')!r}")
    fields = json.loads(metadata["schemaString"])["fields"]
    ids = [f["metadata"].get("delta.columnMapping.id") for f in fields]
    if config.get("delta.columnMapping.mode") == "name":
        if None in ids or "columnMapping" not in (readers or []):
            found.append("column mapping without an id for every column, or not among readerFeatures")
        elif int(config.get("delta.columnMapping.maxColumnId", -1)) < max(ids):
            found.append(f"delta.columnMapping.maxColumnId below the largest column id {max(ids)}")
    physical = {f["metadata"].get("delta.columnMapping.physicalName", f["name"]) for f in fields}
    clustering = state.get("clustering")
    if clustering is not None and not clustering["removed"]:
        named = json.loads(clustering["configuration"])["clusteringColumns"]
        if not all(len(path) == 1 and path[0] in physical for path in named):
            found.append(f"clusteringColumns {named} are not all physical names of columns ({sorted(physical)})")
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    if any("deletionVector" in a for a in adds) and (
        "deletionVectors" not in (readers or []) or config.get("delta.enableDeletionVectors") != "true"
    ):
        found.append("a deletion vector without the deletionVectors feature and delta.enableDeletionVectors")
    for add in adds:
        records = json.loads(add["stats"])["numRecords"]
        rows = pq.read_metadata(root / add["path"]).num_rows
        if records != rows:
            found.append(f"add {add['path']}: numRecords {records}, the file has {rows} rows")
    for remove in removes:
        if remove.get("extendedFileMetadata") and ("size" not in remove or "partitionValues" not in remove):
            found.append(f"remove {remove['path']}: extendedFileMetadata without size and partitionValues")
    info = actions[0].get("commitInfo", {})
    if info.get("isBlindAppend") and removes:
        found.append("isBlindAppend on a commit that removes files")
    return found

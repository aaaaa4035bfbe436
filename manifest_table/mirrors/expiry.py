"""What garbage collection must keep for the mirrors (docs/mirrors.md, "Garbage collection").

1. A mirror that is on holds our versions back: GC retains every version from the newest
   one each mirror describes, so a lagging mirror never points at deleted files (``floor``).
2. Mirror objects expire with our versions. For the retained versions GC keeps
   (``needed``): their Iceberg metadata files, the manifest list of each one's snapshot and
   the manifests those list; the Delta log from the newest checkpoint at or before the oldest
   retained version (a reader starts from a checkpoint); the Puffin and Delta DV files of
   every tombstone kept; and the pointers of mirrors that are on. Everything else of a
   mirror's shapes goes, once older than the grace period, like our own objects.
3. Before anything is deleted, no retained mirror version may still offer an expired one
   (``trim``): the retained Iceberg metadata files drop the snapshots of expired versions
   (rewritten in place, as Iceberg's ``expire_snapshots`` writes metadata without them), and
   the Delta log gets a checkpoint at the oldest retained version, so that the log before it
   (versions whose files go) is deleted rather than kept to replay from."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..errors import NotFound
from ..format.keys import DELTA_LOG_PREFIX, METADATA_PREFIX
from ..format.mirrors import DELTA, ICEBERG
from ..log.version import Version
from ..log.version_log import VersionLog
from ..storage import ObjectInfo, ObjectStore
from . import delta, iceberg
from .delta_dv import dv_key
from .iceberg_avro import read_avro
from .puffin import puffin_key
from .source import Source
from .sync import status

_CHECKPOINT = re.compile(r"_delta_log/([0-9]{20})\.checkpoint\.parquet")
_LOG_ENTRY = re.compile(r"_delta_log/([0-9]{20})\.")
_METADATA = re.compile(r"metadata/v([0-9]+)\.metadata\.json")


def floor(vlog: VersionLog, latest: Version) -> int | None:
    """The oldest version a mirror that is on still needs (its newest), or None."""
    versions = [v for v in status(vlog, [n for n in (ICEBERG, DELTA) if n in latest.mirrors]).values() if v is not None]
    return min(versions, default=None)


def trim(vlog: VersionLog, retained: list[Version], listed: dict[str, list[ObjectInfo]]) -> bool:
    """Step 3, run by GC before it deletes (never in a dry run), on the mirror objects it
    ``listed``; True if it wrote something (a checkpoint, a metadata file rewritten)."""
    src, oldest = Source.of(vlog), min(retained, key=lambda m: m.version)
    logged = {i.key for i in listed.get(DELTA_LOG_PREFIX, [])}
    wrote = False
    if DELTA in oldest.mirrors and delta.json_key(oldest.version) in logged:
        if delta.checkpoint_key(oldest.version) not in logged:
            delta.write_checkpoint(src, oldest)
            wrote = True
    present = {int(m.group(1)) for i in listed.get(METADATA_PREFIX, []) if (m := _METADATA.fullmatch(i.key))}
    for version in sorted(present & {m.version for m in retained}):
        if not iceberg.drop_snapshots_before(src, version, oldest.version):
            break  # newer files list only newer snapshots
        wrote = True
    return wrote


def listing(store: ObjectStore) -> dict[str, list[ObjectInfo]]:
    """Every mirror object, by prefix, in the order GC deletes them: versions' metadata files
    first (oldest first), then manifests and lists; the Delta log oldest first. A crash in
    between then never leaves a metadata file whose manifests are gone, nor a hole in a log."""
    metadata = sorted(store.list(METADATA_PREFIX), key=lambda i: (not _METADATA.fullmatch(i.key), _order(i.key)))
    return {METADATA_PREFIX: metadata, DELTA_LOG_PREFIX: list(store.list(DELTA_LOG_PREFIX))}


def _order(key: str) -> tuple[int, str]:
    match = _METADATA.fullmatch(key)
    return (int(match.group(1)) if match else 0, key)


def needed(
    vlog: VersionLog, retained: list[Version], tombstones: Iterable[str], listed: dict[str, list[ObjectInfo]]
) -> set[str]:
    """Keys of mirror objects the ``retained`` versions (the latest first) need; ``listed``:
    every object under ``metadata/`` and ``_delta_log/``; ``tombstones``: the objects GC keeps."""
    latest, kept = retained[0], sorted(m.version for m in retained)
    keys = {k for t in tombstones if t.endswith(".roaring") for k in (puffin_key(t), dv_key(t))}
    keys |= {iceberg.HINT} if ICEBERG in latest.mirrors else set()
    keys |= {delta.LAST_CHECKPOINT} if DELTA in latest.mirrors else set()
    keys |= _iceberg(Source.of(vlog), kept, [i.key for i in listed.get(METADATA_PREFIX, [])])
    return keys | _delta(kept[0], [i.key for i in listed.get(DELTA_LOG_PREFIX, [])])


def _iceberg(src: Source, kept: list[int], listed: list[str]) -> set[str]:
    """Metadata files of retained versions (of a database's table: those from the newest at or
    before its oldest retained version), the manifest list of each one's snapshot, and the
    manifests on them. A metadata file lists the snapshots of up to ``max_snapshots`` versions,
    so reading the newest ones first finds most lists without reading their own files."""
    present = {int(m.group(1)) for key in listed if (m := _METADATA.fullmatch(key))}
    if src.log.every_version_changes:
        versions = sorted(present & set(kept), reverse=True)
    else:  # a database's table: mirrored where it changed, from the state its oldest retained version holds
        start = max((v for v in present if v <= kept[0]), default=kept[0])
        versions = sorted((v for v in present if v >= start), reverse=True)
    lists: dict[int, tuple[str, str]] = {}  # version -> (the location its metadata names, its list)
    for version in versions:
        if version not in lists:
            metadata = json.loads(src.store.get(iceberg.metadata_key(version)))
            for snapshot in metadata["snapshots"]:
                named = (metadata["location"], snapshot["manifest-list"])
                lists.setdefault(int(snapshot["summary"][iceberg.VERSION_PROPERTY]), named)
    keys = {iceberg.metadata_key(v) for v in versions}
    for location, path in {lists[v] for v in versions}:
        key = iceberg.key_in(location, path)
        if key is not None and (entries := _entries(src, key)) is not None:
            keys.add(key)
            keys.update(k for e in entries if (k := iceberg.key_in(location, e["manifest_path"])))
    return keys


def _entries(src: Source, key: str) -> list[dict[str, Any]] | None:
    """A manifest list's entries; None if it is not there (a table copied without it)."""
    try:
        return read_avro(src.store.get(key))
    except NotFound:
        return None


def _delta(oldest: int, listed: list[str]) -> set[str]:
    """The log from the newest checkpoint at or before ``oldest`` (or from ``oldest``)."""
    checkpoints = [int(m.group(1)) for key in listed if (m := _CHECKPOINT.fullmatch(key))]
    start = max((c for c in checkpoints if c <= oldest), default=oldest)
    newest = max((int(m.group(1)) for key in listed if (m := _LOG_ENTRY.match(key))), default=-1)
    if newest < oldest:
        return set()  # a mirror that was turned off and describes only expired versions
    return {key for key in listed if (m := _LOG_ENTRY.match(key)) and int(m.group(1)) >= start}

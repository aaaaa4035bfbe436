"""Which Iceberg manifests describe one of our versions, reusing the previous version's where
nothing changed (docs/mirrors.md, "Iceberg").

Manifests follow our own layout, so a version's cost follows what its commit changed:
- a segment ``segments/<id>.parquet`` gets one data manifest (slot ``<id>-d``), written when
  the segment first appears and listed for as long as the segment is; the root's tail gets
  one (slot ``t-d``), rewritten when the tail's files change;
- deletion vectors of a segment's files are split into buckets of about ``BUCKET_FILES`` files
  by a hash of the path (slots ``<id>-x<bucket>``), so a delete rewrites one small manifest
  per bucket it touches; the tail's are one manifest (slot ``t-x``).
A manifest's name is ``metadata/<slot>-<uuid>.avro``: unique, so concurrent writers never
overwrite each other, and the slot says what it holds. An entry carried into a rewritten
manifest is copied from the one it replaces; an entry of a new deletion vector is made from
its tombstone's Puffin file (puffin.py), written first."""

from __future__ import annotations

import math
import re
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import CommitFailedError, NotFound, PreconditionFailed
from ..format.field_ids import FieldIds
from ..format.keys import METADATA_PREFIX, SEGMENT_PREFIX
from ..format.manifest import DataFile, DeletionVector
from ..log.version import Version, locate
from .columns import bounds_of
from .iceberg_avro import DATA, DELETES, manifest, read_avro
from .iceberg_schema import data_entries, dv_entry
from .puffin import HEADER, names, puffin_file, puffin_key
from .source import Source

BUCKET_FILES = 1024
_SLOT = re.compile(r"(.+)-[0-9a-f]{32}\.avro")
TAIL_DATA, TAIL_DELETES = "t-d", "t-x"


def slot_of(manifest_path: str) -> str:
    match = _SLOT.fullmatch(manifest_path.rsplit("/", 1)[-1])
    return match.group(1) if match else manifest_path


def _segment_id(key: str) -> str:
    return key[len(SEGMENT_PREFIX) :].removesuffix(".parquet")


def _bucket(path: str, files: int) -> int:
    return zlib.crc32(path.encode()) % max(1, math.ceil(files / BUCKET_FILES))


@dataclass
class NewManifest:
    """A manifest written for this version: its slot, content and what the list needs."""

    slot: str
    key: str
    content: int
    length: int
    files: int
    rows: int


@dataclass
class ManifestPlan:
    """The manifests of one version: reused ones (their manifest-list entries) and new ones."""

    reused: dict[str, dict[str, Any]] = field(default_factory=dict)
    new: list[NewManifest] = field(default_factory=list)
    pending: list[tuple[str, bytes]] = field(default_factory=list)
    """The new manifests (key, bytes), left for the caller to write with the manifest list,
    in parallel, before the metadata file that names them."""


class ManifestPlanner:
    """Plans (and writes the new manifests of) version ``cur`` given the previous version's
    manifests ``kept`` (slot -> manifest-list entry; empty for a full build)."""

    def __init__(
        self,
        src: Source,
        cur: Version,
        prev: Version | None,
        kept: dict[str, dict[str, Any]],
        schema_json: dict[str, Any],
        new_tombstones: dict[str, dict[int, str]],
    ) -> None:
        self.src, self.cur, self.prev, self.kept = src, cur, prev, kept
        self.fields: FieldIds = cur.fields
        self.schema_json = schema_json
        self.new_tombstones = new_tombstones
        self.plan = ManifestPlan()
        self._pool: dict[str, dict[str, Any]] | None = None
        self._puffins: dict[str, int] = {}

    # --- the plan -------------------------------------------------------------------------
    def run(self) -> ManifestPlan:
        """Reuse first, then write: the entries carried into new manifests come from the
        previous version's manifests this one drops, known only once reuse is decided."""
        index = self.cur.index
        assert index is not None
        segments = {_segment_id(s.path): s for s in index.segments}
        changed = self._changed_vectors(segments)
        for seg_id, summary in segments.items():
            if f"{seg_id}-d" in self.kept:
                self._keep_segment(seg_id, summary.files, changed.get(seg_id, {}))
        rewrite_tail = self._reuse_tail()
        for seg_id, summary in segments.items():
            if f"{seg_id}-d" not in self.kept:
                self._new_segment(seg_id, summary.path, summary.files)
        self._write_tail(*rewrite_tail)
        return self.plan

    def _changed_vectors(self, segments: dict[str, Any]) -> dict[str, dict[str, DataFile]]:
        """Files of kept segments whose deletion vector changed: segment id -> path -> entry.
        (Such a vector lives in the root's ``deletes`` map until the segment is rewritten.)"""
        if self.prev is None or self.prev.index is None or not self.kept:
            return {}
        before, now = self.prev.index.deletes, self.cur.index.deletes  # type: ignore[union-attr]
        paths = {p for p, ref in now.items() if before.get(p) != ref}
        out: dict[str, dict[str, DataFile]] = {}
        for path, (f, segment) in locate(self.cur, paths).items():
            if segment is not None and _segment_id(segment) in segments:
                out.setdefault(_segment_id(segment), {})[path] = f
        return out

    def _keep_segment(self, seg_id: str, files: int, changed: dict[str, DataFile]) -> None:
        prefix = f"{seg_id}-"
        self.plan.reused.update({slot: e for slot, e in self.kept.items() if slot.startswith(prefix)})
        buckets: dict[int, dict[str, DataFile]] = {}
        for path, f in changed.items():
            buckets.setdefault(_bucket(path, files), {})[path] = f
        for bucket, files_changed in buckets.items():
            slot = f"{seg_id}-x{bucket}"
            old = self.plan.reused.pop(slot, None)
            entries = (
                {}
                if old is None
                else {e["data_file"]["referenced_data_file"]: e for e in read_avro(self.src.store.get(self._key(old)))}
            )
            for path, f in files_changed.items():
                entries[self._target(path)] = self._new_vector(path, f.deletes)  # type: ignore[arg-type]
            self._write(slot, DELETES, list(entries.values()))

    def _new_segment(self, seg_id: str, key: str, count: int) -> None:
        files = self.cur.segment(key).files(None, self.cur.index.deletes)  # type: ignore[union-attr]
        bounds = bounds_of(self.cur, files, key)
        self._write(f"{seg_id}-d", DATA, data_entries(files, bounds, self.src.location, self.fields))
        buckets: dict[int, list[DataFile]] = {}
        for f in files:
            if f.deletes is not None:
                buckets.setdefault(_bucket(f.path, count), []).append(f)
        for bucket, with_deletes in sorted(buckets.items()):
            self._write(f"{seg_id}-x{bucket}", DELETES, [self._vector(f.path, f.deletes) for f in with_deletes])  # type: ignore[arg-type]

    def _reuse_tail(self) -> tuple[bool, bool]:
        """Reuse the tail's manifests if its files (and their vectors) are the previous
        version's; returns which of the two must be written."""
        tail, prev_tail = self.cur.tail, self.prev.tail if self.prev is not None else ()
        same_files = [f.path for f in tail] == [f.path for f in prev_tail]
        same_vectors = same_files and [f.deletes for f in tail] == [f.deletes for f in prev_tail]
        rewrite = []
        for slot, same in ((TAIL_DATA, same_files), (TAIL_DELETES, same_vectors)):
            if same and slot in self.kept:
                self.plan.reused[slot] = self.kept[slot]
            rewrite.append(slot not in self.plan.reused)
        return rewrite[0], rewrite[1]

    def _write_tail(self, data: bool, vectors: bool) -> None:
        tail = self.cur.tail
        if data and tail:
            self._write(TAIL_DATA, DATA, data_entries(tail, bounds_of(self.cur, tail), self.src.location, self.fields))
        if vectors and any(f.deletes is not None for f in tail):
            self._write(TAIL_DELETES, DELETES, [self._vector(f.path, f.deletes) for f in tail if f.deletes])

    # --- entries and objects ----------------------------------------------------------------
    def _target(self, path: str) -> str:
        return f"{self.src.location}/{path}"

    def _key(self, list_entry: dict[str, Any]) -> str:
        return list_entry["manifest_path"][len(self.src.location) + 1 :]

    def _vector(self, path: str, ref: DeletionVector) -> dict[str, Any]:
        """The deletion vector entry of data file ``path``: the previous version's, if it had
        this very vector, else a new one."""
        old = self._old_vectors().get(self._target(path))
        if (
            old is not None
            and old["data_file"]["file_path"] == f"{self.src.location}/{puffin_key(ref.path)}"
            and old["data_file"]["record_count"] == ref.cardinality
        ):
            return old
        return self._new_vector(path, ref)

    def _new_vector(self, path: str, ref: DeletionVector) -> dict[str, Any]:
        offset = self.src.tombstones.blob_offset(ref, HEADER)
        return dv_entry(path, ref, self.src.location, puffin_key(ref.path), self._puffin(ref.path), offset)

    def _old_vectors(self) -> dict[str, dict[str, Any]]:
        """Entries of the previous version's deletion-vector manifests this version drops:
        where the vectors of rewritten segments and of a changed tail come from."""
        if self._pool is None:
            dropped = [e for slot, e in self.kept.items() if "-x" in slot and slot not in self.plan.reused]
            self._pool = {
                entry["data_file"]["referenced_data_file"]: entry
                for old in dropped
                for entry in read_avro(self.src.store.get(self._key(old)))
            }
        return self._pool

    def _puffin(self, tombstone: str) -> int:
        """The size of the tombstone's Puffin file, written first if this version is the first
        to reference it (or a full build)."""
        if tombstone not in self._puffins:
            key = puffin_key(tombstone)
            referenced = self.new_tombstones.get(tombstone)
            if referenced is not None:
                targets = {offset: self._target(path) for offset, path in referenced.items()}
                data = puffin_file(
                    self.src.tombstones.object(tombstone), self.src.tombstones.bitmaps(tombstone), targets
                )
                if self.src.create(key, data) or _replaced_if_elsewhere(self.src, key, data, set(targets.values())):
                    self._puffins[tombstone] = len(data)
            if tombstone not in self._puffins:
                self._puffins[tombstone] = self.src.size_of(key)
        return self._puffins[tombstone]

    def _write(self, slot: str, content: int, entries: list[dict[str, Any]]) -> None:
        data = manifest(sorted(entries, key=_path_of), content, self.schema_json)
        key = f"{METADATA_PREFIX}{slot}-{uuid.uuid4().hex}.avro"
        self.plan.pending.append((key, data))
        self.plan.new.append(
            NewManifest(
                slot, key, content, len(data), len(entries), sum(e["data_file"]["record_count"] for e in entries)
            )
        )


def _replaced_if_elsewhere(src: Source, key: str, data: bytes, targets: set[str]) -> bool:
    """Replace the Puffin file at ``key`` with ``data`` if it does not name every file of
    ``targets``: it came with the table from another location (a move or a copy), and names
    the files there, so pyiceberg would apply none of its vectors here (or it is unreadable).
    Compare-and-swap, re-read after a lost race; False when the file there names them (a
    concurrent writer mirrored the same version)."""
    for _ in range(_REPLACE_ATTEMPTS):
        try:
            found, etag = src.store.get_with_etag(key)
        except NotFound:
            if src.create(key, data):
                return True
            continue
        if targets <= names(found):
            return False
        try:
            src.store.put_if_match(key, data, etag)
            return True
        except PreconditionFailed:
            continue
    raise CommitFailedError(f"{src.location}: {key} kept changing while the mirror replaced it; nothing was mirrored")


_REPLACE_ATTEMPTS = 4


def _path_of(entry: dict[str, Any]) -> str:
    return entry["data_file"]["referenced_data_file"] or entry["data_file"]["file_path"]

"""Building the next version's manifest from the previous one and a commit's changes.

A v1 manifest is rewritten whole. A v2 root is rewritten with only what the commit changes
(design note docs/design/001-format-v2.md):
- added entries go to the root's tail; a tail past ``tail_limit`` becomes a new segment;
- a removed file's segment is rewritten without it; a new deletion vector of a segment file
  goes to the root's ``deletes`` map, and once the map passes ``deletes_limit`` the segments
  holding most of its entries are rewritten with them;
- past ``max_small_segments`` segments below ``segment_target_files``, the smallest adjacent
  pair is merged (each entry is rewritten O(log n) times).
Segments are written create-only under new names before the root that lists them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from ..data.tombstones import DeletionVectors
from ..errors import CommitConflictError
from ..format.field_ids import FieldIds
from ..format.layout import check_layout, renamed_in_layout
from ..format.manifest import DataFile, DeletionVector, Manifest
from ..format.mirrors import merged
from ..format.properties import DELETES_LIMIT, MAX_SMALL_SEGMENTS, SEGMENT_TARGET_FILES, TAIL_LIMIT, Properties
from ..format.replaced import replacements_to_json
from ..format.root import FileIndex, Totals
from ..format.segment import (
    Segment,
    SegmentSummary,
    concat_entries,
    encode_segment,
    entries_of,
    new_segment_key,
    summarize,
    with_deletes,
)
from ..format.stored_schema import StoredSchema
from ..lazy import lazy
from ..log.version import Version, locate
from ..log.version_log import VersionLog
from ..mirrors.types import check_mirrored
from .changes import Changes, replacements_of, rewrites_to_json
from .tombstone_stager import TombstoneStager

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")


class ManifestBuilder:
    """Builds each attempt of one commit, keeping track of the objects it wrote."""

    def __init__(self, log: VersionLog, dvs: DeletionVectors) -> None:
        self._log = log
        self._tombstones = TombstoneStager(log, dvs)
        self._segments: list[str] = []
        self._attempt: list[str] = []

    @property
    def written(self) -> list[str]:
        """Every object staged by the attempts so far (tombstones and segments)."""
        return self._tombstones.written + self._segments

    def build(self, prev: Version, changes: Changes, commit_id: str) -> Manifest:
        self._attempt = []
        prev.properties.check_writable(f"table {self._log.location}")
        before = prev.fields
        if changes.schema is not None:
            prev = prev.with_fields(changes.schema.fields, changes.schema.last_field_id)
        mirrors = prev.mirrors if changes.mirrors is None else merged(prev.mirrors, changes.mirrors)
        if mirrors and (changes.schema is not None or changes.mirrors is not None):
            # Checked on the version this attempt lands on: a concurrent schema change or
            # mirror setting is caught here, after rebasing.
            check_mirrored(prev.fields, mirrors, before if changes.schema is not None else None)
        files, newly_deleted, index = self._files(prev, changes)
        if index is not None and (changes.properties or changes.schema is not None):
            index = replace(index, properties=_properties(index.properties, changes, before, prev.fields))
        metrics = dict(changes.metrics)
        if changes.deletes:
            metrics["rows_deleted"] = metrics.get("rows_deleted", 0) + newly_deleted
        parameters = dict(changes.parameters)
        if changes.rewrites:
            parameters["rewrites"] = rewrites_to_json(changes.rewrites)
        if changes.replaced:
            parameters["replaced"] = replacements_to_json(replacements_of(changes, self._tombstones.positions))
        stored_schema = prev.stored_schema
        if changes.upgrade is not None:  # the v1 columns get their ids (``_upgrade``), kept in the schema
            stored_schema = StoredSchema.of(prev.schema, prev.fields.ids)
        apps = dict(prev.app_transactions)
        if changes.app_transaction:
            apps[changes.app_transaction[0]] = changes.app_transaction[1]
        return Manifest(
            version=prev.version + 1,
            parent_version=prev.version,
            timestamp_ms=max(int(time.time() * 1000), prev.timestamp_ms + 1),  # monotonic for as_of
            commit_id=commit_id,
            operation=changes.operation,
            stored_schema=stored_schema,
            tail=files,
            parameters=parameters,
            metrics=metrics,
            app_transactions=apps,
            format_version=max(prev.format_version, index.properties.format_version) if index else prev.format_version,
            index=index,
            mirrors=mirrors if index is not None else {},
        )

    def lost(self) -> None:
        """The attempt's root can never land (another commit holds its version): the
        segments written for it are referenced by nothing."""
        self._log.store.delete_unreferenced(self._attempt)
        self._segments = [key for key in self._segments if key not in self._attempt]
        self._attempt = []

    # --- v1: the whole list ---------------------------------------------------------------
    def _files(self, prev: Version, changes: Changes) -> tuple[tuple[DataFile, ...], int, FileIndex | None]:
        if changes.upgrade is not None:
            return (), 0, self._upgrade(prev, changes.upgrade)
        if prev.index is not None:
            return self._v2(prev, changes)
        files = {f.path: f for f in prev.tail if f.path not in changes.removed}
        for f in changes.added:
            files[f.path] = f
        refs = self._tombstones.stage({p: files[p] for p, bm in changes.deletes.items() if bm}, changes)
        for path, (ref, _) in refs.items():
            files[path] = files[path].with_deletes(ref)
        return tuple(files.values()), sum(n for _, n in refs.values()), None

    def _upgrade(self, prev: Version, properties: Properties) -> FileIndex:
        """A v1 version's files as a v2 index: segments of ``segment_target_files`` entries."""
        field_ids = prev.fields.ids  # a v1 table's: 1..n by position (``plain``)
        files = prev.tail
        chunk = properties[SEGMENT_TARGET_FILES]
        segments = tuple(
            self._write(entries_of(files[i : i + chunk], prev.schema, field_ids), prev, field_ids)
            for i in range(0, len(files), chunk)
        )
        return FileIndex(len(field_ids), properties, prev.totals, segments, {})

    # --- v2: what changed -----------------------------------------------------------------
    def _v2(self, prev: Version, changes: Changes) -> tuple[tuple[DataFile, ...], int, FileIndex]:
        index = prev.index
        assert index is not None
        props = index.properties
        added = {f.path: f for f in changes.added}
        touched = {p for p, bm in changes.deletes.items() if bm}
        wanted = (changes.removed | touched) - added.keys()
        located = locate(prev, wanted)
        if len(located) != len(wanted):  # rebasing keeps every file a commit changes in the table
            missing = sorted(wanted - located.keys())
            raise CommitConflictError(
                f"version {prev.version} no longer holds files this commit changes: {missing[:5]}"
            )
        refs = self._tombstones.stage({p: added[p] if p in added else located[p][0] for p in touched}, changes)
        new_dv = {path: ref for path, (ref, _) in refs.items()}
        newly_deleted = sum(n for _, n in refs.values())

        tail = [
            f.with_deletes(new_dv[f.path]) if f.path in new_dv else f
            for f in prev.tail
            if f.path not in changes.removed
        ]
        tail += [f.with_deletes(new_dv[f.path]) if f.path in new_dv else f for f in changes.added]
        deletes = {p: ref for p, ref in index.deletes.items() if p not in changes.removed}
        deletes.update({p: ref for p, ref in new_dv.items() if p in located and located[p][1] is not None})

        removed_from: dict[str, set[str]] = {}
        for path in changes.removed:
            segment = located[path][1]
            if segment is not None:
                removed_from.setdefault(segment, set()).add(path)
        if len(deletes) > props[DELETES_LIMIT]:
            removed_from.update({key: removed_from.get(key, set()) for key in self._flush_plan(prev, deletes)})

        rewritten = [
            self._rewrite([s], prev, deletes, removed_from[s.path]) if s.path in removed_from else s
            for s in index.segments
        ]
        segments = [s for s in rewritten if s is not None and s.files and s.path not in changes.dropped_segments]
        if len(tail) > props[TAIL_LIMIT]:
            chunk = props[SEGMENT_TARGET_FILES]
            segments += [
                self._write(entries_of(tail[i : i + chunk], prev.schema, prev.fields.ids), prev, prev.fields.ids)
                for i in range(0, len(tail), chunk)
            ]
            tail = []
        segments = self._merge_small(segments, prev, deletes)

        if changes.dropped_segments:
            return self._without_dropped(prev, segments, tail, deletes, newly_deleted)
        gone = [located[p][0] for p in changes.removed]
        old = index.totals
        totals = Totals(
            old.files - len(gone) + len(changes.added),
            old.rows - sum(f.rows for f in gone) + sum(f.rows for f in changes.added),
            old.deleted - sum(f.deleted_rows for f in gone) + newly_deleted,
            old.bytes - sum(f.size for f in gone) + sum(f.size for f in changes.added),
        )
        return tuple(tail), newly_deleted, replace(index, totals=totals, segments=tuple(segments), deletes=deletes)

    def _without_dropped(
        self,
        prev: Version,
        segments: list[SegmentSummary],
        tail: list[DataFile],
        deletes: dict[str, DeletionVector],
        newly_deleted: int,
    ) -> tuple[tuple[DataFile, ...], int, FileIndex]:
        """The index once segments that are gone are dropped (a repair): the entries they held
        are unknown, so the totals and the ``deletes`` map are counted anew from what is left."""
        index = prev.index
        assert index is not None
        files = [f for s in segments for f in prev.segment(s.path).files(None, deletes)] + tail
        listed = {f.path for f in files}
        deletes = {path: ref for path, ref in deletes.items() if path in listed}
        totals = Totals(
            len(files),
            sum(f.rows for f in files),
            sum(f.deleted_rows for f in files),
            sum(f.size for f in files),
        )
        return tuple(tail), newly_deleted, replace(index, totals=totals, segments=tuple(segments), deletes=deletes)

    def _flush_plan(self, prev: Version, deletes: dict[str, DeletionVector]) -> list[str]:
        """Segments to rewrite so that the map falls to half its limit: those holding the most
        of its entries first, ties in table order (not in the order of the random paths, so the
        same commits lay a table out the same way)."""
        holders: dict[str, int] = {s.path: 0 for s in prev.index.segments} if prev.index else {}
        for _, segment in locate(prev, deletes).values():
            if segment is not None:
                holders[segment] += 1
        keep = prev.properties[DELETES_LIMIT] // 2
        plan, remaining = [], len(deletes)
        for key, count in sorted(((k, n) for k, n in holders.items() if n), key=lambda kv: -kv[1]):
            if remaining <= keep:
                break
            plan.append(key)
            remaining -= count
        return plan

    def _merge_small(
        self, segments: list[SegmentSummary], prev: Version, deletes: dict[str, DeletionVector]
    ) -> list[SegmentSummary]:
        props = prev.properties

        def small(s: SegmentSummary) -> bool:
            return s.files < props[SEGMENT_TARGET_FILES]

        while sum(map(small, segments)) > props[MAX_SMALL_SEGMENTS]:
            i = min(
                (j for j in range(len(segments) - 1) if small(segments[j]) or small(segments[j + 1])),
                key=lambda j: segments[j].files + segments[j + 1].files,
            )
            merged = self._rewrite(segments[i : i + 2], prev, deletes, set())
            segments[i : i + 2] = [merged] if merged is not None else []
        return segments

    def _rewrite(
        self, sources: Sequence[SegmentSummary], prev: Version, deletes: dict[str, DeletionVector], removed: set[str]
    ) -> SegmentSummary | None:
        """One segment of the entries of ``sources`` minus ``removed``, with the deletion
        vectors of ``deletes`` folded in (and taken out of the map)."""
        field_ids = prev.fields.ids
        tables = []
        for summary in sources:
            table = prev.segment(summary.path).table
            if removed:
                table = table.filter(pc.invert(pc.is_in(table.column("path"), pa.array(sorted(removed), pa.string()))))
            folded = {p: deletes.pop(p) for p in table.column("path").to_pylist() if p in deletes}
            tables.append(with_deletes(table, folded))
        table = concat_entries(tables, prev.schema, field_ids)
        if not table.num_rows:
            return None
        return self._write(table, prev, field_ids)

    def _write(self, table: pa.Table, prev: Version, field_ids: Sequence[int]) -> SegmentSummary:
        key = new_segment_key()
        self._log.store.put_new(key, encode_segment(table))
        self._segments.append(key)
        self._attempt.append(key)
        self._log.segments.remember(Segment(key, table, prev.schema, field_ids))
        return summarize(key, table, prev.schema, field_ids)


def _properties(properties: Properties, changes: Changes, before: FieldIds, after: FieldIds) -> Properties:
    """The properties a commit leaves: its updates applied, layout properties following the
    columns it renames, and checked against the schema it leaves (format/layout.py)."""
    names = dict(zip(after.ids, after.schema.names))
    renames = {old: names[fid] for fid, old in zip(before.ids, before.schema.names) if names.get(fid, old) != old}
    updated = properties.updated({**renamed_in_layout(properties, renames), **(changes.properties or {})})
    check_layout(updated, after.schema)
    return updated

"""Rebasing a staged commit onto a version another writer committed first.

Only the difference between the version we built on (``prev``) and the winner matters.
``rebase`` runs one named check per row of the conflict matrix in docs/protocol.md (as
delta-rs's ``conflict_checker.rs`` names each of its checks), in this order; a transaction
that mixes operations takes every check its parts call for, so the strictest rule wins:

- ``check_for_app_transaction_already_committed``, ``check_for_upgrade_already_made``: the
  winner already holds this commit (a replayed streaming batch, another writer's upgrade).
- ``check_for_concurrent_schema_change`` (the *schema change* column): a schema change or a
  serializable commit conflicts; an append's (or compaction's) files carry over when they
  read the same under the new schema.
- ``check_for_required_columns_without_values`` (the *schema change* row): a non-nullable
  column added while the winner left rows in the table.
- ``check_for_rows_read_that_the_winner_changed`` and
  ``check_for_added_files_that_may_match_the_condition`` (the *overwrite, update, upsert*
  row): serializable commits fail if anything they read changed.
- ``check_for_files_removed_by_both`` (*overwrite* and *compaction* rows and columns).
- ``remap_the_winners_deletes_onto_our_rewrites`` (the *compaction* row, *delete* column)
  and ``remap_our_deletes_onto_the_winners_rewrites`` (the *delete* row, *compaction*
  column): deletes follow rows through a compaction, and conflict with a removal that
  carried no rewrite (an overwrite).
Appends and deletes rebase onto everything else: the new files were not read, and the
bitmaps of files both touched are unioned when the manifest is built (builder.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from pyroaring import BitMap

from ..data.placement import placement
from ..data.tombstones import DeletionVectors
from ..errors import CommitConflictError
from ..format.column_types import widens
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..format.manifest import Manifest
from ..log.version import Version, VersionDiff, diff, locate
from ..storage import FileIO
from .changes import CURVE, Changes, Rewrite, SchemaChange, rewrites_from_json
from .loop import AlreadyCommitted


def rebase(changes: Changes, prev: Version, winner: Version, dvs: DeletionVectors, io: FileIO) -> Changes:
    """Make ``changes`` (built on ``prev``) apply on top of ``winner`` (prev's successor),
    or raise ``CommitConflictError``. Mutates and returns ``changes``. ``io`` reads the
    sources of a clustering rewrite that a delete is remapped through."""
    check_for_app_transaction_already_committed(changes, winner)
    check_for_upgrade_already_made(changes, winner)
    if prev.fields != winner.fields:
        check_for_concurrent_schema_change(changes, prev, winner)
    if changes.schema is not None and winner.live_rows:
        check_for_required_columns_without_values(changes.schema, prev, winner)
    changed = diff(prev, winner)
    if changes.serializable:
        check_for_rows_read_that_the_winner_changed(changes, prev, winner, changed, dvs)
        check_for_added_files_that_may_match_the_condition(changes, winner, changed)
    check_for_files_removed_by_both(changes, winner, changed)
    places = Placements(prev, winner, dvs, io)
    remap_the_winners_deletes_onto_our_rewrites(changes, winner, changed, dvs, places)
    remap_our_deletes_onto_the_winners_rewrites(changes, winner, changed, dvs, places)
    return changes


def check_for_app_transaction_already_committed(changes: Changes, manifest: Manifest) -> None:
    """A streaming batch that ``manifest`` (or an earlier version) already committed."""
    if changes.app_transaction:
        app_id, batch = changes.app_transaction
        if manifest.app_transactions.get(app_id, -1) >= batch:
            raise AlreadyCommitted(manifest)


def check_for_upgrade_already_made(changes: Changes, winner: Manifest) -> None:
    """Another upgrade won: there is nothing left to do."""
    if changes.upgrade is not None and winner.index is not None:
        raise AlreadyCommitted(winner)


def check_for_concurrent_schema_change(changes: Changes, prev: Manifest, winner: Manifest) -> None:
    """The winner changed the schema: only files written under the old one that read the
    same under the new one carry over (``carry_files``)."""
    who = f"version {winner.version} ({winner.operation}, commit {winner.commit_id})"
    if changes.schema is not None:
        raise CommitConflictError(
            f"{who} changed the schema concurrently with this schema change; retry it against the new schema"
        )
    if changes.serializable:
        raise CommitConflictError(f"{who} changed the schema this commit read and wrote with; retry it")
    changes.added = carry_files(changes.added, prev.fields, winner.fields, who)


def carry_files(files: Sequence[DataFile], old: FieldIds, new: FieldIds, what: str) -> list[DataFile]:
    """Files written under ``old``, for a commit that now lands on ``new``: their stats keyed
    by the new names. ``CommitConflictError`` (``what`` says who changed the schema) when
    the new schema would lose or misread what they hold."""
    new_fields = dict(zip(new.ids, new.schema))
    problems = []
    for fid, f in zip(old.ids, old.schema):
        now = new_fields.get(fid)
        if now is None:
            problems.append(f"dropped column {f.name!r}")
        elif not widens(f.type, now.type):
            problems.append(f"changed column {f.name!r} from {f.type} to {now.type}")
        elif f.nullable and not now.nullable:
            problems.append(f"made column {f.name!r} non-nullable")
    problems += [
        f"added non-nullable column {f.name!r}"
        for fid, f in new_fields.items()
        if fid not in old.ids and not f.nullable
    ]
    if problems and files:
        raise CommitConflictError(
            f"{what} changed the schema this commit's files were written with: "
            f"{'; '.join(problems)}; retry the write against the new schema"
        )
    names = {f.name: new_fields[fid].name for fid, f in zip(old.ids, old.schema) if fid in new_fields}
    return [
        replace(
            f,
            stats={names[n]: s for n, s in f.stats.items() if n in names},
            encoded_stats=None
            if f.encoded_stats is None
            else {names[n]: s for n, s in f.encoded_stats.items() if n in names},
        )
        for f in files
    ]


def check_for_required_columns_without_values(change: SchemaChange, prev: Manifest, winner: Manifest) -> None:
    """A non-nullable column is only added to a table without rows (there is no value to give
    the rows it has): the winner now has rows, which would read null in it."""
    required = [
        f.name
        for fid, f in zip(change.fields.ids, change.fields.schema)
        if fid not in prev.fields.ids and not f.nullable
    ]
    if required:
        raise CommitConflictError(
            f"version {winner.version} ({winner.operation}, commit {winner.commit_id}) "
            f"left the table with {winner.live_rows} rows, which would have no value for the "
            f"non-nullable columns this commit adds: {required}; add them nullable, or retry "
            "on an empty table"
        )


def check_for_rows_read_that_the_winner_changed(
    changes: Changes, prev: Version, winner: Manifest, changed: VersionDiff, dvs: DeletionVectors
) -> None:
    """A serializable commit (overwrite, update, upsert) read rows that the winner deleted, or
    files the winner removed."""
    read = (changes.read_files | changes.removed | set(changes.deletes)) - changes.added_paths()
    suspects = read & changed.touched
    before = {p: f for p, (f, _) in locate(prev, suspects).items()} if suspects else {}
    now = changed.after(suspects) if suspects else {}
    hit = {
        p for p in suspects if p not in before or p not in now or _deleted_rows_read(changes, p, before[p], now[p], dvs)
    }
    _fail_if(read & changed.gone | hit, winner, "changed rows this commit read")


def _deleted_rows_read(changes: Changes, path: str, before: DataFile, after: DataFile, dvs: DeletionVectors) -> bool:
    """Whether the winner's new deletes on ``path`` hit rows this commit read. The rows a
    serializable commit read from a file are the ones it deletes (overwrite, update,
    upsert) and the ones it kept because they matched (``kept_rows``: an upsert ignoring
    matches would have inserted a row deleted first): a concurrent delete of other rows of
    the file rebases. A file removed whole was read whole."""
    if path in changes.removed or (path not in changes.deletes and path not in changes.kept_rows):
        return True
    read = changes.deletes.get(path, BitMap()) | changes.kept_rows.get(path, BitMap())
    return bool((dvs.of(after) - dvs.of(before)) & read)


def check_for_added_files_that_may_match_the_condition(
    changes: Changes, winner: Manifest, changed: VersionDiff
) -> None:
    """A serializable commit's condition (None: every row) may match rows the winner added."""
    matching = [
        f.path for f in changed.new_files if changes.predicate is None or changes.predicate.may_match(f.stats.get)
    ]
    _fail_if(set(matching), winner, "added rows that may match this commit's condition")


def check_for_files_removed_by_both(changes: Changes, winner: Manifest, changed: VersionDiff) -> None:
    """An overwrite or compaction removing files the winner removed already."""
    _fail_if(changes.removed & changed.gone, winner, "removed files this commit replaces")


def remap_the_winners_deletes_onto_our_rewrites(
    changes: Changes, winner: Manifest, changed: VersionDiff, dvs: DeletionVectors, places: Placements
) -> None:
    """The winner deleted rows of files this commit removes: a compaction carries them onto
    its outputs; a removal without a rewrite (an overwrite) would lose them, a conflict."""
    ours = {src.path: (rw, i) for rw in changes.rewrites for i, src in enumerate(rw.sources)}
    after = changed.after(changes.removed & changed.touched)
    for path in sorted(changes.removed & changed.touched):
        if path not in ours:
            _fail_if({path}, winner, "deleted rows from files this commit removes")
        rw, i = ours[path]
        source = rw.sources[i]
        snapshot = dvs.load(source.deletes) if source.deletes else BitMap()
        for output, positions in remap(dvs.of(after[path]) - snapshot, rw, i, dvs, places.of(rw)).items():
            changes.delete_rows(output, positions)


def remap_our_deletes_onto_the_winners_rewrites(
    changes: Changes, winner: Manifest, changed: VersionDiff, dvs: DeletionVectors, places: Placements
) -> None:
    """This commit deletes from files the winner removed: onto a compaction's outputs they go;
    a removal without a rewrite (an overwrite) is a conflict."""
    theirs = {
        src.path: (rw, i)
        for rw in rewrites_from_json(winner.parameters.get("rewrites", []))
        for i, src in enumerate(rw.sources)
    }
    for path in sorted(set(changes.deletes) & changed.gone):
        if path not in theirs:
            _fail_if({path}, winner, "removed files this commit deletes from")
        rw, i = theirs[path]
        for output, positions in remap(changes.deletes.pop(path), rw, i, dvs, places.of(rw)).items():
            changes.delete_rows(output, positions)


def remap(
    positions: BitMap, rewrite: Rewrite, index: int, dvs: DeletionVectors, places: np.ndarray | None = None
) -> dict[str, BitMap]:
    """Positions in source ``index`` of ``rewrite`` -> positions in its outputs, per output.
    A row's place in the sources' concatenated live rows is the live rows of the sources
    before it plus its live rows before it in its source; a clustering rewrite moved it to
    ``places`` of that (``Placements``); the outputs cut that sequence in order. Rows the
    rewrite had already dropped are gone and map to nothing."""
    source = rewrite.sources[index]
    dropped = dvs.load(source.deletes) if source.deletes else BitMap()
    kept = np.asarray((positions - dropped).to_array(), dtype=np.int64)
    dropped_sorted = np.asarray(dropped.to_array(), dtype=np.int64)
    offset = sum(src.live_rows for src in rewrite.sources[:index])
    placed = offset + kept - np.searchsorted(dropped_sorted, kept)
    if places is not None:
        placed = places[placed]
    ends = np.cumsum([out.rows for out in rewrite.outputs], dtype=np.int64)
    which = np.searchsorted(ends, placed, side="right")  # the output whose range holds each row
    return {
        rewrite.outputs[k].path: BitMap((placed[which == k] - (ends[k] - rewrite.outputs[k].rows)).tolist())
        for k in np.unique(which).tolist()
    }


class Placements:
    """Where each clustering rewrite met while rebasing onto ``winner`` put its sources' rows
    (data/placement.py), computed once per rewrite and only when a delete needs it. The
    sources of ours and of the winner's are files of ``prev``."""

    def __init__(self, prev: Version, winner: Manifest, dvs: DeletionVectors, io: FileIO) -> None:
        self._prev, self._winner, self._dvs, self._io = prev, winner, dvs, io
        self._found: dict[tuple[str, ...], np.ndarray] = {}

    def of(self, rewrite: Rewrite) -> np.ndarray | None:
        if not rewrite.order:
            return None
        if rewrite.curve != CURVE:
            raise CommitConflictError(
                f"version {self._winner.version} ({self._winner.operation}, commit {self._winner.commit_id}) "
                f"rewrote files in an order ({rewrite.curve!r}) this release of manifest_table cannot follow "
                "a delete through: retry the commit"
            )
        key = tuple(s.path for s in rewrite.sources)  # a file is the source of one rewrite
        if key not in self._found:
            located = locate(self._prev, set(key))
            sources = [replace(located[s.path][0], deletes=s.deletes) for s in rewrite.sources]
            self._found[key] = placement(
                self._io, self._prev.version, sources, self._prev.fields, rewrite.order, self._dvs
            )
        return self._found[key]


def _fail_if(paths: set[str], winner: Manifest, what: str) -> None:
    if paths:
        shown = ", ".join(sorted(paths)[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        raise CommitConflictError(
            f"version {winner.version} ({winner.operation}, commit {winner.commit_id}) {what}: {shown}"
        )

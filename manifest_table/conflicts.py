"""Rebasing a staged commit onto a version another writer committed first.

Only the difference between the version we built on (``prev``) and the winner matters.
Appends always rebase. Deletes rebase onto anything that keeps their files (bitmaps are
unioned when the manifest is built) and are remapped through compactions. Serializable
commits (overwrite, update, upsert) fail if anything they read changed: rows they read
deleted, or rows their condition may match added. The full matrix is in
docs/protocol.md."""

from __future__ import annotations

import numpy as np
from pyroaring import BitMap

from .changes import Changes, Rewrite, rewrites_from_json
from .errors import CommitConflictError
from .format.manifest import DataFile, Manifest
from .listing import diff, locate
from .schema_evolution import SchemaChange, carry_files
from .tombstones import DeletionVectors


class AlreadyCommitted(Exception):
    """The winner already holds this commit's application transaction (a replayed batch), or
    the format upgrade this commit makes."""

    def __init__(self, manifest: Manifest) -> None:
        super().__init__(manifest.version)
        self.manifest = manifest


def check_app_transaction(changes: Changes, manifest: Manifest) -> None:
    if changes.app_transaction:
        app_id, batch = changes.app_transaction
        if manifest.app_transactions.get(app_id, -1) >= batch:
            raise AlreadyCommitted(manifest)


def rebase(changes: Changes, prev: Manifest, winner: Manifest, dvs: DeletionVectors) -> Changes:
    """Make ``changes`` (built on ``prev``) apply on top of ``winner`` (prev's successor),
    or raise ``CommitConflictError``. Mutates and returns ``changes``."""
    check_app_transaction(changes, winner)
    if changes.upgrade is not None and winner.index is not None:
        raise AlreadyCommitted(winner)  # another upgrade won: there is nothing left to do
    if prev.fields != winner.fields:
        _schema_changed(changes, prev, winner)
    if changes.schema is not None and winner.live_rows:
        _fail_if_required_added(changes.schema, prev, winner)
    changed = diff(prev, winner)
    gone, touched, new_files = changed.gone, changed.touched, changed.new_files
    own = changes.added_paths()

    if changes.serializable:
        read = (changes.read_files | changes.removed | set(changes.deletes)) - own
        suspects = read & touched
        before = {p: f for p, (f, _) in locate(prev, suspects).items()} if suspects else {}
        now = changed.after(suspects) if suspects else {}
        hit = {p for p in suspects if p not in before or p not in now
               or _deleted_rows_read(changes, p, before[p], now[p], dvs)}
        _fail_if(read & gone | hit, winner, "changed rows this commit read")
        matching = [f.path for f in new_files
                    if changes.predicate is None or changes.predicate.may_match(f.stats.get)]
        _fail_if(set(matching), winner, "added rows that may match this commit's condition")

    _fail_if(changes.removed & gone, winner, "removed files this commit replaces")
    ours = {src.path: (rw, i) for rw in changes.rewrites for i, src in enumerate(rw.sources)}
    after = changed.after(changes.removed & touched)
    for path in sorted(changes.removed & touched):  # a delete landed on a file we are compacting
        if path not in ours:  # removed without a rewrite to carry the delete over
            _fail_if({path}, winner, "deleted rows from files this commit removes")
        rw, i = ours[path]
        snapshot = dvs.load(rw.sources[i].deletes) if rw.sources[i].deletes else BitMap()
        for output, positions in remap(dvs.of(after[path]) - snapshot, rw, i, dvs).items():
            changes.delete_rows(output, positions)

    theirs = {src.path: (rw, i) for rw in rewrites_from_json(winner.parameters.get("rewrites", []))
              for i, src in enumerate(rw.sources)}
    for path in sorted(set(changes.deletes) & gone):
        if path not in theirs:
            _fail_if({path}, winner, "removed files this commit deletes from")
        rw, i = theirs[path]
        for output, positions in remap(changes.deletes.pop(path), rw, i, dvs).items():
            changes.delete_rows(output, positions)
    return changes


def _deleted_rows_read(changes: Changes, path: str, before: DataFile, after: DataFile,
                       dvs: DeletionVectors) -> bool:
    """Whether the winner's new deletes on ``path`` hit rows this commit read. The rows a
    serializable commit read from a file are the ones it deletes (overwrite, update,
    upsert): a concurrent delete of other rows of the file rebases. A file removed whole
    was read whole."""
    if path in changes.removed or path not in changes.deletes:
        return True
    return bool((dvs.of(after) - dvs.of(before)) & changes.deletes[path])


def _schema_changed(changes: Changes, prev: Manifest, winner: Manifest) -> None:
    """The winner changed the schema: only files written under the old one that read the
    same under the new one carry over (schema_evolution.carry_files)."""
    who = f"version {winner.version} ({winner.operation}, commit {winner.commit_id})"
    if changes.schema is not None:
        raise CommitConflictError(f"{who} changed the schema concurrently with this schema change; "
                                  "retry it against the new schema")
    if changes.serializable:
        raise CommitConflictError(f"{who} changed the schema this commit read and wrote with; retry it")
    changes.added = carry_files(changes.added, prev.fields, winner.fields, who)


def _fail_if_required_added(change: SchemaChange, prev: Manifest, winner: Manifest) -> None:
    """A non-nullable column is only added to a table without rows (there is no value to give
    the rows it has): the winner now has rows, which would read null in it."""
    required = [f.name for fid, f in zip(change.fields.ids, change.fields.schema)
                if fid not in prev.fields.ids and not f.nullable]
    if required:
        raise CommitConflictError(f"version {winner.version} ({winner.operation}, commit {winner.commit_id}) "
                                  f"left the table with {winner.live_rows} rows, which would have no value for the "
                                  f"non-nullable columns this commit adds: {required}; add them nullable, or retry "
                                  "on an empty table")


def remap(positions: BitMap, rewrite: Rewrite, index: int, dvs: DeletionVectors) -> dict[str, BitMap]:
    """Positions in source ``index`` of ``rewrite`` -> positions in its outputs, per output.
    A row's place in the sources' concatenated live rows is the live rows of the sources
    before it plus its live rows before it in its source; the outputs cut that sequence in
    order. Rows the rewrite had already dropped are gone and map to nothing."""
    source = rewrite.sources[index]
    dropped = dvs.load(source.deletes) if source.deletes else BitMap()
    kept = np.asarray((positions - dropped).to_array(), dtype=np.int64)
    dropped_sorted = np.asarray(dropped.to_array(), dtype=np.int64)
    offset = sum(src.live_rows for src in rewrite.sources[:index])
    placed = offset + kept - np.searchsorted(dropped_sorted, kept)
    ends = np.cumsum([out.rows for out in rewrite.outputs], dtype=np.int64)
    which = np.searchsorted(ends, placed, side="right")  # the output whose range holds each row
    return {rewrite.outputs[k].path: BitMap((placed[which == k] - (ends[k] - rewrite.outputs[k].rows)).tolist())
            for k in np.unique(which).tolist()}


def _fail_if(paths: set[str], winner: Manifest, what: str) -> None:
    if paths:
        shown = ", ".join(sorted(paths)[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        raise CommitConflictError(
            f"version {winner.version} ({winner.operation}, commit {winner.commit_id}) {what}: {shown}")

"""The staging protocol every operation is built on (package-public): one snapshot, the
``Changes`` staged on it, and the few steps an operation is made of.

- ``scan``: read the snapshot with the changes staged so far applied;
- ``stage_files``: add data files (``append.py`` writes them);
- ``stage_deletes``: delete row positions of the snapshot's or the staged files;
- ``stage_replacement``: which staged files hold new versions of which deleted rows;
- ``remove_all``: drop every row (an overwrite without a condition);
- ``serialize_against``: what was read, so that a concurrent change to it is a conflict;
- ``record``: the operation's name, metrics and parameters, as ``history()`` shows them.
A ``Transaction`` holds one and commits its changes once; ``Staging`` itself commits
nothing. Composite operations (overwrite, update, upsert, Spark's upsert) use only these
steps, never the transaction's members."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from pyroaring import BitMap

from ..clock import Stamp
from ..commit.changes import Changes, StagedReplacement
from ..data.file_sets import StagedFiles, VersionFiles
from ..data.scan import Scan, Snapshot
from ..data.tombstones import DeletionVectors
from ..expressions import Expr
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..handle import TableHandle
from ..log.version import locate


class Staging:
    """Changes staged on the latest version of ``handle``'s table, read when this is made."""

    def __init__(self, handle: TableHandle) -> None:
        self.handle = handle
        self.started = Stamp.now()
        """When the snapshot was read (or earlier: ``Transaction.add_files`` moves it back to
        when the files it adds were written): the commit's deadline counts from it."""
        self.base, self.pointer = handle.log.latest()
        self.dvs = DeletionVectors(handle.store)
        self.changes = Changes(operation="")
        self.kinds: list[str] = []
        """The operations staged so far, in order: they name the commit (``operation``)."""

    # --- reading ------------------------------------------------------------------------
    def fields(self) -> FieldIds:
        """The schema the staged changes write with: the base's, or the one they change to."""
        change = self.changes.schema
        return change.fields if change is not None else self.base.fields

    def snapshot(self) -> Snapshot:
        changes = self.changes
        files = StagedFiles(VersionFiles(self.base), frozenset(changes.removed), tuple(changes.added))
        staged = {path: BitMap(bitmap) for path, bitmap in changes.deletes.items() if bitmap}
        fields = self.fields()
        missing = functools.partial(self.handle.log.object_missing, self.base.version)
        return Snapshot(self.base.version, fields.schema, files, self.dvs.of, staged, fields=fields, missing=missing)

    def scan(self, columns: Sequence[str] | None = None, where: Expr | None = None) -> Scan:
        """A scan of the snapshot with the staged changes applied."""
        return Scan(self.snapshot(), self.handle.io, columns, where)

    def files_named(self, paths: Iterable[str]) -> dict[str, DataFile]:
        """The files of the staged view among ``paths``."""
        wanted = set(paths)
        found = {f.path: f for f in self.changes.added if f.path in wanted}
        base = locate(self.base, wanted - found.keys() - self.changes.removed)
        found.update({path: f for path, (f, _) in base.items()})
        return found

    # --- staging ------------------------------------------------------------------------
    def stage_files(self, files: Sequence[DataFile]) -> None:
        self.changes.added.extend(files)
        rows = sum(f.rows for f in files)
        if rows:
            self.record("append", rows_added=rows, files_added=len(files))

    def stage_deletes(self, positions: Iterable[tuple[str, BitMap]]) -> int:
        """Record deleted positions per file (a file deleted from was read: the conflict check
        counts ``Changes.deletes`` among the files read)."""
        count = 0
        for path, bitmap in positions:
            self.changes.delete_rows(path, bitmap)
            count += len(bitmap)
        if count:
            self.record("delete")
        return count

    def stage_kept(self, positions: Iterable[tuple[str, BitMap]]) -> None:
        """Record rows read that decided the commit without being deleted (``Changes.kept_rows``)."""
        added = self.changes.added_paths()
        for path, bitmap in positions:
            if path not in added and bitmap:
                self.changes.kept_rows.setdefault(path, BitMap()).update(bitmap)
                self.changes.read_files.add(path)

    def stage_replacement(self, sources: Sequence[tuple[str, BitMap]], files: Sequence[DataFile]) -> None:
        """Record that the first rows of ``files`` (staged, in order) are new versions of the
        rows at ``sources`` (file, positions), in order: what pairs an update's old and new
        rows in the change feed (``StagedReplacement``)."""
        remaining = sum(len(positions) for _, positions in sources)
        outputs = []
        for f in files:
            if remaining <= 0:
                break
            outputs.append((f.path, min(f.rows, remaining)))
            remaining -= outputs[-1][1]
        if remaining:
            raise ValueError(f"{remaining} replaced rows have no new version in the files staged")
        kept = tuple((path, positions) for path, positions in sources if positions)
        if kept:
            self.changes.replaced.append(StagedReplacement(kept, tuple(outputs)))

    def remove_all(self) -> int:
        """Drop every row: the snapshot's files go whole, and the files staged so far are no
        longer part of the commit (the caller removes them once it succeeds). Returns the
        rows that were live."""
        changes, snapshot = self.changes, self.snapshot()
        files = snapshot.files
        removed_rows = sum(snapshot.live_rows(f) for f in files)
        changes.metrics["rows_deleted"] = changes.metrics.get("rows_deleted", 0) + removed_rows
        staged = changes.added_paths()
        changes.removed |= {f.path for f in files if f.path not in staged}
        changes.added, changes.deletes, changes.replaced = [], {}, []
        return removed_rows

    def serialize_against(self, predicate: Expr | None) -> None:
        """Rows matching ``predicate`` (bound; None: every row) were read to decide this commit
        (``Changes.serialize_against``)."""
        self.changes.serialize_against(predicate)

    def record(self, kind: str, entry: tuple[str, Any] | None = None, **metrics: int) -> None:
        """Note that an operation of ``kind`` was staged, add ``metrics`` to the commit's, and
        append ``entry`` (name, value) to its ``parameters[name]`` list."""
        self.kinds.append(kind)
        for name, value in metrics.items():
            self.changes.metrics[name] = self.changes.metrics.get(name, 0) + value
        if entry is not None:
            self.changes.parameters.setdefault(entry[0], []).append(entry[1])

    def finished(self) -> Changes | None:
        """The staged changes as a commit takes them, named by the operations staged, or None
        when nothing is staged (a table's transaction and a database's alike)."""
        if self.changes.is_empty():
            return None
        self.changes.operation = self.operation()
        return self.changes

    def operation(self) -> str:
        """An operation made of others (an overwrite deletes and appends) names the commit."""
        kinds = set(self.kinds)
        composite = kinds & {"overwrite", "update", "upsert"}
        if composite:
            return composite.pop() if len(composite) == 1 else "transaction"
        if len(kinds) > 1:
            kinds.discard("update_schema")  # an append that adds columns stays an append
        return kinds.pop() if len(kinds) == 1 else "transaction"

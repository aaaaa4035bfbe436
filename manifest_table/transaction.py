"""A multi-operation commit: appends, deletes and overwrites staged against one snapshot,
visible to the transaction's own scans, and committed once (or not at all)."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from pyroaring import BitMap

from .changes import Changes
from .commit import CommitInfo, commit
from .errors import InvalidFilterError, ManifestTableError
from .expressions import Expr, Or, to_expr
from .format.keys import DATA_PREFIX, caller_key, is_writer_key
from .format.manifest import DataFile, check_new_file
from .ingest import batches_of
from .scan import Scan, Snapshot
from .tombstones import DeletionVectors
from .write import write_data_files

if TYPE_CHECKING:
    from .table import Table


class Transaction:
    """Use as ``with table.transaction() as tx: ...``: commits on a clean exit, and an
    exception inside the block commits nothing (staged files are removed)."""

    def __init__(self, table: "Table") -> None:
        self._table = table
        self._started = time.monotonic()
        self._base, self._pointer = table._log.latest()
        self._dvs = DeletionVectors(table.store)
        self._changes = Changes(operation="")
        self._kinds: list[str] = []
        self._closed = False

    @property
    def version(self) -> int:
        """The version this transaction reads and builds on."""
        return self._base.version

    # --- operations ---------------------------------------------------------------------
    def append(self, data: Any) -> int:
        """Stage ``data`` (see ``Table.append``); returns the number of rows staged."""
        self._check_open()
        files = write_data_files(self._table.io, batches_of(data, self._base.schema),
                                 self._base.schema, self._table.write_options)
        self.add_files(files)
        return sum(f.rows for f in files)

    def delete(self, where: str | Expr) -> int:
        """Stage deleting the live rows matching ``where``; returns how many."""
        self._check_open()
        expr = to_expr(where)
        if expr is None:
            raise InvalidFilterError("delete needs a condition; use overwrite() to replace every row")
        scan = Scan(self._snapshot(), self._table.io, columns=[], where=expr)
        return self._stage_deletes((file.path, positions) for file, positions in scan.matching_positions())

    def overwrite(self, data: Any, where: str | Expr | None = None) -> None:
        """Stage replacing every row (or the rows matching ``where``) with ``data``."""
        self._check_open()
        expr = to_expr(where)
        changes = self._changes
        if expr is None:
            live = self._snapshot().files
            # Staged deletes only ever hold live rows, so no bitmap needs to be read here.
            removed_rows = sum(f.live_rows - len(changes.deletes.get(f.path, ())) for f in live)
            changes.metrics["rows_deleted"] = changes.metrics.get("rows_deleted", 0) + removed_rows
            base_paths = {f.path for f in self._base.files}
            changes.removed |= {f.path for f in live if f.path in base_paths}
            self._table.store.delete_unreferenced(f.path for f in changes.added)
            changes.added, changes.deletes = [], {}
            changes.predicate = None
        else:
            expr.bind(self._base.schema)
            self.delete(expr)
            if not (changes.serializable and changes.predicate is None):
                changes.predicate = expr if changes.predicate is None else Or(changes.predicate, expr)
        changes.serializable = True
        changes.parameters.setdefault("predicates", []).append(None if expr is None else str(expr))
        self._record("overwrite")
        self.append(data)

    def add_files(self, files: Sequence[DataFile]) -> None:
        """Stage data files already written into the table's ``data/`` by someone else (Spark
        tasks). Only files named here are committed: a retried task's extra files are not."""
        self._check_open()
        for f in files:
            check_new_file(f)
        known = {f.path for f in self._base.files} | self._changes.added_paths()
        clash = [f.path for f in files if f.path in known]
        if clash:
            raise ManifestTableError(f"files are already part of the table: {clash[:5]}")
        self._changes.added.extend(files)
        rows = sum(f.rows for f in files)
        if rows:
            self._record("append", rows_added=rows, files_added=len(files))

    def delete_positions(self, positions: dict[str, BitMap]) -> int:
        """Stage deleting rows by position, per data file of this transaction's snapshot (the
        positions a distributed delete computed). Returns how many positions were given."""
        self._check_open()
        for path in positions:
            caller_key(path, DATA_PREFIX, "delete_positions")
        live = {f.path for f in self._snapshot().files}
        unknown = sorted(set(positions) - live)
        if unknown:
            raise ManifestTableError(f"not data files of version {self.version}: {unknown[:5]}")
        return self._stage_deletes(positions.items())

    def set_app_transaction(self, app_id: str, batch_id: int) -> None:
        """Mark this commit as batch ``batch_id`` of application ``app_id`` (a streaming query):
        if that batch (or a later one) is already committed, committing does nothing."""
        self._check_open()
        self._changes.app_transaction = (app_id, batch_id)
        self._changes.parameters["app_transaction"] = {"app_id": app_id, "batch_id": batch_id}

    def scan(self, columns: Sequence[str] | None = None, where: str | Expr | None = None) -> Scan:
        """A scan of the snapshot with this transaction's own changes applied."""
        self._check_open()
        return Scan(self._snapshot(), self._table.io, columns, to_expr(where))

    # --- commit -------------------------------------------------------------------------
    def commit(self) -> CommitInfo:
        self._check_open()
        self._closed = True
        if self._changes.is_empty():
            return CommitInfo(self._base.version, self._operation(), self._base.timestamp, None,
                              {"rows_added": 0, "rows_deleted": 0}, committed=False)
        self._changes.operation = self._operation()
        return commit(self._table._log, self._base, self._pointer, self._changes,
                      self._table.commit_options, self._started, self._dvs)

    def abort(self) -> None:
        """Drop everything staged; nothing was committed. Only objects of the shapes our
        writers create are removed: a file someone else named in ``add_files`` is left to them."""
        if not self._closed:
            self._closed = True
            self._table.store.delete_unreferenced(f.path for f in self._changes.added if is_writer_key(f.path))

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.commit()

    # --- helpers ------------------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        changes = self._changes
        files: list[DataFile] = [f for f in self._base.files if f.path not in changes.removed]
        files.extend(changes.added)

        def deleted(file: DataFile) -> BitMap:
            pending = changes.deletes.get(file.path)
            existing = self._dvs.of(file)
            return existing | pending if pending else existing
        return Snapshot(self._base.version, self._base.schema, files, deleted)

    def _stage_deletes(self, positions: Iterable[tuple[str, BitMap]]) -> int:
        """Record deleted positions per file; the snapshot files they came from were read."""
        added = self._changes.added_paths()
        count = 0
        for path, bitmap in positions:
            self._changes.delete_rows(path, bitmap)
            if path not in added:
                self._changes.read_files.add(path)
            count += len(bitmap)
        if count:
            self._record("delete")
        return count

    def _record(self, kind: str, **metrics: int) -> None:
        self._kinds.append(kind)
        for name, value in metrics.items():
            self._changes.metrics[name] = self._changes.metrics.get(name, 0) + value

    def _operation(self) -> str:
        kinds = set(self._kinds)
        if "overwrite" in kinds:
            return "overwrite"
        return kinds.pop() if len(kinds) == 1 else "transaction"

    def _check_open(self) -> None:
        if self._closed:
            raise ManifestTableError("this transaction has already been committed or aborted")

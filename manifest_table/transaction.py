"""A multi-operation commit: appends, deletes and overwrites staged against one snapshot,
visible to the transaction's own scans, and committed once (or not at all). Each operation
lives in its own module under ``operations/``, built on the staging protocol
(operations/staging.py); this module makes them all or nothing and commits."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from pyroaring import BitMap

from .arguments import check_int, check_string
from .commit import CommitInfo, commit
from .data.scan import Scan
from .errors import ManifestTableError
from .expressions import Expr, to_expr
from .format.entries import DataFile
from .format.keys import is_writer_key
from .handle import TableHandle
from .operations import append, delete, overwrite, update, upsert
from .operations.staging import Staging
from .operations.upsert import UpsertCounts

T = TypeVar("T")


def _all_or_nothing(operation: Callable[..., T]) -> Callable[..., T]:
    """Run a transaction operation all or nothing. If it raises, the staged changes go back
    to what they were before it and the files it staged are removed; if it succeeds, the
    staged files it dropped (an overwrite of every row drops earlier appends) are removed.
    One snapshot of the (small) staged state per call, instead of a rule per operation that
    would have to know what each step staged."""

    @functools.wraps(operation)
    def run(tx: Transaction, *args: Any, **kwargs: Any) -> T:
        tx._check_open()
        staging = tx.staging
        before, kinds = staging.changes.copy(), list(staging.kinds)
        try:
            result = operation(tx, *args, **kwargs)
        except BaseException:
            written = staging.changes.added_paths() - before.added_paths()
            staging.changes, staging.kinds = before, kinds
            staging.handle.store.delete_unreferenced(sorted(written))
            raise
        staging.handle.store.delete_unreferenced(sorted(before.added_paths() - staging.changes.added_paths()))
        return result

    return run


class CommitsOnExit:
    """``with x: ...`` commits ``x`` on a clean exit and aborts it on an exception; either
    happens once (a table's ``Transaction``, a database's)."""

    _closed = False

    def commit(self) -> CommitInfo:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.commit()

    def _check_open(self) -> None:
        if self._closed:
            raise ManifestTableError("this transaction has already been committed or aborted")


class Transaction(CommitsOnExit):
    """Use as ``with table.transaction() as tx: ...``: commits on a clean exit, and an
    exception inside the block commits nothing (staged files are removed).

    Each operation is all or nothing: one that raises leaves the staged changes exactly as
    they were before it and removes the files it wrote (see ``_all_or_nothing``)."""

    def __init__(self, handle: TableHandle) -> None:
        self._handle = handle
        self.staging = Staging(handle)
        """The staged changes and the steps operations are made of (operations/staging.py),
        for the library's own engines (Spark's upsert stages through it)."""
        self._closed = False

    @property
    def version(self) -> int:
        """The version this transaction reads and builds on."""
        return self.staging.base.version

    # --- operations ---------------------------------------------------------------------
    @_all_or_nothing
    def append(self, data: Any, schema_mode: str | None = None) -> int:
        """Stage ``data`` (see ``Table.append``); returns the number of rows staged.
        ``schema_mode="merge"`` first stages adding the columns of ``data`` the table lacks
        (nullable), in this same commit."""
        return append.append(self.staging, data, schema_mode)

    @_all_or_nothing
    def delete(self, where: str | Expr) -> int:
        """Stage deleting the live rows matching ``where``; returns how many."""
        return delete.delete(self.staging, where)

    @_all_or_nothing
    def overwrite(
        self,
        data: Any,
        where: str | Expr | None = None,
        schema_mode: str | None = None,
        *,
        require_match: bool = True,
    ) -> None:
        """Stage replacing every row (or the rows matching ``where``) with ``data``
        (``schema_mode="merge"``: adding its new columns first, as ``append`` does). See
        ``Table.overwrite`` for ``require_match``."""
        overwrite.overwrite(self.staging, data, where, schema_mode, require_match)

    @_all_or_nothing
    def update(
        self,
        set: Mapping[str, Any] | None = None,
        where: str | Expr | None = None,
        *,
        values: Mapping[str, Any] | None = None,
    ) -> int:
        """Stage new versions of the live rows matching ``where`` (every row: None), with the
        columns of ``set`` and ``values`` assigned; returns how many rows. See ``Table.update``."""
        return update.update(self.staging, set, where, values)

    @_all_or_nothing
    def upsert(
        self,
        data: Any,
        on: Sequence[str],
        *,
        when_matched: str = "update",
        when_not_matched: str = "insert",
        when_not_matched_by_source: str = "ignore",
        columns: Sequence[str] | None = None,
        schema_mode: str | None = None,
    ) -> UpsertCounts:
        """Stage merging ``data`` by the key columns ``on``; returns (rows_updated,
        rows_inserted). See ``Table.upsert``."""
        rules = upsert.MergeRules.of(
            self.staging.fields().schema, on, when_matched, when_not_matched, when_not_matched_by_source, columns
        )
        return upsert.upsert(self.staging, data, rules, schema_mode)

    @_all_or_nothing
    def add_files(self, files: Sequence[DataFile], *, written_since: datetime | None = None) -> None:
        """Stage data files already written into the table's ``data/`` by someone else (Spark
        tasks). Only files named here are committed: a retried task's extra files are not.
        ``written_since`` (an aware datetime): when the first of them was written, if before
        this transaction began; the commit gives up once they may be older than the table's
        ``gc_grace`` less a margin, as GC may have deleted them (docs/protocol.md, "Time")."""
        append.add_files(self.staging, files, written_since)

    @_all_or_nothing
    def delete_positions(self, positions: dict[str, BitMap]) -> int:
        """Stage deleting rows by position, per data file of this transaction's snapshot (the
        positions a distributed delete computed). Returns how many positions were given."""
        return delete.delete_positions(self.staging, positions)

    def set_app_transaction(self, app_id: str, batch_id: int) -> None:
        """Mark this commit as batch ``batch_id`` of application ``app_id`` (a streaming query):
        if that batch (or a later one) is already committed, committing does nothing."""
        self._check_open()
        check_string("app_id", app_id)
        check_int("batch_id", batch_id, minimum=0)
        changes = self.staging.changes
        changes.app_transaction = (app_id, int(batch_id))
        changes.parameters["app_transaction"] = {"app_id": app_id, "batch_id": int(batch_id)}

    def scan(self, columns: Sequence[str] | None = None, where: str | Expr | None = None) -> Scan:
        """A scan of the snapshot with this transaction's own changes applied."""
        self._check_open()
        return self.staging.scan(columns, to_expr(where))

    # --- commit -------------------------------------------------------------------------
    def commit(self) -> CommitInfo:
        self._check_open()
        self._closed = True
        staging = self.staging
        base, changes = staging.base, staging.finished()
        if changes is None:
            return CommitInfo(
                base.version,
                staging.operation(),
                base.timestamp,
                None,
                {"rows_added": 0, "rows_deleted": 0, **staging.changes.metrics},
                committed=False,
            )
        return commit(
            self._handle.log, base, staging.pointer, changes, self._handle.commit_options, staging.started, staging.dvs
        )

    def abort(self) -> None:
        """Drop everything staged; nothing was committed. Only objects of the shapes our
        writers create are removed: a file someone else named in ``add_files`` is left to them."""
        if not self._closed:
            self._closed = True
            added = self.staging.changes.added
            self._handle.store.delete_unreferenced(f.path for f in added if is_writer_key(f.path))

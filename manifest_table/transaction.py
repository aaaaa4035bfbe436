"""A multi-operation commit: appends, deletes and overwrites staged against one snapshot,
visible to the transaction's own scans, and committed once (or not at all)."""

from __future__ import annotations

import functools
import time
from itertools import islice
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from pyroaring import AbstractBitMap, BitMap

from .arguments import check_int, check_string
from .changes import Changes
from .commit import CommitInfo, commit
from .errors import InvalidArgumentError, InvalidFilterError, ManifestTableError
from .expressions import Expr, to_expr
from .format.field_ids import FieldIds
from .format.keys import DATA_PREFIX, caller_key, is_writer_key
from .format.manifest import DataFile, check_new_file
from .ingest import batches_of
from .listing import StagedFiles, VersionFiles, locate
from .scan import Scan, Snapshot
from .schema_evolution import SchemaUpdate, new_columns
from .tombstones import DeletionVectors
from .update import update
from .upsert import UpsertCounts, upsert
from .write import write_data_files

if TYPE_CHECKING:
    from .table import Table

T = TypeVar("T")


def _all_or_nothing(operation: Callable[..., T]) -> Callable[..., T]:
    """Run a transaction operation all or nothing. If it raises, the staged changes go back
    to what they were before it and the files it staged are removed; if it succeeds, the
    staged files it dropped (an overwrite of every row drops earlier appends) are removed.
    One snapshot of the (small) staged state per call, instead of a rule per operation that
    would have to know what each step staged. Operations made of others (overwrite: delete,
    then append) count as one."""
    @functools.wraps(operation)
    def run(tx: "Transaction", *args: Any, **kwargs: Any) -> T:
        tx._check_open()
        if tx._in_operation:
            return operation(tx, *args, **kwargs)
        before, kinds = tx._changes.copy(), list(tx._kinds)
        tx._in_operation = True
        try:
            result = operation(tx, *args, **kwargs)
        except BaseException:
            written = tx._changes.added_paths() - before.added_paths()
            tx._changes, tx._kinds = before, kinds
            tx._table.store.delete_unreferenced(sorted(written))
            raise
        finally:
            tx._in_operation = False
        tx._table.store.delete_unreferenced(sorted(before.added_paths() - tx._changes.added_paths()))
        return result
    return run


def _check_new_files(files: Any) -> None:
    """A list of ``DataFile`` entries as ``write_data_files`` returns them (each checked by
    ``check_new_file``: key, counts, no deletes)."""
    if isinstance(files, str | bytes) or not isinstance(files, Sequence):
        raise InvalidArgumentError(f"files must be a list of DataFile, not {type(files).__name__}")
    for f in files:
        check_new_file(f)


class Transaction:
    """Use as ``with table.transaction() as tx: ...``: commits on a clean exit, and an
    exception inside the block commits nothing (staged files are removed).

    Each operation is all or nothing: one that raises leaves the staged changes exactly as
    they were before it and removes the files it wrote (see ``_all_or_nothing``)."""

    def __init__(self, table: "Table") -> None:
        self._table = table
        self._started = time.monotonic()
        self._base, self._pointer = table._log.latest()
        self._dvs = DeletionVectors(table.store)
        self._changes = Changes(operation="")
        self._kinds: list[str] = []
        self._closed = False
        self._in_operation = False

    @property
    def version(self) -> int:
        """The version this transaction reads and builds on."""
        return self._base.version

    # --- operations ---------------------------------------------------------------------
    @_all_or_nothing
    def append(self, data: Any, schema_mode: str | None = None) -> int:
        """Stage ``data`` (see ``Table.append``); returns the number of rows staged.
        ``schema_mode="merge"`` first stages adding the columns of ``data`` the table lacks
        (nullable), in this same commit."""
        if schema_mode == "merge":
            self._merge_schema(data)
        elif schema_mode is not None:
            raise InvalidArgumentError(f"schema_mode must be None or 'merge', not {schema_mode!r}")
        fields = self._fields()
        files = write_data_files(self._table.io, batches_of(data, fields.schema), fields.schema,
                                 self._table.write_options, field_ids=fields.ids)
        self._stage_files(files)
        return sum(f.rows for f in files)

    @_all_or_nothing
    def delete(self, where: str | Expr) -> int:
        """Stage deleting the live rows matching ``where``; returns how many."""
        expr = to_expr(where)
        if expr is None:
            raise InvalidFilterError("delete needs a condition; use overwrite() to replace every row")
        scan = Scan(self._snapshot(), self._table.io, columns=[], where=expr)
        return self._stage_deletes((file.path, positions) for file, positions in scan.matching_positions())

    @_all_or_nothing
    def overwrite(self, data: Any, where: str | Expr | None = None) -> None:
        """Stage replacing every row (or the rows matching ``where``) with ``data``."""
        expr = to_expr(where)
        changes = self._changes
        if expr is None:
            snapshot = self._snapshot()
            files = snapshot.files
            removed_rows = sum(snapshot.live_rows(f) for f in files)
            changes.metrics["rows_deleted"] = changes.metrics.get("rows_deleted", 0) + removed_rows
            staged = changes.added_paths()
            changes.removed |= {f.path for f in files if f.path not in staged}
            changes.added, changes.deletes = [], {}  # their files go once this operation succeeds
        else:
            # Bound, so that conflict checks compare the literal as the column's type (a
            # decimal column's 1.10 with Decimal('1.1'), not with the binary float 1.1).
            expr = expr.bind(self._base.schema)
            self.delete(expr)
        changes.serialize_against(expr)
        changes.parameters.setdefault("predicates", []).append(None if expr is None else str(expr))
        self._record("overwrite")
        self.append(data)

    @_all_or_nothing
    def update(self, set: Mapping[str, Any], where: str | Expr | None = None) -> int:
        """Stage new versions of the live rows matching ``where`` (every row: None), with the
        columns of ``set`` assigned; returns how many rows. See ``Table.update``."""
        return update(self, set, where)

    @_all_or_nothing
    def upsert(self, data: Any, on: Sequence[str], *, when_matched: str = "update",
               when_not_matched: str = "insert") -> UpsertCounts:
        """Stage merging ``data`` by the key columns ``on``; returns (rows_updated,
        rows_inserted). See ``Table.upsert``."""
        return upsert(self, data, on, when_matched, when_not_matched)

    @_all_or_nothing
    def add_files(self, files: Sequence[DataFile]) -> None:
        """Stage data files already written into the table's ``data/`` by someone else (Spark
        tasks). Only files named here are committed: a retried task's extra files are not."""
        _check_new_files(files)
        clash = sorted(self._files_named([f.path for f in files]))
        if clash:
            raise ManifestTableError(f"files are already part of the table: {clash[:5]}")
        self._stage_files(files)

    @_all_or_nothing
    def delete_positions(self, positions: dict[str, BitMap]) -> int:
        """Stage deleting rows by position, per data file of this transaction's snapshot (the
        positions a distributed delete computed). Returns how many positions were given."""
        self._check_positions(positions)
        unknown = sorted(set(positions) - self._files_named(positions).keys())
        if unknown:
            raise ManifestTableError(f"not data files of version {self.version}: {unknown[:5]}")
        return self._stage_deletes(positions.items())

    def set_app_transaction(self, app_id: str, batch_id: int) -> None:
        """Mark this commit as batch ``batch_id`` of application ``app_id`` (a streaming query):
        if that batch (or a later one) is already committed, committing does nothing."""
        self._check_open()
        check_string("app_id", app_id)
        check_int("batch_id", batch_id, minimum=0)
        self._changes.app_transaction = (app_id, int(batch_id))
        self._changes.parameters["app_transaction"] = {"app_id": app_id, "batch_id": int(batch_id)}

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
                              {"rows_added": 0, "rows_deleted": 0, **self._changes.metrics}, committed=False)
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
    def _fields(self) -> FieldIds:
        """The schema this transaction writes with: the base's, or the one it changes to."""
        change = self._changes.schema
        return change.fields if change is not None else self._base.fields

    def _merge_schema(self, data: Any) -> None:
        current = self._fields().schema
        new = new_columns(data, current)
        if not new:
            return
        update = SchemaUpdate(self._base, staged=self._changes.schema)
        for f in new:
            update.add_column(f.name, f.type)
        change = update.change()
        self._changes.schema = change
        self._changes.parameters["schema_changes"] = list(change.steps) if change else []
        self._record("update_schema")

    def _stage_files(self, files: Sequence[DataFile]) -> None:
        self._changes.added.extend(files)
        rows = sum(f.rows for f in files)
        if rows:
            self._record("append", rows_added=rows, files_added=len(files))

    def _check_positions(self, positions: Any) -> None:
        """A mapping of path -> bitmap of row positions inside that file: a position past the
        end would make every later scan of the table fail. (Paths are checked by the caller.)"""
        if not isinstance(positions, Mapping):
            raise InvalidArgumentError(f"positions must be a dict of data file path -> BitMap, "
                                       f"not {type(positions).__name__}")
        for path in positions:
            caller_key(path, DATA_PREFIX, "delete_positions")
        rows = {path: f.rows for path, f in self._files_named(positions).items()}
        for path, bitmap in positions.items():
            if not isinstance(bitmap, AbstractBitMap):
                raise InvalidArgumentError(f"positions of {path} must be a pyroaring BitMap, "
                                           f"not {type(bitmap).__name__}")
            if path in rows and bitmap and bitmap.max() >= rows[path]:
                past = list(islice(bitmap.iter_equal_or_larger(rows[path]), 5))
                raise InvalidArgumentError(f"positions {past} are past the end of {path}, which has "
                                           f"{rows[path]} rows (positions 0..{rows[path] - 1})")

    def _snapshot(self) -> Snapshot:
        changes = self._changes
        files = StagedFiles(VersionFiles(self._base), frozenset(changes.removed), tuple(changes.added))
        staged = {path: BitMap(bitmap) for path, bitmap in changes.deletes.items() if bitmap}
        fields = self._fields()
        return Snapshot(self._base.version, fields.schema, files, self._dvs.of, staged, fields)

    def _files_named(self, paths: Iterable[str]) -> dict[str, DataFile]:
        """The files of this transaction's view among ``paths``."""
        wanted = set(paths)
        found = {f.path: f for f in self._changes.added if f.path in wanted}
        base = locate(self._base, wanted - found.keys() - self._changes.removed)
        found.update({path: f for path, (f, _) in base.items()})
        return found

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
        """An operation made of others (an overwrite deletes and appends) names the commit."""
        kinds = set(self._kinds)
        composite = kinds & {"overwrite", "update", "upsert"}
        if composite:
            return composite.pop() if len(composite) == 1 else "transaction"
        if len(kinds) > 1:
            kinds.discard("update_schema")  # an append that adds columns stays an append
        return kinds.pop() if len(kinds) == 1 else "transaction"

    def _check_open(self) -> None:
        if self._closed:
            raise ManifestTableError("this transaction has already been committed or aborted")

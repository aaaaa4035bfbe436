"""Schema evolution: adding, renaming, dropping and widening columns as metadata-only commits
(docs/schema-evolution.md).

1. Every column has a field id; data files carry them (or are resolved through the name
   mapping, format/field_ids.py), so no change rewrites data.
2. A change is staged as a ``SchemaChange`` (commit/changes.py): the schema, ids and name
   mapping the commit moves the table to. ``commit/builder.py`` applies it
   (``Manifest.with_fields``) before the commit's other changes.
3. Rebasing (commit/conflicts.py): a schema change conflicts with any concurrent schema change, and
   one adding a non-nullable column with any concurrent commit that leaves the table with
   rows; an append written under the old schema carries over when every column it wrote
   still exists with the same or a wider type and every added column is nullable
   (``carry_files``), otherwise it conflicts.
New ids are ``last_field_id + 1`` onwards: a dropped column's id is never reused."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import pyarrow as pa

from ..arguments import check_string
from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import Changes, SchemaChange
from ..data.ingest import schema_of
from ..errors import InvalidArgumentError, SchemaEvolutionError, SchemaMismatchError, UpgradeRequiredError
from ..format.column_types import plain_type, refusal, widens
from ..format.field_ids import FieldIds
from ..format.manifest import Manifest
from ..format.schema import check_schema
from ..handle import TableHandle


def update_schema(handle: TableHandle) -> SchemaUpdate:
    """See ``Table.update_schema``: the block's changes, staged on the latest version, commit
    as one version on a clean exit."""
    base, pointer = handle.log.latest()
    started = Stamp.now()

    def commit_change(change: SchemaChange) -> CommitInfo:
        changes = Changes(operation="update_schema", schema=change, parameters={"schema_changes": list(change.steps)})
        return commit(handle.log, base, pointer, changes, handle.commit_options, started)

    return SchemaUpdate(base, commit_change)


class SchemaUpdate:
    """The changes of one ``with table.update_schema() as s:`` block, checked as they are
    made (a bad one raises at once); the block commits them as one version on a clean exit."""

    def __init__(
        self, base: Manifest, commit: Callable[[SchemaChange], Any] | None = None, staged: SchemaChange | None = None
    ) -> None:
        """``staged``: a change already staged on ``base`` (by a transaction) to continue."""
        if base.index is None:
            raise UpgradeRequiredError(
                "schema evolution needs format version 2 (field ids); this table is "
                "format version 1: run table.upgrade() first"
            )
        self._base = base
        self._commit = commit
        current = staged.fields if staged is not None else base.fields
        self._columns: list[tuple[int, pa.Field]] = list(zip(current.ids, current.schema))
        self._last = staged.last_field_id if staged is not None else base.index.last_field_id
        self._steps: list[str] = list(staged.steps) if staged is not None else []
        self.result: Any = None
        """What the commit returned (a ``CommitInfo``), once the block has exited."""

    # --- the changes ---------------------------------------------------------------------
    def add_column(self, name: str, type: pa.DataType, nullable: bool = True) -> SchemaUpdate:
        """A new column, null in every existing row (so it must be nullable unless the table
        has no rows: there is no default value)."""
        _check_name(name)
        if not isinstance(type, pa.DataType):
            raise InvalidArgumentError(f"the type of column {name!r} must be a pyarrow DataType, not {type!r}")
        if self._find(name) is not None:
            raise SchemaEvolutionError(f"cannot add column {name!r}: the table already has a column of that name")
        if not nullable and self._base.live_rows:
            raise SchemaEvolutionError(
                f"cannot add non-nullable column {name!r} to a table with rows: they "
                "would have no value for it (add it nullable)"
            )
        check_schema(pa.schema([pa.field(name, type, nullable)]))
        self._last += 1
        self._columns.append((self._last, pa.field(name, type, nullable)))
        self._steps.append(f"add_column {name} {type}{'' if nullable else ' not null'}")
        return self

    def rename_column(self, old: str, new: str) -> SchemaUpdate:
        i = self._index(old)
        _check_name(new)
        if self._find(new) is not None:
            raise SchemaEvolutionError(f"cannot rename {old!r} to {new!r}: the table already has a column {new!r}")
        fid, f = self._columns[i]
        self._columns[i] = (fid, f.with_name(new))
        self._steps.append(f"rename_column {old} -> {new}")
        return self

    def drop_column(self, name: str) -> SchemaUpdate:
        """Remove a column; its data stays in the files but is never read again (its id is
        retired, so a later column of the same name is a new column)."""
        i = self._index(name)
        if len(self._columns) == 1:
            raise SchemaEvolutionError(f"cannot drop {name!r}: it is the table's last column")
        del self._columns[i]
        self._steps.append(f"drop_column {name}")
        return self

    def widen(self, name: str, new_type: pa.DataType) -> SchemaUpdate:
        """Widen a column's type (int8 -> int16 -> int32 -> int64, float32 -> float64, a decimal's
        precision up at the same scale); files keep the old type and are cast on read."""
        i = self._index(name)
        fid, f = self._columns[i]
        if not isinstance(new_type, pa.DataType) or not widens(f.type, new_type):
            raise SchemaEvolutionError(
                f"cannot change column {name!r} from {f.type} to {new_type}: only widening "
                "int8 -> int16 -> int32 -> int64, float32 -> float64 and decimal precision "
                "(same scale) is allowed"
            )
        self._columns[i] = (fid, f.with_type(new_type))
        self._steps.append(f"widen {name} {f.type} -> {new_type}")
        return self

    def set_nullable(self, name: str) -> SchemaUpdate:
        i = self._index(name)
        fid, f = self._columns[i]
        self._columns[i] = (fid, f.with_nullable(True))
        self._steps.append(f"set_nullable {name}")
        return self

    # --- the result ----------------------------------------------------------------------
    def change(self) -> SchemaChange | None:
        """The staged change (None when nothing changes)."""
        base = self._base.fields
        ids = tuple(fid for fid, _ in self._columns)
        schema = pa.schema([f for _, f in self._columns], metadata=self._base.schema.metadata)
        if ids == base.ids and schema.equals(base.schema):
            return None
        mapping = dict(base.name_mapping) if base.name_mapping is not None else dict(zip(base.schema.names, base.ids))
        for fid, f in self._columns:
            if fid not in mapping.values():
                mapping[_free_name(f.name, fid, mapping)] = fid
        return SchemaChange(FieldIds(schema, ids, mapping), self._last, tuple(self._steps))

    def __enter__(self) -> SchemaUpdate:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        change = self.change()
        if exc_type is None and change is not None and self._commit is not None:
            self.result = self._commit(change)

    # --- helpers -------------------------------------------------------------------------
    def _find(self, name: str) -> int | None:
        return next((i for i, (_, f) in enumerate(self._columns) if f.name == name), None)

    def _index(self, name: str) -> int:
        i = self._find(name)
        if i is None:
            raise SchemaEvolutionError(
                f"the table has no column {name!r}; its columns: {[f.name for _, f in self._columns]}"
            )
        return i


def new_columns(data: Any, schema: pa.Schema) -> list[pa.Field]:
    """The columns of ``data`` (what ``append`` accepts) that ``schema`` lacks, as the columns
    ``schema_mode="merge"`` adds: typed by what their values are (a pandas categorical's
    dictionary type by its value type, format/column_types.py). A column holding only nulls
    has no type to add: ``SchemaMismatchError``."""
    fields = [f.with_type(plain_type(f.type)) for f in schema_of(data) if f.name not in schema.names]
    untyped = [f.name for f in fields if (found := refusal(f.type)) and pa.types.is_null(found[0])]
    if untyped:
        raise SchemaMismatchError(
            f"new columns {untyped} hold only nulls (or empty lists), so their type is "
            "unknown: add them first with update_schema().add_column(name, type)"
        )
    return fields


def _free_name(name: str, fid: int, taken: dict[str, int]) -> str:
    """The physical name of a new column (the name its data files carry it under): its name,
    unless an earlier column's files already use it (a dropped or renamed column), then a
    generated one. Never reused, so a file column always means one field id."""
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name}_{fid}" if n == 1 else f"{name}_{fid}_{n}"
    return candidate


def _check_name(name: Any) -> None:
    check_string("a column name", name)

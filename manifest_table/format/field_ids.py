"""Resolving a data file's columns to the table's columns by field id (docs/format.md,
"Field ids and schema evolution").

A file we write carries each column's field id in its Parquet schema (``PARQUET:field_id``).
A file without ids (written before this release, or by a foreign writer) is resolved by
column name through the table's *name mapping*: the name each field id had when the table's
schema first changed. Every file without ids was written under that first schema (schema
changes write ids from the start), so one name per id is exact, and a later column that
reuses a dropped or renamed column's name is never confused with it. A table whose schema
never changed has no mapping: its current names are the ones files were written with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..lazy import lazy

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy("pyarrow")  # (a manifest names its ``fields`` before anything reads data)

FIELD_ID = b"PARQUET:field_id"
"""The Arrow field metadata key of a Parquet field id (what pyarrow writes and reads back)."""


@dataclass(frozen=True)
class FieldIds:
    """How the files of one table version map onto its schema."""

    schema: pa.Schema
    ids: tuple[int, ...]
    name_mapping: Mapping[str, int] | None = None
    """Column name in files without field ids -> field id (None: the schema's own names)."""

    @property
    def physical_names(self) -> tuple[str, ...]:
        """The name each column's data files carry it under: fixed when the column is
        created and never reused (the name mapping records it, see ``SchemaUpdate``). Delta
        readers match Parquet columns by this name even in column-mapping ``id`` mode
        (docs/mirrors.md); our readers resolve by field id and do not care. A column added
        before this was recorded keeps its current name."""
        if self.name_mapping is None:
            return tuple(self.schema.names)
        by_id = {fid: name for name, fid in self.name_mapping.items()}
        return tuple(by_id.get(fid, f.name) for f, fid in zip(self.schema, self.ids))

    @property
    def evolved(self) -> bool:
        """True once the schema has changed: files may then differ from it by more than names."""
        return self.name_mapping is not None

    def of_file(self, file_schema: pa.Schema) -> dict[int, str]:
        """Field id -> the file's column holding it."""
        found = {}
        for f in file_schema:
            raw = (f.metadata or {}).get(FIELD_ID)
            if raw is None:
                break
            found[int(raw)] = f.name
        else:
            return found
        names = self.name_mapping if self.name_mapping is not None else dict(zip(self.schema.names, self.ids))
        return {names[name]: name for name in file_schema.names if name in names}

    def sources(self, file_schema: pa.Schema, columns: Sequence[str]) -> dict[str, str]:
        """Table column -> the file column to read for it, for the ``columns`` the file has."""
        by_id = self.of_file(file_schema)
        wanted = {f.name: fid for f, fid in zip(self.schema, self.ids)}
        return {name: by_id[wanted[name]] for name in columns if wanted[name] in by_id}

    def conform(self, table: pa.Table, sources: Mapping[str, str], columns: Sequence[str]) -> pa.Table:
        """``table`` (file columns) as the table's ``columns``: renamed, widened by a cast, and
        null where the file has no such column (it was added after the file was written)."""
        from .column_types import parquet_form

        arrays, fields = [], []
        for name in columns:
            target = self.schema.field(name)
            source = sources.get(name)
            if source is None:
                column = pa.chunked_array([pa.nulls(table.num_rows, target.type)])
            else:
                column = table.column(source)
                if self.evolved and column.type != target.type:
                    column = column.cast(target.type)  # widened since the file was written
                elif column.type != target.type and column.type == parquet_form(target.type):
                    column = column.cast(target.type)  # as Parquet keeps it: seconds as milliseconds
                else:
                    target = target.with_type(column.type)  # (as files have always been read)
            arrays.append(column)
            fields.append(target)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields)) if columns else table.select([])


def plain(schema: pa.Schema) -> FieldIds:
    """Files of a v1 table: read by name (its schema never changes)."""
    return FieldIds(schema, tuple(range(1, len(schema) + 1)))

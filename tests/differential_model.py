"""The model of the differential read-path test: the rows every version should hold, kept
with pyarrow alone (never our reader), and DuckDB as the SQL oracle that says which of them a
filter selects (docs/expressions.md, "SQL semantics": SQL is the reference).

Each row version carries a model-only id (`uid`): a write gives its rows fresh uids, so a
delete staged on an old snapshot removes exactly the row versions it saw, whatever a
concurrent update wrote meanwhile."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tests.differential_types import Column, widened
from tests.filter_generator import FilterColumn, Text

UID = "__uid"


class _Before:
    def __repr__(self) -> str:
        return "BEFORE"


BEFORE = _Before()
"""In a history's versions: a database version from before the table was created."""


@dataclass(frozen=True)
class State:
    """The live rows of one version (any order) and what the test knows of its columns."""

    data: pa.Table
    """The rows (every column nullable: see ``stored``)."""
    uids: pa.Array
    columns: tuple[Column, ...]
    format_version: int

    @staticmethod
    def empty(columns: Iterable[Column], format_version: int) -> State:
        columns = tuple(columns)
        return State(stored(columns).empty_table(), pa.array([], pa.int64()), columns, format_version)

    @property
    def schema(self) -> pa.Schema:
        """The table's schema at this version."""
        return pa.schema([c.field for c in self.columns])

    @property
    def ids(self) -> list[int]:
        return self.data["id"].to_pylist()

    def filter_columns(self) -> list[FilterColumn]:
        return [c.filter_column() for c in self.columns]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    # --- changes ---------------------------------------------------------------------------
    def append(self, rows: pa.Table, uids: Iterable[int]) -> State:
        rows = rows.select(self.schema.names).cast(stored(self.columns))
        return replace(self, data=pa.concat_tables([self.data, rows]),
                       uids=pa.concat_arrays([self.uids, pa.array(list(uids), pa.int64())]))

    def keep(self, mask: pa.Array) -> State:
        return replace(self, data=self.data.filter(mask), uids=self.uids.filter(mask))

    def without(self, uids: Iterable[int]) -> State:
        return self.keep(pc.invert(pc.is_in(self.uids, pa.array(list(uids), pa.int64()))))

    def add_column(self, column: Column) -> State:
        nulls = pa.nulls(self.data.num_rows, column.type)
        return replace(self, data=self.data.append_column(column.name, nulls), columns=self.columns + (column,))

    def rename_column(self, old: str, new: str) -> State:
        columns = tuple(replace(c, name=new) if c.name == old else c for c in self.columns)
        return replace(self, data=self.data.rename_columns([new if n == old else n for n in self.data.column_names]),
                       columns=columns)

    def drop_column(self, name: str) -> State:
        columns = tuple(c for c in self.columns if c.name != name)
        return replace(self, data=self.data.drop_columns([name]), columns=columns)

    def widen(self, name: str, new_type: pa.DataType) -> State:
        columns = tuple(widened(c, new_type) if c.name == name else c for c in self.columns)
        return replace(self, data=self.data.cast(stored(columns)), columns=columns)

    def upgraded(self) -> State:
        return replace(self, format_version=2)


def stored(columns: Iterable[Column]) -> pa.Schema:
    """How the model holds rows: every column nullable, so that a NOT NULL column a bug filled
    with nulls can be held (and compared) too."""
    return pa.schema([pa.field(c.name, c.type) for c in columns])


class Oracle:
    """DuckDB over the model's rows: which rows a filter selects."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")  # naive literals against zoned columns are UTC (ours are)
        self.con.execute("SET threads = 1")  # tiny queries: threads only cost
        self._loaded: State | None = None

    def _load(self, state: State) -> None:
        if self._loaded is not state:
            self.con.register("model", state.data.append_column(UID, state.uids))
            self._loaded = state

    def mask(self, state: State, where: Text | None) -> pa.Array:
        """True for the rows of ``state`` that ``where`` selects (every row for None)."""
        if where is None:
            return pa.array([True] * state.data.num_rows, pa.bool_())
        self._load(state)
        uids = [row[0] for row in self.con.execute(f'SELECT "{UID}" FROM model WHERE {where.duck}').fetchall()]
        return pc.is_in(state.uids, pa.array(uids, pa.int64()))

    def rows(self, state: State, where: Text | None, columns: list[str] | None = None) -> pa.Table:
        """The rows (and columns) of ``state`` a scan with this filter and projection returns."""
        selected = state.data.filter(self.mask(state, where))
        declared = pa.Table.from_arrays(selected.columns, schema=state.schema)  # a cast would check nullability
        return declared if columns is None else declared.select(columns)

    def uids(self, state: State, where: Text | None) -> set[int]:
        return set(state.uids.filter(self.mask(state, where)).to_pylist())

    def close(self) -> None:
        self.con.close()


def new_values(state: State, mask: pa.Array, values: dict[str, Any]) -> pa.Table:
    """The rows ``mask`` selects with ``values`` assigned (what an update writes)."""
    rows = state.data.filter(mask)
    for name, value in values.items():
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, rows.schema.field(index),
                               pa.array([value] * rows.num_rows, rows.schema.field(index).type))
    return rows

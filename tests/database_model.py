"""The pure-Python model of a database that tests/databases/test_database_model.py checks the library
against: the catalog and every table's rows at every version, what each commit did, and a
database transaction staged step by step with the errors each step must raise.

A table is a token (the model's id); its state is its extra columns and its rows, each row
``(k, v, *extras)``. Nothing here touches the library."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from manifest_table.errors import InvalidArgumentError, TableExistsError, TableNotFoundError

Row = tuple[Any, ...]
Condition = tuple[str, Callable[[int, Any], bool]]
"""A filter's text, and what it means for a row's ``k`` and ``v``."""


@dataclass(frozen=True)
class TableState:
    token: int
    extras: tuple[str, ...] = ()
    rows: tuple[Row, ...] = ()

    @property
    def columns(self) -> list[str]:
        return ["k", "v", *self.extras]

    def counter(self) -> Counter[Row]:
        return Counter(self.rows)

    def with_rows(self, rows: list[Row]) -> TableState:
        return replace(self, rows=tuple(rows))

    def padded(self, rows: list[tuple[int, Any]]) -> list[Row]:
        """Rows given as ``(k, v)``: the extra columns are null."""
        return [(k, v, *(None,) * len(self.extras)) for k, v in rows]


@dataclass(frozen=True)
class Version:
    """One database version: name -> table, and what its commit did."""

    tables: Mapping[str, TableState]
    changed: frozenset[str] = frozenset()
    """The names (as of this version) of the tables its commit created or wrote."""
    created: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()
    renamed: Mapping[str, str] = field(default_factory=dict)

    def name_of(self, token: int) -> str | None:
        return next((name for name, state in self.tables.items() if state.token == token), None)


# --- table operations: (new state, whether anything was staged) ---------------------------------
def append(state: TableState, rows: list[tuple[int, Any]]) -> tuple[TableState, bool]:
    return state.with_rows(list(state.rows) + state.padded(rows)), bool(rows)


def delete(state: TableState, condition: Condition) -> tuple[TableState, bool]:
    keep = [r for r in state.rows if not condition[1](r[0], r[1])]
    return state.with_rows(keep), len(keep) < len(state.rows)


def update(state: TableState, condition: Condition, value: Any) -> tuple[TableState, bool]:
    hit = [condition[1](r[0], r[1]) for r in state.rows]
    rows = [(r[0], value, *r[2:]) if h else r for r, h in zip(state.rows, hit)]
    return state.with_rows(rows), any(hit)


def upsert(state: TableState, source: list[tuple[int, Any]], matched: str, not_matched: str) -> tuple[TableState, bool]:
    """Merge on ``k``; ``matched``: update, ignore or delete (a source of keys alone)."""
    by_key = dict(source)
    present = {r[0] for r in state.rows}
    keep = [r for r in state.rows if r[0] not in by_key or matched == "ignore"]
    hits = [r for r in state.rows if r[0] in by_key]
    added = state.padded([(r[0], by_key[r[0]]) for r in hits]) if matched == "update" else []
    if not_matched == "insert":
        added += state.padded([(k, v) for k, v in source if k not in present])
    staged = bool(added) or (matched == "delete" and bool(hits))
    return state.with_rows(keep + added), staged


def overwrite(state: TableState, rows: list[tuple[int, Any]], condition: Condition | None) -> TableState:
    keep = [] if condition is None else [r for r in state.rows if not condition[1](r[0], r[1])]
    return state.with_rows(keep + state.padded(rows))


def add_column(state: TableState, name: str) -> TableState:
    return TableState(state.token, state.extras + (name,), tuple(r + (None,) for r in state.rows))


def rename_column(state: TableState, old: str, new: str) -> TableState:
    return replace(state, extras=tuple(new if e == old else e for e in state.extras))


def drop_column(state: TableState, name: str) -> TableState:
    i = 2 + state.extras.index(name)
    return TableState(state.token, tuple(e for e in state.extras if e != name),
                      tuple(r[:i] + r[i + 1:] for r in state.rows))


# --- a database transaction, staged ----------------------------------------------------------------
class StagedTransaction:
    """What a database transaction staged on ``base`` has done so far; each step returns the
    error the library must raise (then nothing changed), or None."""

    def __init__(self, base: Version, new_token: Callable[[], int]) -> None:
        self.base, self._new_token = base, new_token
        self.names = {name: s.token for name, s in base.tables.items()}
        self.states = {s.token: s for s in base.tables.values()}
        self.base_names = {s.token: name for name, s in base.tables.items()}
        self.created: set[int] = set()
        self.written: set[int] = set()

    def create(self, name: str) -> type[Exception] | None:
        if name in self.names:
            return TableExistsError
        token = self._new_token()
        self.names[name], self.states[token] = token, TableState(token)
        self.created.add(token)
        return None

    def drop(self, name: str) -> type[Exception] | None:
        token = self.names.get(name)
        if token is None:
            return TableNotFoundError
        if token in self.created or token in self.written:
            return InvalidArgumentError
        del self.names[name]
        return None

    def rename(self, old: str, new: str) -> type[Exception] | None:
        if old not in self.names:
            return TableNotFoundError
        if new in self.names:
            return TableExistsError
        self.names[new] = self.names.pop(old)
        return None

    def write(self, name: str, change: Callable[[TableState], tuple[TableState, bool]]) -> type[Exception] | None:
        token = self.names.get(name)
        if token is None:
            return TableNotFoundError
        self.states[token], staged = change(self.states[token])
        if staged:
            self.written.add(token)
        return None

    def state(self, name: str) -> TableState:
        return self.states[self.names[name]]

    def result(self) -> Version | None:
        """The version the commit makes, or None when it commits nothing."""
        now = {token: name for name, token in self.names.items()}
        dropped = frozenset(name for token, name in self.base_names.items() if token not in now)
        renamed = {name: now[t] for t, name in self.base_names.items() if t in now and now[t] != name}
        changed = frozenset(now[t] for t in self.created | self.written if t in now)
        if not (changed or dropped or renamed):
            return None
        tables = {name: self.states[token] for name, token in self.names.items()}
        created = frozenset(now[t] for t in self.created)
        return Version(tables, changed, created, dropped, renamed)

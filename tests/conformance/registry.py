"""The cases of the conformance corpus (tests/conformance/README.md): each is a function that
builds one table or database with the public API, registered with ``@case``.

A case function gets a ``Site``: an empty in-memory store and a location label. It makes its
table (``site.table``) or database (``site.database``) there and writes its history; the
generator (generate.py) then takes every object of the store, and the rows of every retained
version as this release reads them, unless the function returns the expected rows itself
(a table written by an earlier release: what that release read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import manifest_table as mt
from manifest_table.storage.memory import MemoryStore

TINY = {"tail_limit": 2, "deletes_limit": 2, "segment_target_files": 3, "max_small_segments": 2}
"""Format-v2 limits under which files go to segments and segments merge within a few commits."""

Expected = dict[str, pa.Table]
"""Path under ``expected/`` (``v3.parquet``, ``orders/v3.parquet``) -> the rows."""


@dataclass
class Site:
    """Where a case builds its table: a fresh store, named by a location label that also
    appears in what the Iceberg mirror writes (absolute paths), so it must not be a path of
    the machine that ran the generator."""

    name: str
    store: MemoryStore = field(default_factory=MemoryStore)

    @property
    def uri(self) -> str:
        return f"conformance://corpus/{self.name}"

    def table(self, schema: pa.Schema, **options: Any) -> mt.Table:
        return mt.create_table(self.uri, schema, store=self.store, **options)

    def open(self) -> mt.Table:
        return mt.open_table(self.uri, store=self.store)

    def database(self, **options: Any) -> Any:
        return mt.create_database(self.uri, store=self.store, **options)

    def open_database(self) -> Any:
        return mt.open_database(self.uri, store=self.store)


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    exercises: tuple[str, ...]
    build: Callable[[Site], Expected | None]
    kind: str = "table"
    """"table" or "database"."""
    written_by: str | None = None
    """The release that wrote the objects, for a table copied from tests/data (never
    regenerated: formats are forever); None: written by this repository's code."""


CASES: dict[str, Case] = {}


def case(
    name: str, description: str, *exercises: str, kind: str = "table", written_by: str | None = None
) -> Callable[[Callable[[Site], Expected | None]], Callable[[Site], Expected | None]]:
    def register(build: Callable[[Site], Expected | None]) -> Callable[[Site], Expected | None]:
        assert name not in CASES, f"case {name} defined twice"
        CASES[name] = Case(name, description, exercises, build, kind, written_by)
        return build

    return register


def ints(ids: range | list[int], **columns: Callable[[int], Any]) -> pa.Table:
    """A table with an int64 ``id`` column and one column per keyword, valued by id."""
    ids = list(ids)
    values = {name: [make(i) for i in ids] for name, make in columns.items()}
    return pa.table({"id": pa.array(ids, pa.int64()), **values})

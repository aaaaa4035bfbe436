"""Reading a table's mirrors with readers no one here wrote (pyiceberg, deltalake), and the
random histories the mirror tests replay. docs/design/004-mirrors.md records what these readers do:
deltalake's ``to_pyarrow_table`` refuses column mapping and deletion vectors, so its
DataFusion scan is used."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyiceberg.table import StaticTable

import manifest_table as mt
from manifest_table.errors import CommitConflictError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                    ("amount", pa.decimal128(9, 2)), ("ts", pa.timestamp("us", tz="UTC")),
                    ("small", pa.int32())])
PROPERTIES = {"tail_limit": 3, "deletes_limit": 3, "segment_target_files": 4, "max_small_segments": 2}
"""Tiny limits: the histories flush, rewrite and merge segments and the deletes map."""


def rows(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples of Python values, columns in name order: instants in UTC (an
    aware datetime in a repeated hour never equals one of another zone, PEP 495), NaN as a
    string (it equals nothing)."""
    names = sorted(table.column_names)
    columns = [[_comparable(v) for v in table.column(n).to_pylist()] for n in names]
    return sorted(zip(*columns), key=repr) if names else []


def _comparable(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    return value if value == value else "NaN"


def iceberg_rows(uri: str, version: int | None = None, properties: dict[str, str] | None = None) -> list[tuple]:
    """pyiceberg's rows of our ``version`` (its own metadata file), or of the table found by
    ``version-hint.text``."""
    where = uri if version is None else f"{uri}/metadata/v{version}.metadata.json"
    return rows(StaticTable.from_metadata(where, properties=properties or {}).scan().to_arrow())


def delta_rows(uri: str, version: int | None = None, storage_options: dict[str, str] | None = None) -> list[tuple]:
    table = DeltaTable(uri, version=version, storage_options=storage_options)
    return rows(table.scan().read_all())


def check_version(t: mt.Table, version: int, mirrors: list[str], **options: Any) -> None:
    expected = rows(t.scan(version=version).to_arrow())
    if "iceberg" in mirrors:
        assert iceberg_rows(t.uri, version, options.get("iceberg")) == expected, f"iceberg, version {version}"
    if "delta" in mirrors:
        assert delta_rows(t.uri, version, options.get("delta")) == expected, f"delta, version {version}"


class History:
    """A seeded random history of every kind of commit, on ``t``. ``widen``: also widen a
    column (only without the Delta mirror, which refuses it)."""

    def __init__(self, t: mt.Table, seed: int, widen: bool) -> None:
        self.t, self.rng, self.widen, self.next_id, self.extra = t, random.Random(seed), widen, 0, 0

    def batch(self, n: int, ids: list[int] | None = None) -> pa.Table:
        ids = ids if ids is not None else list(range(self.next_id, self.next_id + n))
        self.next_id = max([self.next_id, *(i + 1 for i in ids)])
        schema = self.t.schema
        data = {"id": ids, "name": [None if i % 5 == 0 else f"n{i}" for i in ids],
                "score": [i / 4 for i in ids], "amount": [Decimal(i) / 100 for i in ids],
                "ts": [1_729_990_800_000_000 + i * 60_000_000 for i in ids], "small": [i % 100 for i in ids]}
        columns = {}
        for field in schema:
            values = data.get(field.name)
            if values is None:  # a column added (or renamed) since: null
                columns[field.name] = pa.nulls(len(ids), field.type)
            else:
                raw = pa.array(values, pa.int64() if pa.types.is_timestamp(field.type) else None)
                columns[field.name] = raw.cast(field.type)
        return pa.table(columns, schema=schema)

    def live_ids(self) -> list[int]:
        return self.t.scan(columns=["id"]).to_arrow().column("id").to_pylist()

    def step(self) -> str:
        kind = self.rng.choice(["append", "append", "delete", "delete", "update", "upsert", "overwrite",
                                "compact", "schema"])
        ids = self.live_ids()
        if kind == "append" or not ids:
            self.t.append(self.batch(self.rng.randint(1, 6)))
            return "append"
        pick = sorted(self.rng.sample(ids, min(len(ids), self.rng.randint(1, 4))))
        where = f"id IN ({', '.join(map(str, pick))})"
        if kind == "delete":
            self.t.delete(where)
        elif kind == "update":
            self.t.update({"small": "small + 1000"}, where=where)
        elif kind == "upsert":
            self.t.upsert(self.batch(0, pick[:2] + [self.next_id]), on=["id"])
        elif kind == "overwrite":
            self.t.overwrite(self.batch(2), where=f"id >= {pick[0]} AND id <= {pick[-1]}", require_match=False)
        elif kind == "compact":
            self.t.compact(target_file_size=1 << 20, min_deleted_fraction=0.01)
        else:
            self.schema_change()
        return kind

    def schema_change(self) -> None:
        names = [n for n in self.t.schema.names if n != "id"]
        choices = ["add", "rename"] + (["drop"] if len(names) > 2 else []) + (
            ["widen"] if self.widen and pa.types.is_int32(self.t.schema.field("small").type) else [])
        choice = self.rng.choice(choices) if "small" in names else "add"
        with self.t.update_schema() as s:
            if choice == "add":
                self.extra += 1
                s.add_column(f"extra{self.extra}", pa.int64())
            elif choice == "rename":
                old = self.rng.choice([n for n in names if n != "small"] or names)
                s.rename_column(old, f"{old}_r")
            elif choice == "drop":
                s.drop_column(self.rng.choice([n for n in names if n != "small"]))
            else:
                s.widen("small", pa.int64())


def run_history(t: mt.Table, seed: int, steps: int, widen: bool, gc_every: int = 0) -> list[str]:
    history, kinds = History(t, seed, widen), []
    for i in range(steps):
        try:
            kinds.append(history.step())
        except CommitConflictError:  # a compaction with nothing left to do, say
            kinds.append("conflict")
        if gc_every and i % gc_every == gc_every - 1:
            t.gc(retain_versions=gc_every, retain_for=None, grace=timedelta(0), force=True)
            kinds.append("gc")
    return kinds

"""Corpus cases of schema evolution by field id: add, rename, drop, widen, a name reused,
columns made nullable, merging appends, and segments written under earlier schemas."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from tests.conformance.registry import TINY, Site, case

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.int32())])


def batch(ids: range | list[int], schema: pa.Schema = SCHEMA) -> pa.Table:
    """Rows of ``schema``: each column valued from the id by its type."""
    ids = list(ids)
    columns = {}
    for field in schema:
        t = field.type
        if field.name == "id":
            columns["id"] = ids
        elif pa.types.is_string(t):
            columns[field.name] = [f"{field.name}{i}" for i in ids]
        elif pa.types.is_decimal(t):
            columns[field.name] = [Decimal(i) / 4 for i in ids]
        elif pa.types.is_floating(t):
            columns[field.name] = [i / 8 for i in ids]
        else:
            columns[field.name] = [i % 100 for i in ids]
    return pa.table(columns).cast(schema)


@case(
    "schema-add-column",
    "A column added after files were written: older files read it as null; its stats take a "
    "new field id; the root gains name_mapping.",
    "schema evolution",
    "add column",
    "field ids",
    "name_mapping",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA, properties=TINY)
    table.append(batch(range(4)))
    table.append(batch(range(4, 8)))
    with table.update_schema() as s:
        s.add_column("c", pa.float64())
    table.append(batch(range(8, 11), table.schema))


@case(
    "schema-rename-column",
    "A rename keeps the field id; files written after it still carry the column's physical (first) name.",
    "schema evolution",
    "rename column",
    "physical names",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA, properties=TINY)
    table.append(batch(range(4)))
    with table.update_schema() as s:
        s.rename_column("a", "alpha")
    table.append(batch(range(4, 8), table.schema))
    table.delete("alpha = 'a5'")


@case(
    "schema-drop-column",
    "A dropped column: its data stays in old files and its stats in old segments, never read; its field id is retired.",
    "schema evolution",
    "drop column",
    "segments of earlier schemas",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA, properties=TINY)
    for start in (0, 4, 8):
        table.append(batch(range(start, start + 4)))
    with table.update_schema() as s:
        s.drop_column("b")
    table.append(batch(range(12, 14), table.schema))


@case(
    "schema-widen",
    "Widened columns (int8 to int32, float32 to float64, decimal precision up): older files and "
    "segments hold the narrower type and are cast.",
    "schema evolution",
    "widen",
    "segments of earlier schemas",
)
def _(site: Site) -> None:
    schema = pa.schema([("id", pa.int64()), ("small", pa.int8()), ("f", pa.float32()), ("d", pa.decimal128(5, 2))])
    table = site.table(schema, properties=TINY)
    for start in (0, 3, 6):
        table.append(batch(range(start, start + 3), schema))
    with table.update_schema() as s:
        s.widen("small", pa.int32()).widen("f", pa.float64()).widen("d", pa.decimal128(12, 2))
    table.append(batch([1000], table.schema))
    table.delete("small = 4")


@case(
    "schema-reuse-name",
    "A column dropped and another added under its name: the new column is a new field id whose "
    "files carry it as '<name>_<field id>', so the old data never attaches to it.",
    "schema evolution",
    "drop column",
    "add column",
    "physical names",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA)
    table.append(batch(range(3)))
    with table.update_schema() as s:
        s.drop_column("a")
    with table.update_schema() as s:
        s.add_column("a", pa.int64())
    table.append(batch(range(3, 6), table.schema))


@case(
    "schema-swap-names",
    "Two columns swap names in one schema change: each keeps its field id and its data.",
    "schema evolution",
    "rename column",
)
def _(site: Site) -> None:
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.string())])
    table = site.table(schema)
    table.append(batch(range(3), schema))
    with table.update_schema() as s:
        s.rename_column("a", "tmp").rename_column("b", "a").rename_column("tmp", "b")
    table.append(batch(range(3, 5), table.schema))


@case(
    "schema-merge-append",
    "An append with schema_mode='merge' adds the columns its data has (one commit, operation 'append').",
    "schema evolution",
    "add column",
    "append merge",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA)
    table.append(batch(range(3)))
    wider = pa.schema([*SCHEMA, ("extra", pa.string())])
    table.append(batch(range(3, 6), wider), schema_mode="merge")


@case(
    "schema-required-column",
    "A non-nullable column added while the table has no live rows, then rows with it; and a column made nullable.",
    "schema evolution",
    "nullability",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA)
    with table.update_schema() as s:
        s.add_column("must", pa.int64(), nullable=False)
    table.append(batch(range(3), table.schema))
    with table.update_schema() as s:
        s.set_nullable("must")
    table.append(batch(range(3, 4), table.schema))


@case(
    "schema-history-in-segments",
    "Several schema changes between appends under tiny limits: one version's segments were "
    "written under three schemas.",
    "schema evolution",
    "segments of earlier schemas",
    "segment merges",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA, properties=TINY)
    table.append(batch(range(3)))
    table.append(batch(range(3, 6)))
    with table.update_schema() as s:
        s.add_column("c", pa.int16()).rename_column("a", "a2")
    table.append(batch(range(6, 9), table.schema))
    table.append(batch(range(9, 12), table.schema))
    with table.update_schema() as s:
        s.widen("c", pa.int64()).drop_column("b")
    table.append(batch(range(12, 15), table.schema))
    table.delete("id = 4 OR id = 10")

"""A top-level column whose name holds a dot beside a struct whose field has the same dotted
path (``a.b`` and ``a{b}``): statistics must never be confused between them.

Stored stats are keyed by the top-level column name (v1) or field id (v2 tails, segments and
summaries), never by a dotted path; Parquet footer stats were looked up by
``path_in_schema``, where the two collide, so a row group was pruned by the other column's
bounds (docs/format.md, "File entries")."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidFilterError
from manifest_table.expressions import parse
from manifest_table.format.manifest import manifest_key
from manifest_table.storage import MemoryStore

TOP = pa.field("a.b", pa.int64())
STRUCT = pa.field("a", pa.struct([("b", pa.int64())]))
# One file per row; in each, the top-level column and the struct field hold different values.
ROWS = [(100, 1), (1, 100), (50, 7), (None, 50)]
LAYOUTS = {
    "v1": {"format_version": 1},
    "v2-tail": {},
    "v2-segments": {"properties": {"tail_limit": 1, "segment_target_files": 2, "max_small_segments": 1}},
}


def _table(order: list[pa.Field], layout: str) -> mt.Table:
    schema = pa.schema(order)
    t = mt.create_table("mem://t", schema, store=MemoryStore(), **LAYOUTS[layout])
    for top, inner in ROWS:
        t.append(pa.table({"a.b": [top], "a": [{"b": inner}]}).select(schema.names).cast(schema))
    return t


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", [[TOP, STRUCT], [STRUCT, TOP]], ids=["column-first", "struct-first"])
def test_a_dotted_column_and_a_struct_field_never_share_statistics(order: list[pa.Field], layout: str) -> None:
    t = _table(order, layout)
    data = t.to_arrow()
    for where in ['"a.b" = 100', "a.b = 1", "a.b > 60", "a.b < 10", "a.b IS NULL", "a.b IN (7, 50)"]:
        expected = data.filter(parse(where).evaluate(data))
        assert t.scan(where=where).to_arrow().to_pylist() == expected.to_pylist(), where
        assert t.scan(where=where).count() == expected.num_rows, where
    assert t.scan(where='"a.b" = 100').to_arrow().column("a").to_pylist() == [{"b": 1}]


def test_stored_stats_are_keyed_by_top_level_name_or_field_id() -> None:
    """The stored form (docs/format.md): the entry of ``a.b`` is the top-level column's; the
    struct has only its null count, under its own name or id."""
    v1, v2 = _table([TOP, STRUCT], "v1"), _table([TOP, STRUCT], "v2-tail")
    entry = json.loads(v1.store.get(manifest_key(1)))["files"][0]["stats"]
    assert entry == {"a.b": {"null_count": 0, "min": 100, "max": 100}, "a": {"null_count": 0}}
    tail = json.loads(v2.store.get(manifest_key(1)))["tail"][0]["stats"]
    assert tail == {"1": {"null_count": 0, "min": 100, "max": 100}, "2": {"null_count": 0}}


def test_a_dotted_name_is_a_column_not_a_path_into_a_struct() -> None:
    """Filters compare top-level columns: `a.b` names a column called "a.b", and a struct's
    fields cannot be compared (binding says which columns there are)."""
    t = mt.create_table("mem://t", pa.schema([STRUCT]), store=MemoryStore())
    with pytest.raises(InvalidFilterError, match="unknown column 'a.b' .*; available columns: a$"):
        t.scan(where="a.b = 1")

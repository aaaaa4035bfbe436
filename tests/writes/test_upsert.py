"""Table.upsert / Transaction.upsert: equal to a reference computed in pandas, reads only the
files whose key stats may hold the source keys, refuses duplicate keys without writing."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import manifest_table as mt
from manifest_table.errors import DuplicateKeyError, InvalidArgumentError, SchemaMismatchError
from manifest_table.operations.upsert import IN_LIMIT
from manifest_table.storage import MemoryStore
from tests.stores import CountingStore

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("v", pa.float64()), ("note", pa.string())])


def rows(ids, v: float = 0.0, region: str = "eu") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "region": [region] * len(ids), "v": [v] * len(ids),
                     "note": [f"n{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    table = mt.create_table(tmp_path / "t", SCHEMA)
    for start in range(0, 100, 25):  # four files with disjoint id ranges
        table.append(rows(range(start, start + 25)))
    return table


def data_keys(table: mt.Table) -> set[str]:
    return {o.key for o in table.store.list("data/")}


def sorted_rows(data: pa.Table) -> list[dict]:
    return sorted(data.to_pylist(), key=lambda r: (r["id"] is None, r["id"] or 0, r["region"] or "", r["note"] or ""))


def test_upsert_updates_matches_and_inserts_the_rest(table: mt.Table):
    info = table.upsert(rows([3, 40, 500, 501], v=9.0), on=["id"])
    assert info.operation == "upsert" and info.committed
    assert info.metrics["rows_updated"] == 2 and info.metrics["rows_inserted"] == 2
    assert info.metrics["rows_deleted"] == 2 and info.metrics["rows_added"] == 4
    got = {r["id"]: r["v"] for r in table.to_arrow().to_pylist()}
    assert len(got) == 102 and got[3] == got[40] == got[500] == 9.0 and got[4] == 0.0
    assert info.parameters["upserts"] == [{"on": ["id"], "when_matched": "update", "when_not_matched": "insert"}]


@pytest.mark.parametrize("when_matched, when_not_matched, updated, inserted", [
    ("ignore", "insert", 0, 1), ("update", "ignore", 1, 0), ("ignore", "ignore", 0, 0)])
def test_when_options(table: mt.Table, when_matched, when_not_matched, updated, inserted):
    info = table.upsert(rows([3, 500], v=9.0), on=["id"], when_matched=when_matched,
                        when_not_matched=when_not_matched)
    assert info.metrics["rows_updated"] == updated and info.metrics["rows_inserted"] == inserted
    got = {r["id"]: r["v"] for r in table.to_arrow().to_pylist()}
    assert got[3] == (9.0 if updated else 0.0) and (500 in got) == bool(inserted)
    assert info.committed == bool(updated or inserted)


def test_only_files_whose_key_stats_may_match_are_read():
    store = CountingStore(MemoryStore())
    table = mt.create_table("mem://t", SCHEMA, store=store)
    for start in range(0, 1000, 100):  # ten files of 100 ids each
        table.append(rows(range(start, start + 100)))
    store.reset()
    table.upsert(rows([150, 160, 5000]), on=["id"])
    assert store.reset()[("get", "data")] == 1  # the file of 100..199 only


def test_many_keys_use_a_range_filter(table: mt.Table):
    ids = list(range(50, 50 + IN_LIMIT + 10))
    info = table.upsert(rows(ids, v=1.0), on=["id"])
    assert info.metrics["rows_updated"] == 50 and info.metrics["rows_inserted"] == len(ids) - 50
    assert table.scan().count() == 50 + len(ids)


def test_a_range_filter_holds_both_of_its_ends(table: mt.Table):
    """The range of many keys is closed: the files whose bounds are the smallest and the
    largest source key are read, and their rows updated, not inserted again."""
    table.append(rows([-7]))  # (a file whose max is the smallest key)
    table.append(rows([5000]))  # (and one whose min is the largest)
    ids = [-7, *range(200, 200 + IN_LIMIT), 5000]
    info = table.upsert(rows(ids, v=1.0), on=["id"])
    assert info.metrics["rows_updated"] == 2 and info.metrics["rows_inserted"] == IN_LIMIT
    assert table.scan().count() == 102 + IN_LIMIT
    assert table.scan(where="id IN (-7, 5000)", columns=["v"]).to_arrow().column("v").to_pylist() == [1.0, 1.0]


def test_a_duplicate_key_commits_nothing_and_writes_nothing(table: mt.Table):
    files = data_keys(table)
    with pytest.raises(DuplicateKeyError, match=r"more than once.*'id': 7"):
        table.upsert(rows([7, 8, 7]), on=["id"])
    assert table.version == 4 and data_keys(table) == files


def test_null_keys_never_match_and_are_inserted(tmp_path: Path):
    table = mt.create_table(tmp_path / "n", SCHEMA)
    table.append(pa.table({"id": [1, None], "region": ["eu", "eu"], "v": [0.0, 0.0], "note": ["a", "b"]},
                          schema=SCHEMA))
    source = pa.table({"id": [None, None, 1], "region": ["eu"] * 3, "v": [1.0, 2.0, 3.0], "note": ["c", "d", "e"]},
                      schema=SCHEMA)
    info = table.upsert(source, on=["id"])  # two null keys are not a duplicate: null equals nothing
    assert info.metrics["rows_updated"] == 1 and info.metrics["rows_inserted"] == 2
    assert sorted(r["note"] for r in table.to_arrow().to_pylist()) == ["b", "c", "d", "e"]


def test_composite_keys(table: mt.Table):
    source = pa.concat_tables([rows([5], v=1.0, region="eu"), rows([5], v=2.0, region="us")])
    info = table.upsert(source, on=["id", "region"])
    assert info.metrics["rows_updated"] == 1 and info.metrics["rows_inserted"] == 1
    assert sorted((r["region"], r["v"]) for r in table.scan(where="id = 5").to_arrow().to_pylist()) == [
        ("eu", 1.0), ("us", 2.0)]


def test_a_key_the_target_holds_twice_is_replaced_twice(table: mt.Table):
    """As SQL's MERGE updates every matching target row."""
    table.append(rows([3], v=5.0))
    info = table.upsert(rows([3], v=7.0), on=["id"])
    assert info.metrics["rows_updated"] == 2
    assert [r["v"] for r in table.scan(where="id = 3").to_arrow().to_pylist()] == [7.0, 7.0]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"on": []}, InvalidArgumentError, "at least one key"),
    ({"on": "id"}, InvalidArgumentError, "list of column names"),
    ({"on": ["nope"]}, InvalidArgumentError, "unknown columns"),
    ({"on": ["v"]}, InvalidArgumentError, "keys must be"),
    ({"on": ["id"], "when_matched": "remove"}, InvalidArgumentError, "when_matched must be one of"),
    ({"on": ["id"], "when_not_matched": "update"}, InvalidArgumentError, "when_not_matched must be one of"),
])
def test_bad_arguments(table: mt.Table, kwargs, error, message):
    with pytest.raises(error, match=message):
        table.upsert(rows([1]), **kwargs)
    assert table.version == 4


def test_a_source_of_another_schema_commits_nothing(table: mt.Table):
    with pytest.raises(SchemaMismatchError):
        table.upsert(pa.table({"id": [1]}), on=["id"])
    assert table.version == 4


def test_upsert_in_a_transaction_with_other_changes(table: mt.Table):
    with table.transaction() as tx:
        tx.append(rows([700]))
        counts = tx.upsert(rows([700, 1], v=3.0), on=["id"])  # sees its own staged row
        assert counts == (2, 0)
        tx.delete("id = 2")
    got = {r["id"]: r["v"] for r in table.to_arrow().to_pylist()}
    assert got[700] == got[1] == 3.0 and 2 not in got and len(got) == 100


# --- against pandas ---------------------------------------------------------------------------
KEYS = st.integers(0, 30)
NOTES = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
VALUES = st.one_of(st.none(), st.floats(-5, 5, allow_nan=False))
TARGET = st.lists(st.tuples(st.one_of(st.none(), KEYS), VALUES, NOTES), max_size=30)
SOURCE = st.lists(st.tuples(st.one_of(st.none(), KEYS), VALUES, NOTES), max_size=15)


def as_table(tuples) -> pa.Table:
    return pa.table({"id": [t[0] for t in tuples], "region": ["eu"] * len(tuples),
                     "v": [t[1] for t in tuples], "note": [t[2] for t in tuples]}, schema=SCHEMA)


def reference(target: pd.DataFrame, source: pd.DataFrame, when_matched: str, when_not_matched: str) -> pd.DataFrame:
    """SQL MERGE, in pandas: a null key matches nothing."""
    source_keys = set(source["id"].dropna())
    target_keys = set(target["id"].dropna())
    hit = target["id"].isin(source_keys) & target["id"].notna()
    kept = target[~hit] if when_matched == "update" else target
    parts = [kept]
    if when_matched == "update":
        parts.append(target[hit][["id"]].merge(source, on="id", how="left"))
    if when_not_matched == "insert":
        parts.append(source[~(source["id"].isin(target_keys) & source["id"].notna())])
    return pd.concat(parts, ignore_index=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=TARGET, source=SOURCE, when_matched=st.sampled_from(["update", "ignore"]),
       when_not_matched=st.sampled_from(["insert", "ignore"]), split=st.integers(0, 30))
def test_upsert_equals_a_pandas_reference(target, source, when_matched, when_not_matched, split):
    seen: set[int] = set()
    source = [s for s in source if s[0] is None or not (s[0] in seen or seen.add(s[0]))]  # unique keys
    table = mt.create_table("mem://ref", SCHEMA, store=MemoryStore(), row_group_size=4)
    table.append(as_table(target[:split]))
    table.append(as_table(target[split:]))
    expected = reference(as_table(target).to_pandas(), as_table(source).to_pandas(), when_matched, when_not_matched)
    table.upsert(as_table(source), on=["id"], when_matched=when_matched, when_not_matched=when_not_matched)
    expected_table = pa.Table.from_pandas(expected, schema=SCHEMA, preserve_index=False)
    assert sorted_rows(table.to_arrow()) == sorted_rows(expected_table)


# --- the merge options of issue 23: delete matched rows, delete rows missing from the source, partial updates
def merge_reference(target: list[dict], source: list[dict], when_matched: str, when_not_matched: str,
                    by_source: str, columns: list[str] | None) -> list[dict]:
    """SQL MERGE over rows as dicts, written without our code: a null key matches nothing."""
    by_key = {s["id"]: s for s in source if s["id"] is not None}
    target_keys = {t["id"] for t in target if t["id"] is not None}
    out = []
    for t in target:
        s = by_key.get(t["id"])
        if s is None:
            if by_source == "ignore":
                out.append(t)
        elif when_matched == "update":
            out.append({**t, **{c: s[c] for c in (columns or SCHEMA.names)}})
        elif when_matched == "ignore":
            out.append(t)
    if when_not_matched == "insert":
        out += [{**dict.fromkeys(SCHEMA.names), **s} for s in source if s["id"] not in target_keys or s["id"] is None]
    return out


@settings(max_examples=80, deadline=None)
@given(target=TARGET, source=SOURCE, when_matched=st.sampled_from(["update", "ignore", "delete"]),
       when_not_matched=st.sampled_from(["insert", "ignore"]), by_source=st.sampled_from(["ignore", "delete"]),
       partial=st.booleans(), split=st.integers(0, 30))
def test_merge_options_equal_a_reference(target, source, when_matched, when_not_matched, by_source, partial, split):
    seen: set[int] = set()
    source = [s for s in source if s[0] is None or not (s[0] in seen or seen.add(s[0]))]  # unique keys
    columns = ["v"] if partial and when_matched == "update" else None
    table = mt.create_table("mem://merge", SCHEMA, store=MemoryStore(), row_group_size=4)
    table.append(as_table(target[:split]))
    table.append(as_table(target[split:]))
    old_files = {f.path for f in table.manifest().files}
    source_table = as_table(source).select(["id", "v"]) if columns else as_table(source)
    expected = merge_reference(as_table(target).to_pylist(), source_table.to_pylist(), when_matched,
                               when_not_matched, by_source, columns)
    info = table.upsert(source_table, on=["id"], when_matched=when_matched, when_not_matched=when_not_matched,
                        when_not_matched_by_source=by_source, columns=columns)
    assert sorted_rows(table.to_arrow()) == sorted_rows(pa.Table.from_pylist(expected, schema=SCHEMA))
    assert old_files <= {f.path for f in table.manifest().files}  # merge-on-read: none rewritten
    if info.committed:
        m = info.metrics
        assert m.get("rows_deleted", 0) == m["rows_updated"] + m["rows_removed"]


def test_a_snapshot_sync_deletes_missing_rows_and_null_keys(table: mt.Table):
    table.append(pa.table({"id": [None], "region": ["eu"], "v": [1.0], "note": ["null key"]}, schema=SCHEMA))
    info = table.upsert(rows([1, 2, 500], v=9.0), on=["id"], when_not_matched_by_source="delete")
    assert sorted_rows(table.to_arrow()) == sorted_rows(rows([1, 2, 500], v=9.0))
    assert (info.metrics["rows_updated"], info.metrics["rows_inserted"], info.metrics["rows_removed"]) == (2, 1, 99)
    assert table.history(limit=1)[0].operation == "upsert"


def test_matched_rows_can_be_deleted(table: mt.Table):
    info = table.upsert(rows([3, 4, 600]), on=["id"], when_matched="delete", when_not_matched="ignore")
    assert info.metrics["rows_removed"] == 2 and info.metrics["rows_inserted"] == 0
    ids = set(table.to_arrow().column("id").to_pylist())
    assert 3 not in ids and 4 not in ids and 600 not in ids and len(ids) == 98


def test_matched_rows_and_rows_missing_from_the_source_are_both_deleted_from_one_file(table: mt.Table):
    """Each file's two sets of deleted positions are joined: the matched rows of a file and
    the rows of that same file the source lacks (the property test above drew a case where
    one replaced the other about one run in three)."""
    info = table.upsert(rows([3, 4, 600]), on=["id"], when_matched="delete", when_not_matched="ignore",
                        when_not_matched_by_source="delete")
    assert table.scan().count() == 0 and info.metrics["rows_removed"] == 100


def test_a_source_of_keys_alone_deletes_or_keeps_matches(table: mt.Table):
    """When no source row is written, the source needs only the keys (as deltalake's
    when_matched_delete); a source that would write rows still needs every column."""
    keys = pa.table({"id": [3, 4, 600]})
    info = table.upsert(keys, on=["id"], when_matched="delete", when_not_matched="ignore")
    assert info.metrics["rows_removed"] == 2
    version = table.version
    assert table.upsert(keys, on=["id"], when_matched="ignore", when_not_matched="ignore").committed is False
    assert {3, 4}.isdisjoint(table.to_arrow().column("id").to_pylist())
    with pytest.raises(SchemaMismatchError, match="region"):
        table.upsert(keys, on=["id"], when_matched="delete")  # inserts whole rows: every column
    with pytest.raises(SchemaMismatchError, match=r"lacks columns \['id'\]: it needs the keys \['id'\]"):
        table.upsert(pa.table({"v": [1.0]}), on=["id"], when_matched="delete", when_not_matched="ignore")
    assert table.version == version


def test_a_partial_update_keeps_the_other_columns(table: mt.Table):
    source = pa.table({"id": [5, 700], "v": [2.5, 3.5]})
    info = table.upsert(source, on=["id"], columns=["v"])
    assert (info.metrics["rows_updated"], info.metrics["rows_inserted"]) == (1, 1)
    got = {r["id"]: r for r in table.to_arrow().to_pylist()}
    assert got[5] == {"id": 5, "region": "eu", "v": 2.5, "note": "n5"}
    assert got[700] == {"id": 700, "region": None, "v": 3.5, "note": None}


@pytest.mark.parametrize("kwargs, source, error, message", [
    ({"columns": ["v"], "when_matched": "ignore"}, rows([1]), InvalidArgumentError, "needs when_matched='update'"),
    ({"columns": ["id"]}, rows([1]), InvalidArgumentError, "besides the keys"),
    ({"columns": ["vv"]}, rows([1]), InvalidArgumentError, "did you mean 'v'"),
    ({"columns": ["v", "note"]}, pa.table({"id": [1], "v": [1.0]}), SchemaMismatchError, "lacks columns \\['note'\\]"),
    ({"when_not_matched_by_source": "remove"}, rows([1]), InvalidArgumentError, "must be one of"),
    ({"when_matched": "replace"}, rows([1]), InvalidArgumentError, "must be one of"),
    ({}, pa.table({"id": [1], "v": [1.0]}), SchemaMismatchError, "missing columns"),
])
def test_bad_merge_options_commit_nothing(table: mt.Table, kwargs, source, error, message):
    version, files = table.version, data_keys(table)
    with pytest.raises(error, match=message):
        table.upsert(source, on=["id"], **kwargs)
    assert table.version == version and data_keys(table) == files


def test_inserts_need_the_non_nullable_columns(tmp_path: Path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.float64()),
                        pa.field("name", pa.string(), nullable=False)])
    table = mt.create_table(tmp_path / "t", schema)
    table.append(pa.table({"id": [1], "v": [1.0], "name": ["a"]}, schema=schema))
    table.upsert(pa.table({"id": [1], "v": [2.0]}), on=["id"], columns=["v"], when_not_matched="insert")
    assert table.to_arrow().to_pylist() == [{"id": 1, "v": 2.0, "name": "a"}]
    with pytest.raises(SchemaMismatchError, match="non-nullable columns \\['name'\\]"):
        table.upsert(pa.table({"id": [2], "v": [2.0]}), on=["id"], columns=["v"])


def test_a_partial_update_keeps_nested_columns(tmp_path: Path):
    """Arrow's hash join refuses list and struct payload columns: the other columns are taken
    by row index after a join of keys and positions only."""
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string())),
                        ("point", pa.struct([("x", pa.int64())])), ("v", pa.float64())])
    table = mt.create_table(tmp_path / "t", schema)
    table.append(pa.table({"id": [1, 2], "tags": [["a"], None], "point": [{"x": 1}, {"x": 2}], "v": [0.0, 0.0]},
                          schema=schema))
    table.upsert(pa.table({"id": [2, 3], "v": [5.0, 6.0]}), on=["id"], columns=["v"],
                 when_not_matched_by_source="delete")
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "tags": None, "point": {"x": 2}, "v": 5.0}, {"id": 3, "tags": None, "point": None, "v": 6.0}]

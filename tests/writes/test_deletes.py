"""Deletes by tombstone, overwrite, transactions and the conflict matrix."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyroaring import BitMap

import manifest_table as mt
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.errors import CommitConflictError, InvalidFilterError
from manifest_table.storage import MemoryStore
from tests.stores import CountingStore

SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string()), ("amount", pa.float64())])


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table({"id": ids, "country": ["DE" if i % 2 else "FR" for i in ids],
                     "amount": [float(i) for i in ids]}, schema=SCHEMA)


def ids(table: mt.Table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


@pytest.fixture
def table(store) -> mt.Table:
    t = mt.create_table("test://t", SCHEMA, store=store)
    t.append(rows(0, 50))
    t.append(rows(50, 100))
    return t


def test_delete_writes_a_tombstone_and_never_rewrites_data(table):
    data_before = {f.path for f in table.manifest().files}
    info = table.delete("id < 10 OR id >= 95")
    assert (info.operation, info.metrics["rows_deleted"]) == ("delete", 15)
    manifest = table.manifest()
    assert {f.path for f in manifest.files} == data_before
    assert sorted(f.deleted_rows for f in manifest.files) == [5, 10]
    assert ids(table) == list(range(10, 95))
    assert table.scan().count() == 85
    assert ids(table, version=2) == list(range(100))  # time travel sees the rows as they were


def test_second_delete_on_a_file_writes_the_union(table):
    table.delete("id = 1")
    table.delete("id = 2")
    first = next(f for f in table.manifest().files if f.rows and f.deletes and f.deleted_rows)
    assert first.deleted_rows == 2
    assert DeletionVectors(table.store).of(first) == BitMap([1, 2])
    assert ids(table)[:3] == [0, 3, 4]


def test_deleting_nothing_commits_nothing(table):
    info = table.delete("id > 1000")
    assert not info.committed and info.metrics["rows_deleted"] == 0 and table.version == 2
    table.delete("id = 5")
    assert not table.delete("id = 5").committed  # already deleted


def test_builder_expressions(table):
    table.delete((mt.col("id") > 90) & mt.col("country").isin(["DE"]))
    assert not set(ids(table)) & {91, 93, 95, 97, 99}
    assert set(ids(table, where=~(mt.col("id") < 90))) == {90, 92, 94, 96, 98}


def test_count_without_filter_reads_no_data():
    store = CountingStore(MemoryStore())
    t = mt.create_table("mem://t", SCHEMA, store=store)
    t.append(rows(0, 100))
    t.delete("id < 7")
    store.reset()
    assert mt.open_table("mem://t", store=store).scan().count() == 93
    counts = store.reset()
    assert counts[("get", "data")] == 0 and counts[("get", "tombstone")] == 0


def test_delete_one_row_opens_only_matching_files():
    store = CountingStore(MemoryStore())
    t = mt.create_table("mem://t", SCHEMA, store=store)
    with t.transaction() as tx:
        for start in range(0, 10_000, 100):
            tx.append(rows(start, start + 100))
    assert len(t.manifest().files) == 100
    store.reset()
    info = t.delete("id = 4242")
    counts = store.reset()
    assert info.metrics["rows_deleted"] == 1
    assert counts[("get", "data")] == 1  # 1 of 100 files opened
    assert counts[("put", "tombstone")] == 1 and counts[("put", "data")] == 0
    assert 4242 not in ids(t)


BAD_FILTERS = [
    ("", "empty"),
    ("id >", "expected"),
    ("nope = 1", "nope"),
    ("id = 'x'", "id"),
    ("country > 3", "country"),
    ("amount LIKE 'a%'", "amount"),
    ("id = NULL", "IS NULL"),
    ("(id = 1", "expected"),
    ("id = 1 AND", "expected"),
    ("id IN ()", "expected"),
    ("id BETWEEN 1", "AND"),
    ("id = DATE '2024-01-01'", "id"),  # (id = 1.5 is valid SQL: false for every integer)
]


@pytest.mark.parametrize("text,named", BAD_FILTERS)
def test_bad_filters_raise_and_change_nothing(text, named):
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore())
    t.append(rows(0, 10))
    for attempt in (lambda: t.delete(text), lambda: t.scan(where=text).to_arrow(),
                    lambda: t.overwrite(rows(0, 1), where=text)):
        with pytest.raises(InvalidFilterError) as err:
            attempt()
        assert named.lower() in str(err.value).lower()
    assert t.version == 1 and t.scan().count() == 10
    assert len(list(t.store.list("data/"))) == 1  # the overwrite's data was never written


def test_filter_of_wrong_kind():
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore())
    with pytest.raises(InvalidFilterError):
        t.delete(42)
    with pytest.raises(InvalidFilterError):
        t.delete(None)


def test_overwrite_all_and_by_predicate(table):
    info = table.overwrite(rows(500, 502))
    assert info.operation == "overwrite" and info.metrics["rows_deleted"] == 100
    assert ids(table) == [500, 501]
    table.append(rows(0, 5))
    table.overwrite(rows(600, 601), where="id < 3 OR id >= 600")
    assert ids(table) == [3, 4, 500, 501, 600]
    assert ids(table, version=2) == list(range(100))


def test_transaction_sees_its_own_changes_and_commits_once(table):
    with table.transaction() as tx:
        tx.append(rows(100, 110))
        assert tx.delete("id >= 95 AND id < 105") == 10
        assert tx.scan(where="id >= 90").count() == 10
        assert table.version == 2  # nothing visible outside yet
    assert table.version == 3 and table.history(limit=1)[0].operation == "transaction"
    assert ids(table, where="id >= 90") == [90, 91, 92, 93, 94, 105, 106, 107, 108, 109]


def test_exception_in_transaction_commits_nothing_and_removes_staged_files(table):
    objects = {o.key for o in table.store.list()}
    with pytest.raises(ZeroDivisionError):
        with table.transaction() as tx:
            tx.append(rows(100, 200))
            tx.delete("id < 50")
            1 / 0
    assert table.version == 2 and ids(table) == list(range(100))
    assert {o.key for o in table.store.list()} == objects


# --- the conflict matrix, driven deterministically: stage on version N, let another commit win ---
def test_concurrent_deletes_on_the_same_file_both_take_effect(table):
    tx = table.transaction()
    tx.delete("id = 1")
    table.delete("id = 2")
    info = tx.commit()
    assert info.version == 4 and info.metrics["rows_deleted"] == 1
    assert ids(table)[:3] == [0, 3, 4]


def test_delete_never_conflicts_with_append(table):
    tx = table.transaction()
    tx.delete("id >= 0")
    table.append(rows(100, 101))
    tx.commit()
    assert ids(table) == [100]  # the append's rows were not read, so they stay


def test_overwrite_conflicts_with_an_append_matching_its_predicate(table):
    tx = table.transaction()
    tx.overwrite(rows(900, 901), where="id < 10 OR id = 900")
    table.append(rows(5, 6))
    with pytest.raises(CommitConflictError, match="version 3") as err:
        tx.commit()
    assert "data/" in str(err.value)
    assert table.version == 3 and 900 not in ids(table)


def test_overwrite_ignores_an_append_outside_its_predicate(table):
    tx = table.transaction()
    tx.overwrite(rows(900, 901), where="id < 10 OR id = 900")
    table.append(rows(5000, 5001))
    tx.commit()
    assert 900 in ids(table) and 5000 in ids(table) and 5 not in ids(table)


def test_overwrite_conflicts_with_a_delete_on_its_files(table):
    tx = table.transaction()
    tx.overwrite(rows(900, 901), where="id < 10 OR id = 900")
    table.delete("id = 3")
    with pytest.raises(CommitConflictError):
        tx.commit()


def test_delete_conflicts_with_an_overwrite_that_removed_its_files(table):
    tx = table.transaction()
    tx.delete("id = 3")
    table.overwrite(rows(0, 1))
    with pytest.raises(CommitConflictError, match="removed files"):
        tx.commit()
    assert ids(table) == [0]

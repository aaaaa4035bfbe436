"""Transactions that never half-succeed: an operation that raises stages nothing and leaves
no file behind; positions are checked against their file; a transaction's own scans count
what it staged; an overwrite's condition is compared as the column's type when checking
conflicts; a replayed streaming batch leaves nothing behind."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap

import manifest_table as mt
from manifest_table.errors import (
    CommitConflictError,
    CorruptTableError,
    InvalidArgumentError,
    ManifestTableError,
    SchemaMismatchError,
)
from manifest_table.storage import LocalStore, MemoryStore

SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2)), ("day", pa.date32()),
                    ("ts", pa.timestamp("us", "UTC")), ("x", pa.float64())])
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def rows(start: int, stop: int, **fixed: Any) -> pa.Table:
    ids = list(range(start, stop))
    columns = {"id": ids, "d": [Decimal(i) / 4 for i in ids], "day": [date(2024, 1, 1 + i % 28) for i in ids],
               "ts": [T0 + timedelta(hours=i) for i in ids], "x": [i / 2 for i in ids]}
    columns.update({name: [value] * len(ids) for name, value in fixed.items()})
    return pa.table(columns, schema=SCHEMA)


@pytest.fixture(params=["local", "memory"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> mt.Table:
    store = LocalStore(tmp_path / "t") if request.param == "local" else MemoryStore()
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, store=store)
    t.append(rows(0, 100))
    return t


def data_keys(t: mt.Table) -> set[str]:
    return {info.key for info in t.store.list("data/")}


def referenced(t: mt.Table) -> set[str]:
    return {f.path for f in t.manifest().files}


def ids(t: mt.Table | mt.Transaction) -> list[int]:
    return sorted(t.scan(columns=["id"]).to_arrow().column("id").to_pylist())


# --- item 2: positions past a file's end -----------------------------------------------------
@pytest.mark.parametrize("positions", [[1000], [99, 100], [2**32 - 1]])
def test_positions_past_the_end_are_refused_and_stage_nothing(table: mt.Table, positions: list[int]) -> None:
    path = table.manifest().files[0].path
    with table.transaction() as tx:
        tx.delete_positions({path: BitMap([3])})
        with pytest.raises(InvalidArgumentError, match=r"past the end of .* which has 100 rows"):
            tx.delete_positions({path: BitMap(positions)})
        assert tx.scan().count() == 99
    assert table.scan().count() == 99 and table.scan().to_arrow().num_rows == 99


def test_positions_in_a_file_the_version_does_not_hold_are_refused_and_stage_nothing(table: mt.Table) -> None:
    path = table.manifest().files[0].path
    stranger = f"data/{uuid.uuid4().hex}.parquet"  # (a data key's shape, never written)
    with table.transaction() as tx:
        tx.delete_positions({path: BitMap([3])})
        with pytest.raises(ManifestTableError, match=f"not data files of version 1: \\['{stranger}'\\]"):
            tx.delete_positions({path: BitMap([4]), stranger: BitMap([0])})
        assert tx.scan().count() == 99
    assert ids(table) == [i for i in range(100) if i != 3]


def test_positions_in_a_file_the_transaction_removed_are_refused(table: mt.Table) -> None:
    path = table.manifest().files[0].path
    with table.transaction() as tx:
        tx.overwrite(rows(200, 203))  # (every file of the version goes)
        with pytest.raises(ManifestTableError, match=f"not data files of version 1: \\['{path}'\\]"):
            tx.delete_positions({path: BitMap([0])})
        assert ids(tx) == [200, 201, 202]
    assert ids(table) == [200, 201, 202]


def test_last_position_is_accepted(table: mt.Table) -> None:
    path = table.manifest().files[0].path
    with table.transaction() as tx:
        assert tx.delete_positions({path: BitMap([0, 99])}) == 2
    assert ids(table) == list(range(1, 99))


# --- item 3: every operation all or nothing ----------------------------------------------------
def test_failed_overwrite_with_condition_keeps_nothing_of_its_delete(table: mt.Table) -> None:
    with table.transaction() as tx:
        tx.append(rows(100, 110))
        with pytest.raises(SchemaMismatchError):
            tx.overwrite([{"id": 0.5}], where="id < 50")
        assert tx.scan().count() == 110
    assert ids(table) == list(range(110))
    assert table.history(1)[0].operation == "append"  # no overwrite (nor its predicate) was recorded
    assert data_keys(table) == referenced(table)


def test_failed_overwrite_keeps_the_deletes_staged_before_it_in_the_same_file(table: mt.Table) -> None:
    """The transaction restores what it had staged in the file the failed overwrite deleted
    from too: its positions are a copy, not the bitmap the overwrite added to."""
    with table.transaction() as tx:
        tx.delete("id = 3")
        with pytest.raises(SchemaMismatchError):
            tx.overwrite([{"id": 0.5}], where="id < 50")
        assert tx.scan().count() == 99
    assert ids(table) == [i for i in range(100) if i != 3]
    assert data_keys(table) == referenced(table)


def test_failed_overwrite_of_everything_keeps_earlier_appends_and_their_files(table: mt.Table) -> None:
    with table.transaction() as tx:
        tx.append(rows(100, 110))
        staged = data_keys(table) - referenced(table)
        with pytest.raises(SchemaMismatchError):
            tx.overwrite(pa.table({"id": [1.5]}))
        assert data_keys(table) - referenced(table) == staged  # the append's file is still there
        assert tx.scan().count() == 110
    assert ids(table) == list(range(110))
    assert data_keys(table) == referenced(table)


def test_overwrite_of_everything_removes_the_appends_it_replaces(table: mt.Table) -> None:
    with table.transaction() as tx:
        tx.append(rows(100, 110))
        replaced = data_keys(table) - referenced(table)
        tx.overwrite(rows(500, 505))
        assert not replaced & data_keys(table)  # removed at once, not left for GC
    assert ids(table) == list(range(500, 505))


def test_stream_failing_midway_in_a_transaction_stages_nothing(table: mt.Table) -> None:
    small = mt.open_table(table.uri, store=table.store, target_file_size=1, row_group_size=64)
    written: list[int] = []

    def batches():
        for start in range(100, 160, 10):
            written.append(start)
            yield from rows(start, start + 10).to_batches()
        raise ValueError("the source broke")

    with small.transaction() as tx:
        tx.append(rows(100, 105))
        before = data_keys(table)
        with pytest.raises(ValueError, match="the source broke"):
            tx.append(pa.RecordBatchReader.from_batches(SCHEMA, batches()))
        assert len(written) == 6 and data_keys(table) == before  # several files were written, then removed
        assert tx.scan().count() == 105
    assert ids(table) == list(range(105))


def test_delete_failing_midway_stages_nothing(table: mt.Table) -> None:
    table.append(rows(100, 200))
    with table.transaction() as tx:
        table.store.delete(tx.scan().plan_files()[1].path)  # as if deleted by hand: the latest version is damaged
        with pytest.raises(CorruptTableError, match="references .*, which is missing"):
            tx.delete("id >= 0")  # reads the first file (staging its rows), then fails on the second
        assert tx.scan().count() == 200
        info = tx.commit()
    assert not info.committed


def test_failed_add_files_stages_nothing_and_keeps_the_callers_files(table: mt.Table) -> None:
    existing = table.manifest().files[0]
    with table.transaction() as tx:
        with pytest.raises(ManifestTableError, match="already part of the table"):
            tx.add_files([existing])
        assert not tx.commit().committed
    assert existing.path in data_keys(table)


# --- item 5: counts inside a transaction ---------------------------------------------------------
def _delete(tx: mt.Transaction) -> None:
    tx.delete("id < 10")


def _overwrite_where(tx: mt.Transaction) -> None:
    tx.overwrite(rows(1000, 1003), where="id >= 90")


def _delete_own_rows(tx: mt.Transaction) -> None:
    tx.append(rows(100, 120))
    tx.delete("id >= 110")


def _delete_positions(tx: mt.Transaction) -> None:
    path = tx.scan().plan_files()[0].path
    tx.delete_positions({path: BitMap(range(0, 100, 2))})


def _delete_positions_already_deleted(tx: mt.Transaction) -> None:
    path = tx.scan().plan_files()[0].path
    tx.delete_positions({path: BitMap([0, 1, 2])})  # 0 and 1 are already deleted (see below)


@pytest.mark.parametrize("operation, expected", [
    (_delete, 90), (_overwrite_where, 98 - 10 + 3), (_delete_own_rows, 98 + 10), (_delete_positions, 49),
    (_delete_positions_already_deleted, 97)])
def test_transaction_count_sees_its_staged_deletes(table: mt.Table, operation: Callable[[mt.Transaction], None],
                                                   expected: int) -> None:
    table.delete("id < 2")
    with table.transaction() as tx:
        operation(tx)
        assert tx.scan().count() == expected
        assert tx.scan().to_arrow().num_rows == expected
    assert table.scan().count() == table.scan().to_arrow().num_rows == expected


# --- item 7: an overwrite's condition is bound for conflict checks -------------------------------
@pytest.mark.parametrize("where, concurrent", [
    ("d = 1.1", {"d": Decimal("1.10")}),
    ("d >= 1.1", {"d": Decimal("1.10")}),
    ("d IN (1.1, 7.3)", {"d": Decimal("7.30")}),
    ("d BETWEEN 1.1 AND 1.2", {"d": Decimal("1.10")}),
    ("id = 5000.0", {"id": 5000}),
    ("day = DATE '2024-02-01'", {"day": date(2024, 2, 1)}),
    ("ts = TIMESTAMP '2024-03-01 01:00:00+01:00'", {"ts": datetime(2024, 3, 1, tzinfo=UTC)}),
    ("x = 0.5e4", {"x": 5000.0}),
])
def test_overwrite_conflicts_with_a_concurrent_append_its_condition_matches(
        table: mt.Table, where: str, concurrent: dict[str, Any]) -> None:
    tx = table.transaction()
    tx.overwrite(rows(2000, 2001, **concurrent), where=where)
    table.append(rows(5000, 5001, **concurrent))
    with pytest.raises(CommitConflictError, match="may match this commit's condition"):
        tx.commit()
    assert 5000 in ids(table) and 2000 not in ids(table)


def test_overwrite_rebases_over_an_append_its_condition_cannot_match(table: mt.Table) -> None:
    tx = table.transaction()
    tx.overwrite(rows(2000, 2001, d=Decimal("1.10")), where="d = 1.1")
    table.append(rows(5000, 5001, d=Decimal("1.20")))
    assert tx.commit().committed
    assert 2000 in ids(table) and 5000 in ids(table)


def test_an_update_of_every_row_after_a_conditioned_one_conflicts_with_any_concurrent_append(table: mt.Table) -> None:
    """The second update has no condition, so the transaction read every row: an append of
    rows the first condition cannot match still makes its commit fail."""
    tx = table.transaction()
    tx.update(values={"x": 1.0}, where="id = 5")
    tx.update(values={"x": 2.0})
    table.append(rows(5000, 5001))
    with pytest.raises(CommitConflictError, match="may match this commit's condition"):
        tx.commit()
    assert 5000 in ids(table) and set(table.scan(columns=["x"]).to_arrow().column("x").to_pylist()) != {2.0}


def test_a_transactions_conditions_add_up_for_conflicts(table: mt.Table) -> None:
    """Two updates with conditions: a concurrent append that only the first one's condition
    matches makes the commit fail, as one that matches the second's does."""
    tx = table.transaction()
    tx.update(values={"x": 1.0}, where="id = 5000")
    tx.update(values={"x": 2.0}, where="id = 7")
    table.append(rows(5000, 5001))
    with pytest.raises(CommitConflictError, match="may match this commit's condition"):
        tx.commit()
    assert table.scan(where="id IN (7, 5000)", columns=["x"]).to_arrow().column("x").to_pylist() == [3.5, 2500.0]


# --- item 10: a replayed streaming batch leaves nothing behind ----------------------------------
def test_replayed_batch_removes_its_staged_files(table: mt.Table) -> None:
    with table.transaction() as tx:
        tx.set_app_transaction("stream", 7)
        tx.append(rows(100, 110))
    with table.transaction() as replay:  # the batch again, after it committed
        replay.set_app_transaction("stream", 7)
        replay.append(rows(100, 110))
        info = replay.commit()
    assert not info.committed
    assert data_keys(table) == referenced(table)
    assert ids(table) == list(range(110))


def test_replayed_batch_found_while_rebasing_removes_its_staged_files(table: mt.Table) -> None:
    first, replay = table.transaction(), table.transaction()
    for tx in (first, replay):
        tx.set_app_transaction("stream", 7)
        tx.append(rows(100, 110))
    first.commit()
    assert not replay.commit().committed
    assert data_keys(table) == referenced(table)
    assert ids(table) == list(range(110))

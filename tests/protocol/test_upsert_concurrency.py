"""Update and upsert are serializable against the rows they read, as overwrite(where=...) is:
a concurrent append of a matching key (or of a row the condition may match) conflicts, a
concurrent delete of other rows rebases, a concurrent delete of a row they replace conflicts.
On the local-directory store, whose conditional writes are atomic across threads."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CommitConflictError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def rows(ids, v: int = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    table = mt.create_table(tmp_path / "t", SCHEMA)
    table.append(rows(range(0, 50)))    # one file: 0..49
    table.append(rows(range(50, 100)))  # another: 50..99
    return table


def live(table: mt.Table) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for r in table.to_arrow().to_pylist():
        found.setdefault(r["id"], []).append(r["v"])
    return found


def data_keys(table: mt.Table) -> set[str]:
    return {o.key for o in table.store.list("data/")}


def referenced(table: mt.Table) -> set[str]:
    return {f.path for f in table.manifest().files}


def staged(table: mt.Table, operation: str) -> mt.Transaction:
    tx = table.transaction()
    if operation == "upsert":
        tx.upsert(rows([10, 500], v=1), on=["id"])
    else:
        tx.update({"v": "v + 1"}, where="id = 10")
    return tx


@pytest.mark.parametrize("operation", ["upsert", "update"])
def test_a_concurrent_append_of_a_matching_key_conflicts(table: mt.Table, operation: str):
    tx = staged(table, operation)
    table.append(rows([10], v=7))  # another writer adds a second version of key 10
    with pytest.raises(CommitConflictError, match="may match this commit's condition"):
        tx.commit()
    assert live(table)[10] == [0, 7] and 500 not in live(table)
    assert data_keys(table) == referenced(table)  # the loser's files are gone


@pytest.mark.parametrize("operation", ["upsert", "update"])
def test_a_concurrent_append_of_other_keys_rebases(table: mt.Table, operation: str):
    tx = staged(table, operation)
    table.append(rows([7000]))
    assert tx.commit().committed
    assert live(table)[10] == [1] and 7000 in live(table)


@pytest.mark.parametrize("operation", ["upsert", "update"])
@pytest.mark.parametrize("other", [11, 60], ids=["same file", "other file"])
def test_a_concurrent_delete_of_other_rows_rebases(table: mt.Table, operation: str, other: int):
    tx = staged(table, operation)
    table.delete(f"id = {other}")
    info = tx.commit()
    assert info.committed and info.metrics["rows_deleted"] == 1  # our own delete, after the rebase
    found = live(table)
    assert found[10] == [1] and other not in found and len(found) == (100 if operation == "upsert" else 99)


@pytest.mark.parametrize("operation", ["upsert", "update"])
def test_a_concurrent_delete_of_a_replaced_row_conflicts(table: mt.Table, operation: str):
    tx = staged(table, operation)
    table.delete("id = 10")
    with pytest.raises(CommitConflictError, match="changed rows this commit read"):
        tx.commit()
    assert 10 not in live(table)  # not resurrected
    assert data_keys(table) == referenced(table)


def test_racing_upserts_of_one_key_leave_one_live_version(table: mt.Table):
    """Threads upsert the same keys (retrying on conflict) while others append new keys:
    at the end every key has exactly one live row."""
    errors: list[BaseException] = []

    def upserter(value: int) -> None:
        try:
            for _ in range(4):
                while True:
                    try:
                        mt.open_table(table.uri).upsert(rows([5, 55, 1000], v=value), on=["id"])
                        break
                    except CommitConflictError:
                        continue
        except BaseException as exc:
            errors.append(exc)

    def appender() -> None:
        try:
            for i in range(6):
                mt.open_table(table.uri).append(rows([2000 + i]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=upserter, args=(v,)) for v in (1, 2, 3)] + [threading.Thread(target=appender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[0]
    counts = Counter(r["id"] for r in table.to_arrow().to_pylist())
    assert set(counts.values()) == {1} and len(counts) == 100 + 1 + 6


# --- the merge options (issue 23): each commit must equal its serial replay in version order
def test_a_snapshot_sync_conflicts_with_any_concurrent_append(table: mt.Table):
    """Replayed after the winner, the sync would have deleted the appended key 7000."""
    tx = table.transaction()
    tx.upsert(rows([10, 500], v=1), on=["id"], when_not_matched_by_source="delete")
    table.append(rows([7000]))
    with pytest.raises(CommitConflictError, match="may match this commit's condition"):
        tx.commit()
    assert 7000 in live(table) and len(live(table)) == 101
    assert data_keys(table) == referenced(table)


def test_a_snapshot_sync_conflicts_with_a_delete_of_a_row_it_removes(table: mt.Table):
    tx = table.transaction()
    tx.upsert(rows([10]), on=["id"], when_not_matched_by_source="delete")
    table.delete("id = 60")
    with pytest.raises(CommitConflictError, match="changed rows this commit read"):
        tx.commit()


@pytest.mark.parametrize("winner, conflict", [("append 10", True), ("delete 10", True), ("delete 11", False),
                                              ("append 7000", False)])
def test_deleting_matches_is_serializable(table: mt.Table, winner: str, conflict: bool):
    tx = table.transaction()
    tx.upsert(rows([10, 500]), on=["id"], when_matched="delete")
    kind, key = winner.split()
    table.append(rows([int(key)], v=7)) if kind == "append" else table.delete(f"id = {key}")
    if conflict:
        with pytest.raises(CommitConflictError):
            tx.commit()
        return
    assert tx.commit().committed
    found = live(table)
    assert 10 not in found and found[500] == [0] and (7000 in found) == (key == "7000")


def test_ignoring_matches_conflicts_with_a_delete_of_a_matched_row(table: mt.Table):
    """Replayed after the winner's delete of key 10, ``when_matched="ignore"`` would have
    inserted the source's key 10: rebasing would silently lose it."""
    tx = table.transaction()
    tx.upsert(rows([10, 500], v=1), on=["id"], when_matched="ignore")
    table.delete("id = 10")
    with pytest.raises(CommitConflictError, match="changed rows this commit read"):
        tx.commit()
    tx = table.transaction()
    tx.upsert(rows([20, 501], v=1), on=["id"], when_matched="ignore")
    table.delete("id = 21")  # another row of the same file: rebases
    assert tx.commit().committed and live(table)[20] == [0] and live(table)[501] == [1]

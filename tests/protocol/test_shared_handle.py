"""One table handle shared by threads (docs/python-api.md, "Threads and processes"): each
call is its own snapshot and commit, racing the others through the pointer as separate
writers do; every acknowledged change lands once. Checked against a model of each thread's
own rows."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

import manifest_table as mt

THREADS, STEPS = 4, 15


def _work(table: mt.Table, worker: int, errors: list[BaseException]) -> None:
    try:
        for i in range(STEPS):
            table.append(pa.table({"id": [i], "w": [worker]}))
            if i % 5 == 4:
                table.delete(f"w = {worker} AND id = {i - 1}")
            if i % 7 == 6:
                table.update(values={"id": 100 + i}, where=f"w = {worker} AND id = {i}")
    except BaseException as exc:  # (reported by the test, not lost with the thread)
        errors.append(exc)


def _model(worker: int) -> list[tuple[int, int]]:
    ids: set[int] = set()
    for i in range(STEPS):
        ids.add(i)
        if i % 5 == 4:
            ids.discard(i - 1)
        if i % 7 == 6:
            ids.discard(i)
            ids.add(100 + i)
    return [(worker, i) for i in sorted(ids)]


def test_threads_sharing_one_handle_lose_no_commit(tmp_path: Path) -> None:
    table = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("w", pa.int64())]))
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_work, args=(table, w, errors)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    got = table.scan().to_arrow()
    assert sorted(zip(got["w"].to_pylist(), got["id"].to_pylist())) == [r for w in range(THREADS) for r in _model(w)]
    # One version per change that matched rows: the appends, the deletes and updates (the
    # delete of step 14 finds id 13 already updated away).
    assert table.version == THREADS * (STEPS + 3 + 2 - 1)
    assert mt.open_table(str(tmp_path / "t")).scan().to_arrow().num_rows == got.num_rows

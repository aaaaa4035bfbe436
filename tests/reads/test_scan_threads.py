"""The threads that read a scan's files (data/scan.py, ``_FILE_READERS``): one pool shared by
the scans of a process. Scans in several threads each get every row in plan order, and a scan
its consumer stops early leaves none of its reads running."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

import manifest_table as mt
from manifest_table.storage import LocalStore
from tests.stores import WrappedStore, kind_of

FILES = 6


class SlowDataReads(WrappedStore):
    """Data files read whole through the store (no Arrow filesystem), each read taking
    ``seconds``; counts the reads under way."""

    def __init__(self, inner: LocalStore, seconds: float) -> None:
        super().__init__(inner)
        self.seconds, self.reading = seconds, 0
        self._lock = threading.Lock()

    def arrow_filesystem(self):
        return None

    def get(self, key: str) -> bytes:
        if kind_of(key) != "data":
            return self.inner.get(key)
        with self._lock:
            self.reading += 1
        try:
            time.sleep(self.seconds)
            return self.inner.get(key)
        finally:
            with self._lock:
                self.reading -= 1


def _table(path: Path, seconds: float) -> tuple[mt.Table, SlowDataReads]:
    table = mt.create_table(str(path), pa.schema([("file", pa.int64()), ("row", pa.int64())]))
    for n in range(FILES):
        table.append(pa.table({"file": [n] * 100, "row": list(range(100))}))
    store = SlowDataReads(LocalStore(path), seconds)
    return mt.open_table(str(path), store=store), store


def test_scans_in_several_threads_each_read_every_row_in_order(tmp_path: Path) -> None:
    table, _ = _table(tmp_path / "t", 0.05)
    expected = [(n, r) for n in range(FILES) for r in range(100)]

    def rows(_: int) -> list[tuple[int, int]]:
        got = table.scan().to_arrow()
        return list(zip(got.column("file").to_pylist(), got.column("row").to_pylist()))

    with ThreadPoolExecutor(max_workers=6) as callers:
        assert list(callers.map(rows, range(12))) == [expected] * 12


def test_a_scan_stopped_early_leaves_none_of_its_reads_running(tmp_path: Path) -> None:
    table, store = _table(tmp_path / "t", 0.3)
    batches = table.scan().to_batches()
    first = next(batches)
    assert first.column(0).to_pylist() == [0] * 100
    time.sleep(0.1)
    assert store.reading >= 1  # the next file's read is under way
    batches.close()
    assert store.reading == 0

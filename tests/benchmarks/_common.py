"""What every benchmark shares: the data set, timing, Markdown tables, and directory
bookkeeping (cheap clones, bytes written)."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import manifest_table as mt
import manifest_table.storage

SCHEMA = pa.schema([
    ("id", pa.int64()),            # unique, ascending: file and row-group stats are disjoint ranges
    ("ts", pa.timestamp("us")),    # ascending with id
    ("qty", pa.int32()),
    ("price", pa.float64()),
    ("category", pa.string()),     # 64 distinct values
    ("name", pa.string()),         # ~10-15 characters, high cardinality
])
_EPOCH_US = 1_735_689_600_000_000  # 2025-01-01
_CATEGORIES = pa.array([f"category-{i:02d}" for i in range(64)])


def make_data(rows: int, start: int = 0, seed: int = 0) -> pa.Table:
    """``rows`` rows of ``SCHEMA`` with ids ``start .. start+rows-1``; deterministic per seed."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + rows, dtype=np.int64)
    names = pc.binary_join_element_wise("user-", pc.cast(pa.array(rng.integers(0, 10**9, rows)), pa.string()), "")
    return pa.table([
        pa.array(ids),
        pa.array(_EPOCH_US + ids * 1000, pa.timestamp("us")),
        pa.array(rng.integers(0, 1000, rows, dtype=np.int32)),
        pa.array(rng.random(rows) * 100),
        _CATEGORIES.take(pa.array(rng.integers(0, len(_CATEGORIES), rows))),
        names,
    ], schema=SCHEMA)


WIDE_SCHEMA = pa.schema(list(SCHEMA) + [
    ("score", pa.float32()),
    ("active", pa.bool_()),
    ("day", pa.date32()),          # 100,000 rows per day
    ("amount", pa.int64()),        # random in [0, 10^6): mostly distinct
])


def make_wide_data(rows: int, start: int = 0, seed: int = 0) -> pa.Table:
    """``make_data`` with four more columns: ``WIDE_SCHEMA``, 10 mixed columns."""
    rng = np.random.default_rng(seed + start + 1)
    base = make_data(rows, start, seed)
    days = 20_000 + np.arange(start, start + rows) // 100_000
    extra = [pa.array(rng.random(rows, dtype=np.float32)), pa.array(rng.random(rows) < 0.5),
             pa.array(days.astype(np.int32), pa.date32()), pa.array(rng.integers(0, 10**6, rows))]
    return pa.table(base.columns + extra, schema=WIDE_SCHEMA)


@dataclass(frozen=True)
class SyntheticFiles:
    """Per-file stats of ``WIDE_SCHEMA`` files that were never written: row i of ``lows`` /
    ``highs`` holds file i's minima / maxima. File i holds ids ``[first_id + i*rows,
    first_id + (i+1)*rows)`` (tight, disjoint: an ``id = X`` lookup matches one file); ``ts`` and
    ``day`` follow the ids as in ``make_wide_data``; the other columns span their whole range in
    every file, with random (incompressible) bounds where the values are continuous."""

    rows: int
    size: int
    lows: pa.Table
    highs: pa.Table

    def bounds(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """(minima, maxima) of each file, as Python values of the column types."""
        return zip(self.lows.to_pylist(), self.highs.to_pylist())


def synthetic_files(count: int, rows: int, first_id: int, seed: int = 0) -> SyntheticFiles:
    """``count`` files of ``rows`` rows each, the first holding ids from ``first_id``."""
    rng = np.random.default_rng(seed)
    lo_ids = first_id + np.arange(count, dtype=np.int64) * rows
    hi_ids = lo_ids + rows - 1
    near = lambda scale, dtype=np.float64: rng.random(count, dtype=dtype) * scale  # noqa: E731
    names = lambda lo, hi: pc.binary_join_element_wise(  # noqa: E731
        "user-", pc.cast(pa.array(rng.integers(lo, hi, count)), pa.string()), "")

    def side(ids: np.ndarray, qty: np.ndarray, price: np.ndarray, category: str, name: pa.Array,
             score: np.ndarray, active: bool, amount: np.ndarray) -> pa.Table:
        return pa.table([
            pa.array(ids), pa.array(_EPOCH_US + ids * 1000, pa.timestamp("us")), pa.array(qty.astype(np.int32)),
            pa.array(price), pa.array([category] * count, pa.string()), name, pa.array(score),
            pa.array(np.full(count, active)), pa.array((20_000 + ids // 100_000).astype(np.int32), pa.date32()),
            pa.array(amount)], schema=WIDE_SCHEMA)

    lows = side(lo_ids, rng.integers(0, 3, count), near(0.1), "category-00", names(10**8, 10**8 + 10**6),
                near(1e-3, np.float32), False, rng.integers(0, 1000, count))
    highs = side(hi_ids, 999 - rng.integers(0, 3, count), 100 - near(0.1), "category-63",
                 names(999 * 10**6, 10**9), 1 - near(1e-3, np.float32), True, 10**6 - 1 - rng.integers(0, 1000, count))
    return SyntheticFiles(rows, rows * 25, lows, highs)  # ~25 bytes a row, as 10M rows of make_wide_data take


def write_ours(root: str, data: pa.Table, **options: Any) -> mt.Table:
    table = mt.create_table(root, SCHEMA, **options)
    table.append(data)
    return table


def data_paths(table: mt.Table) -> list[str]:
    """Absolute paths of a local table's live data files, in manifest order."""
    return [os.path.join(table.store.root, *f.path.split("/")) for f in table.manifest().files]


# --- timing ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """Wall-clock samples, and the process CPU time (all threads) of the same runs."""

    samples: tuple[float, ...]
    cpu: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


def measure(fn: Callable[[], Any], repeat: int, warmup: int = 1) -> Timing:
    """``fn()`` timed ``repeat`` times, after ``warmup`` untimed calls."""
    return compare({"": fn}, repeat, warmup)[""]


def compare(fns: dict[str, Callable[[], Any]], repeat: int, warmup: int = 1,
            before: Callable[[str], Any] | None = None,
            cpu_clock: Callable[[], float] = time.process_time) -> dict[str, Timing]:
    """Time each function ``repeat`` times, round-robin, so that load from elsewhere on the
    machine (a shared box, a noisy neighbour) falls on all of them alike. ``before(name)``
    runs untimed before every call (clearing what the previous call wrote); ``cpu_clock``
    gives the CPU seconds used so far (default: this process's)."""
    for name, fn in fns.items():
        for _ in range(warmup):
            if before:
                before(name)
            fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            if before:
                before(name)
            w, c = time.perf_counter(), cpu_clock()
            fn()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(cpu_clock() - c)
    return {name: Timing(tuple(wall[name]), tuple(cpu[name])) for name in fns}


def seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} us"


def ratio(ours: float, other: float) -> str:
    return f"{ours / other:.2f}x" if other else "-"


def size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A Markdown table, ready to paste into docs/benchmarks.md."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    print(f"\n### {title}\n")
    print(line(cells[0]))
    print("| " + " | ".join("-" * w for w in widths) + " |")
    for row in cells[1:]:
        print(line(row))
    print(flush=True)


def machine() -> str:
    import pyarrow
    return (f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"pyarrow {pyarrow.__version__}")


# --- command line and scratch space ------------------------------------------------------
def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workdir", help="scratch directory (default: a new temp dir, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--peers", default="deltalake,pyiceberg,lance",
                   help="comma-separated peers to compare with ('' for none)")
    return p


@contextmanager
def scratch(args: argparse.Namespace) -> Iterator[str]:
    path = args.workdir or tempfile.mkdtemp(prefix="mt-bench-")
    os.makedirs(path, exist_ok=True)
    try:
        yield path
    finally:
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)


# --- directories -------------------------------------------------------------------------
_LINK_ABOVE = 1 << 20


def clone_dir(src: str, dst: str) -> str:
    """A copy of a table directory in which big files are hard links (immutable data files
    cost nothing) and small ones are copied (metadata some formats may rewrite in place)."""
    def copy(s: str, d: str) -> None:
        if os.path.getsize(s) >= _LINK_ABOVE:
            os.link(s, d)
        else:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=copy)
    return dst


def fresh_copy_rows(work: str, variants: Sequence[tuple[str, Callable[[str], Any], Callable[[Any, int], str]]],
                    repeat: int) -> list[list[str]]:
    """Run each variant ``repeat`` times, each on a fresh copy (``setup(directory)`` makes it,
    ``act(handle, run_index)`` is timed), and return table rows: label, median time, objects
    and bytes written, time and bytes relative to the first variant, the last run's note."""
    table_rows: list[list[str]] = []
    first: tuple[float, int] | None = None
    for v, (label, setup, act) in enumerate(variants):
        times, written, note = [], [], ""
        for i in range(repeat):
            directory = os.path.join(work, f"v{v}-{i}")
            handle = setup(directory)
            before = files_of(directory)
            start = time.perf_counter()
            note = act(handle, i)
            times.append(time.perf_counter() - start)
            written.append(bytes_written(before, directory))
        t = statistics.median(times)
        objects, nbytes = written[-1]
        first = first or (t, nbytes)
        table_rows.append([label, seconds(t), f"{objects} / {size(nbytes)}",
                           "" if v == 0 else ratio(t, first[0]), "" if v == 0 else ratio(nbytes, first[1]), note])
    return table_rows


def files_of(root: str) -> dict[str, tuple[int, int]]:
    """relative path -> (inode, size) of every file under ``root``."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (st.st_ino, st.st_size)
    return out


def bytes_written(before: dict[str, tuple[int, int]], root: str) -> tuple[int, int]:
    """(objects, bytes) created under ``root`` since ``before``; a file replaced by a rename
    (a new inode) counts as created."""
    created = [s for p, (ino, s) in files_of(root).items() if before.get(p, (None, 0))[0] != ino]
    return len(created), sum(created)


# --- request counting --------------------------------------------------------------------
def kind_of(key: str) -> str:
    if key == "_latest_manifest":
        return "pointer"
    return {"manifest": "manifest", "data": "data", "tombstones": "tombstone"}.get(key.split("/")[0], "other")


class CountingStore(mt.storage.ObjectStore):
    """Delegates to ``inner`` and counts requests by (operation, kind of object), and bytes
    PUT by kind. On a store without a pyarrow filesystem (MemoryStore) data files are
    whole-object GETs and PUTs too, so ``("get", "data")`` is the number of data files opened;
    with one (LocalStore, S3) data files bypass these counts."""

    def __init__(self, inner: mt.storage.ObjectStore) -> None:
        self.inner = inner
        self.counts: Counter[tuple[str, str]] = Counter()
        self.put_bytes: Counter[str] = Counter()

    def take(self) -> Counter[tuple[str, str]]:
        counts, self.counts = self.counts, Counter()
        return counts

    def take_put_bytes(self) -> Counter[str]:
        """Bytes PUT per kind of object since the last call."""
        put, self.put_bytes = self.put_bytes, Counter()
        return put

    def _count(self, op: str, key: str) -> None:
        self.counts[(op, kind_of(key))] += 1

    def get(self, key):
        self._count("get", key)
        return self.inner.get(key)

    def get_with_etag(self, key):
        self._count("get", key)
        return self.inner.get_with_etag(key)

    def head(self, key):
        self._count("head", key)
        return self.inner.head(key)

    def put_if_absent(self, key, data):
        self._count("put", key)
        self.put_bytes[kind_of(key)] += len(data)
        return self.inner.put_if_absent(key, data)

    def put_if_match(self, key, data, etag):
        self._count("put", key)
        self.put_bytes[kind_of(key)] += len(data)
        return self.inner.put_if_match(key, data, etag)

    def list(self, prefix=""):
        self._count("list", prefix)
        return self.inner.list(prefix)

    def delete(self, key):
        self._count("delete", key)
        return self.inner.delete(key)

    def arrow_filesystem(self):
        return self.inner.arrow_filesystem()


def describe(counts: Counter[tuple[str, str]]) -> str:
    """'3 (GET pointer 1, GET manifest 1, PUT data 1)'."""
    parts = [f"{op.upper()} {kind} {n}" for (op, kind), n in sorted(counts.items())]
    return f"{sum(counts.values())} ({', '.join(parts)})" if parts else "0"

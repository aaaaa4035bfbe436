"""Commit cost: latency of small appends (ours vs Delta, Iceberg, Lance on a local directory),
object-store requests per operation (ours, counted on a MemoryStore), and throughput when
several processes append to one table at once.

    python -m tests.benchmarks.commit [--commits 100] [--procs 4] [--per-proc 25]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import manifest_table as mt
from manifest_table.format.manifest import manifest_key
from manifest_table.storage import LocalStore, MemoryStore

from . import _peers
from ._common import (
    SCHEMA,
    CountingStore,
    compare,
    describe,
    machine,
    make_data,
    measure,
    parser,
    print_table,
    ratio,
    scratch,
    seconds,
    size,
    write_ours,
)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=100, help="appends timed per engine and size")
    p.add_argument("--sizes", default="1,10000", help="rows per append, comma-separated")
    p.add_argument("--procs", type=int, default=4, help="concurrent writer processes")
    p.add_argument("--per-proc", type=int, default=25, help="appends per writer process")
    p.add_argument("--table-files", default="10,1000,10000",
                   help="files already in the table, for append latency vs table size (ours)")
    args = p.parse_args()
    print(f"machine: {machine()}")
    peers = _peers.selected(args.peers)
    with scratch(args) as work:
        latency(work, peers, [int(s) for s in args.sizes.split(",")], args.commits)
        by_table_size(work, [int(n) for n in args.table_files.split(",")], max(10, args.commits // 5))
        requests()
        contention(work, peers, args.procs, args.per_proc)


# --- 1. latency --------------------------------------------------------------------------
def latency(work: str, peers: list[Any], sizes: list[int], commits: int) -> None:
    rows = []
    # tmpfs (when there is one) shows what our commit costs without fsync latency.
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="mt-bench-", dir=tmpfs) as shm:
        for n in sizes:
            batch = make_data(n)
            appends: dict[str, Callable[[], None]] = {}
            appends["manifest_table"] = lambda t=write_ours(os.path.join(work, f"latency-{n}", "ours"), batch): \
                t.append(batch)
            if tmpfs:
                appends["manifest_table on tmpfs"] = lambda t=write_ours(os.path.join(shm, str(n)), batch): \
                    t.append(batch)
            for cls in peers:
                peer = cls.create(os.path.join(work, f"latency-{n}", cls.name), batch)
                appends[cls.name] = lambda peer=peer: peer.append(batch)
            results = compare(appends, commits)
            ours = results["manifest_table"]
            for name, t in results.items():
                rows.append([f"{n:,}", name, seconds(t.median), seconds(t.p95), "" if name == "manifest_table"
                             else f"{ratio(ours.median, t.median)} / {ratio(ours.p95, t.p95)}"])
    print_table(f"Append latency, local directory ({commits} commits each, interleaved; "
                "ratio = ours / peer)", ["rows", "engine", "median", "p95", "ours/peer median / p95"], rows)


def by_table_size(work: str, table_files: list[int], commits: int) -> None:
    """One manifest lists every file, so each commit rewrites (and a new reader parses) a
    manifest that grows with the table: this measures how much that costs."""
    rows = []
    batch = make_data(1)
    for n in table_files:
        root = os.path.join(work, f"files-{n}")
        write_ours(root, make_data(n), target_file_size=1, row_group_size=1)  # n one-row files
        table = mt.open_table(root)
        manifest_bytes = table.store.head(manifest_key(table.version)).size
        append = measure(lambda: table.append(batch), commits)
        read = measure(lambda: mt.open_table(root).scan().count(), commits)
        rows.append([f"{n:,}", size(manifest_bytes), seconds(append.median), seconds(append.p95), seconds(read.median)])
    print_table(f"Append latency vs files already in the table (ours, {commits} commits each)",
                ["files", "manifest", "append median", "append p95", "new handle: open + count()"], rows)


# --- 2. requests -------------------------------------------------------------------------
def requests(files: int = 10, rows_per_file: int = 10_000) -> None:
    store = CountingStore(MemoryStore())
    table = mt.create_table("memory://bench", SCHEMA, store=store)
    for i in range(files):
        table.append(make_data(rows_per_file, start=i * rows_per_file))
    mid = files * rows_per_file // 2
    ops: list[tuple[str, Callable[[mt.Table, int], Any]]] = [  # (handle, k): k-th run
        ("append 1 row", lambda t, k: t.append(make_data(1, start=10**9 + k))),
        ("scan, no filter (to_arrow)", lambda t, k: t.scan().to_arrow()),
        (f"scan where id = {mid}", lambda t, k: t.scan(where=f"id = {mid}").to_arrow()),
        (f"delete where id = {mid} (then {mid + 1})", lambda t, k: t.delete(f"id = {mid + k}")),
        ("count()", lambda t, k: t.scan().count()),
        (f"count() where id < {mid}", lambda t, k: t.scan(where=f"id < {mid}").count()),
    ]
    rows = []
    for label, op in ops:
        table.manifest()  # a long-lived handle that has seen the latest version (cached)
        store.take()
        op(table, 0)
        warm = store.take()
        op(mt.Table("memory://bench", store), 1)  # a new handle, as a new process would have
        rows.append([label, describe(warm), describe(store.take())])
    print_table(f"Object-store requests per operation (MemoryStore, table of {files + 1}-{files + 2} files; "
                "data files are whole-object GETs here, ranged GETs on S3)",
                ["operation", "existing handle", "new handle"], rows)


# --- 3. contention -----------------------------------------------------------------------
def contention(work: str, peers: list[Any], procs: int, per_proc: int) -> None:
    ctx = mp.get_context("spawn")
    rows = []
    batch = make_data(1)
    for name in ["manifest_table"] + [cls.name for cls in peers]:
        root = os.path.join(work, f"contention-{name}")
        if name == "manifest_table":
            mt.create_table(root, SCHEMA)
        else:
            next(cls for cls in peers if cls.name == name).create(root, batch.slice(0, 0))
        barrier, queue = ctx.Barrier(procs + 1), ctx.Queue()
        workers = [ctx.Process(target=_writer, args=(name, root, per_proc, barrier, queue)) for _ in range(procs)]
        for w in workers:
            w.start()
        barrier.wait(timeout=120)
        start = time.perf_counter()
        results = [queue.get(timeout=600) for _ in workers]
        wall = time.perf_counter() - start
        for w in workers:
            w.join()
        done = sum(r["ok"] for r in results)
        errors = Counter(e for r in results for e in r["errors"])
        latencies = sorted(x for r in results for x in r["latencies"])
        attempts = sum(r["attempts"] for r in results)
        extra = f"; {attempts - done} lost create races, retried" if name == "manifest_table" else ""
        rows.append([name, f"{done}/{procs * per_proc}", seconds(wall), f"{done / wall:.1f}",
                     seconds(latencies[len(latencies) // 2]) if latencies else "-",
                     seconds(latencies[int(0.95 * (len(latencies) - 1))]) if latencies else "-",
                     (", ".join(f"{n}x {e}" for e, n in errors.items()) or "none") + extra])
    print_table(f"Contention: {procs} processes x {per_proc} one-row appends on one local table",
                ["engine", "committed", "wall", "commits/s", "median latency", "p95 latency", "failures"], rows)


def _writer(name: str, root: str, count: int, barrier: Any, queue: Any) -> None:
    store = CountingStore(LocalStore(root)) if name == "manifest_table" else None
    handle = mt.open_table(root, store=store) if store else next(
        cls for cls in _peers.selected(name))(root)
    batch = make_data(1, start=os.getpid())
    out: dict[str, Any] = {"ok": 0, "errors": [], "latencies": [], "attempts": 0}
    barrier.wait(timeout=120)
    for _ in range(count):
        start = time.perf_counter()
        try:
            handle.append(batch)
        except Exception as exc:
            out["errors"].append(type(exc).__name__)
            continue
        out["latencies"].append(time.perf_counter() - start)
        out["ok"] += 1
    if store:
        out["attempts"] = store.counts[("put", "manifest")]
    queue.put(out)


if __name__ == "__main__":
    main()

"""Point operations (issue 36): one row found, deleted or updated by key in a 10M-row table,
against DuckLake on the same rows in the same run.

    python -m tests.benchmarks.point_ops [--rows 10000000] [--repeat 7] [--peers ducklake]

A table of ``--rows`` rows x 10 columns (``_common.WIDE_SCHEMA``), appended in one call to a
local directory, in two layouts:
- ``sorted by id``: rows in id order, as appended (file and row-group stats on ``id`` are
  disjoint ranges);
- ``clustered by amount``: the same rows sorted by ``amount`` before the append, so ids are
  spread over every row group: the layout a table clustered by another key has (issue 34),
  made by sorting so that DuckLake gets the very same row order; once with the table's
  ``bloom_filter_columns`` naming ``id`` (row groups skipped by their bloom filters), once
  without (``--layouts`` picks some).
Per layout, ``--repeat`` calls of each operation after one warm-up, each on another key:
``delete("id = k")``, ``update(values={"qty": 0}, where="id = k")`` and
``scan(where="id = k").to_arrow()``, on one long-lived handle; and the same statement on the
same keys on a DuckLake table made from the same rows in the same order (``DELETE``,
``UPDATE ... SET qty = 0``, ``SELECT *``), timed inside its own process. Both tables' writes
are flushed (``os.sync``) before the first call. ``--order
interleaved`` (the default) alternates call by call, ours then DuckLake's: each call runs
after the other process's, caches cold as for a single call; ``--order blocks`` makes each
operation's calls in a row, ours then DuckLake's: a stream of calls (a job erasing keys).
Prints medians, the spread (min-max), our process CPU time (all threads: it moves less than
the wall clock on a shared machine) and the load average, then the targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import manifest_table as mt
from tests.reader_envs import installed

from ._common import data_paths, machine, make_wide_data, parser, print_table, scratch, seconds

DUCKLAKE_PACKAGES = ["duckdb==1.5.5", "duckdb-extension-ducklake==1.5.5", "pytz"]
"""DuckLake's extension is on PyPI for DuckDB 1.5.5 (and 1.4.4), not for the suite's DuckDB."""
SERVER = Path(__file__).with_name("_ducklake_server.py")
def _by_amount(t: pa.Table) -> pa.Table:
    return t.take(pc.sort_indices(t["amount"]))


LAYOUTS: dict[str, tuple[Callable[[pa.Table], pa.Table], dict[str, Any]]] = {
    "sorted by id": (lambda t: t, {}),
    "clustered by amount (sorted by amount), bloom_filter_columns=[id]": (
        _by_amount, {"bloom_filter_columns": ["id"]}),
    "clustered by amount (sorted by amount), no bloom filter": (_by_amount, {}),
}
TARGETS = {"delete": 5e-3, "update": 8e-3, "scan": 3e-3}
OPS = {
    "delete": ("delete(\"id = k\")", "DELETE FROM lake.t WHERE id = {k}"),
    "update": ("update(values={\"qty\": 0}, where=\"id = k\")", "UPDATE lake.t SET qty = 0 WHERE id = {k}"),
    "scan": ("scan(where=\"id = k\").to_arrow()", "SELECT * FROM lake.t WHERE id = {k}"),
}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--order", choices=["interleaved", "blocks"], default="interleaved",
                   help="interleaved: each call of ours then DuckLake's; blocks: an operation's calls in a row")
    p.add_argument("--layouts", default=",".join(str(n) for n in range(len(LAYOUTS))),
                   help="which layouts, by number (0: sorted by id, 1: clustered with bloom filters, 2: without)")
    p.set_defaults(peers="ducklake")
    args = p.parse_args()
    print(f"machine: {machine()}")
    rows: list[list[Any]] = []
    targets: list[list[Any]] = []
    with scratch(args) as work:
        data = make_wide_data(args.rows)
        chosen = {int(n) for n in args.layouts.split(",")}
        for n, (layout, (arrange, properties)) in enumerate(LAYOUTS.items()):
            if n not in chosen:
                continue
            root = os.path.join(work, f"layout-{n}")
            table = mt.write_table(os.path.join(root, "ours"), arrange(data), properties=properties)
            lake = _DuckLake(os.path.join(root, "lake"), data_paths(table), n) if "ducklake" in args.peers else None
            os.sync()  # (the tables' writeback done before timing: a commit's fsyncs would wait behind it)
            layout_rows, layout_medians = _layout(layout, table, lake, args.rows, args.repeat, args.order)
            rows += layout_rows
            targets += [[f"{OPS[op][0]} at most {seconds(limit)} ({layout})", seconds(layout_medians[op]),
                         "met" if layout_medians[op] <= limit else "missed"] for op, limit in TARGETS.items()]
            if lake is not None:
                lake.close()
    print_table(f"Point operations on {args.rows:,} rows x 10 columns, local directory (median of {args.repeat}, "
                "spread min-max; load average before / after)",
                ["layout", "operation", "manifest_table", "spread", "CPU", "DuckLake 1.5.5", "spread",
                 "DuckLake / ours"],
                rows)
    print_table("Targets of issue 36", ["target", "figure", "met"], targets)


def _layout(
    layout: str, table: mt.Table, lake: _DuckLake | None, total: int, repeat: int, order: str
) -> tuple[list[list[Any]], dict[str, float]]:
    """Each call on a new key, DuckLake's on the same keys as ours: round-robin over the
    operations, ours then DuckLake's (``interleaved``), or each operation's calls in a row
    (``blocks``)."""
    load = os.getloadavg()[0]
    step = min(7919, (total - total // 3) // (len(OPS) * (repeat + 1) + 1))
    keys = iter(range(total // 3, total, max(1, step)))
    ours: dict[str, list[float]] = {op: [] for op in OPS}
    cpu: dict[str, list[float]] = {op: [] for op in OPS}
    theirs: dict[str, list[float]] = {op: [] for op in OPS}
    calls: dict[str, Callable[[int], Any]] = {
        "delete": lambda k: table.delete(f"id = {k}"),
        "update": lambda k: table.update(values={"qty": 0}, where=f"id = {k}"),
        "scan": lambda k: table.scan(where=f"id = {k}").to_arrow(),
    }
    keys_of: dict[str, list[int]] = {op: [] for op in calls}
    for _ in range(repeat + 1):  # (drawn round-robin: each operation's keys spread alike)
        for op in calls:
            keys_of[op].append(next(keys))
    if order == "interleaved":  # each call of ours, then the same of DuckLake's
        schedule = [(op, side, i) for i in range(repeat + 1) for op in calls for side in ("ours", "theirs")]
    else:  # each operation's calls in a row, ours then DuckLake's
        schedule = [(op, side, i) for op in calls for side in ("ours", "theirs") for i in range(repeat + 1)]
    for op, side, i in schedule:  # call 0 of each warms up
        k = keys_of[op][i]
        if side == "ours":
            elapsed, used = _timed(lambda: calls[op](k))
            if i:
                ours[op].append(elapsed)
                cpu[op].append(used)
        elif lake is not None:
            other = lake.run(OPS[op][1].format(k=k))
            if i:
                theirs[op].append(other)
    note = f"{layout}; {order}; load {load:.1f} / {os.getloadavg()[0]:.1f}"
    rows = [[note, OPS[op][0], seconds(_median(ours[op])), _spread(ours[op]), seconds(_median(cpu[op])),
             seconds(_median(theirs[op])) if theirs[op] else "-", _spread(theirs[op]) if theirs[op] else "-",
             f"{_median(theirs[op]) / _median(ours[op]):.2f}x" if theirs[op] else "-"] for op in OPS]
    return rows, {op: _median(ours[op]) for op in OPS}


def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall, process CPU) seconds of ``fn()``."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def _median(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2]


def _spread(samples: list[float]) -> str:
    return f"{seconds(min(samples))}-{seconds(max(samples))}"


class _DuckLake:
    """DuckDB 1.5.5 with DuckLake in its own process (``_ducklake_server.py``), its table made
    from ``files`` (ours, so the same rows in the same order)."""

    def __init__(self, root: str, files: list[str], n: int) -> None:
        env = installed("duckdb-1.5.5-ducklake", DUCKLAKE_PACKAGES)
        environ = {**os.environ, "PYTHONPATH": str(env)}
        self._proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=environ)
        self.version = self._answer()["duckdb"]
        os.makedirs(root)
        order = "id" if n == 0 else "amount"
        self._send({"load": files, "order": order, "root": root})

    def run(self, sql: str) -> float:
        return float(self._send({"sql": sql}))

    def _send(self, request: dict[str, Any]) -> Any:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self._answer()["seconds"]

    def _answer(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the DuckLake process ended")
        return json.loads(line)

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=60)


if __name__ == "__main__":
    main()

"""Clustering (issue 34): files read by selective filters before and after ``cluster_by``
compaction, on rows appended in random order of ``user_id`` and ``country``, against
deltalake's ``optimize.z_order`` on the very same files; then the cost of clustering new data.

    python -m tests.benchmarks.clustering [--rows 10000000] [--files 1000] [--repeat 3]

Targets: clustered by ``user_id``, a filter selecting 1% of the ``user_id`` values reads at
most 5% of the files; clustered by (``user_id``, ``country``), each column's 1% filter reads
at most 15%. Files read are what each table's own planning keeps from its statistics (ours:
``Scan.plan_files``; Delta: the ``add`` actions whose min/max overlap the filter, as delta-rs
and DuckDB prune); bytes read are their sizes. Scan times are medians of the filters, each
timed before and after clustering round-robin (time travel reads the version before), in
one run.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

import manifest_table as mt

from ._common import clone_dir, compare, machine, parser, print_table, scratch, seconds, size

SCHEMA = pa.schema([("event_id", pa.int64()), ("user_id", pa.int64()), ("country", pa.string()),
                    ("amount", pa.float64())])
COUNTRIES = [f"{chr(65 + i // 10)}{chr(65 + i % 10)}" for i in range(100)]  # "AA" .. "JJ": 1% each
LAYOUTS = {"user_id": ["user_id"], "user_id, country": ["user_id", "country"]}
TARGETS = {"user_id": {"user_id": 0.05}, "user_id, country": {"user_id": 0.15, "country": 0.15}}


def batch(rng: np.random.Generator, start: int, rows: int, users: int) -> pa.Table:
    return pa.table([
        pa.array(np.arange(start, start + rows)),
        pa.array(rng.integers(0, users, rows)),
        pa.array(COUNTRIES).take(pa.array(rng.integers(0, len(COUNTRIES), rows))),
        pa.array(rng.random(rows) * 100),
    ], schema=SCHEMA)


def filters(users: int, count: int, seed: int) -> dict[str, list[tuple[str, ds.Expression]]]:
    """Per column, ``count`` filters that each select 1% of its values: a range of 1% of the
    user ids, one country of a hundred; as our text and as a pyarrow expression."""
    rng = np.random.default_rng(seed)
    span = users // 100
    starts = rng.integers(0, users - span, count).tolist()
    countries = [COUNTRIES[i] for i in rng.choice(len(COUNTRIES), count, replace=False)]
    return {
        "user_id": [(f"user_id >= {s} AND user_id < {s + span}",
                     (ds.field("user_id") >= s) & (ds.field("user_id") < s + span)) for s in starts],
        "country": [(f"country = '{c}'", ds.field("country") == c) for c in countries],
    }


# --- the two tables ------------------------------------------------------------------------
def ours_read(table: mt.Table, where: str, version: int | None = None) -> tuple[int, int]:
    files = table.scan(where=where, version=version).plan_files()
    return len(files), sum(f.size for f in files)


def delta_read(root: str, expr: tuple[str, Any, Any], version: int | None = None) -> tuple[int, int]:
    """The files of Delta version ``version`` whose stats overlap ``column op value(s)``."""
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(root, version=version).get_add_actions(flatten=True))
    column, lo, hi = expr
    keep = pc.and_(pc.less_equal(adds[f"min.{column}"], hi), pc.greater_equal(adds[f"max.{column}"], lo))
    kept = adds.filter(keep)
    return kept.num_rows, pc.sum(kept["size_bytes"]).as_py() or 0


def bounds(where: str) -> tuple[str, Any, Any]:
    """``(column, lo, hi)`` of one of ``filters``' texts (inclusive)."""
    if where.startswith("country"):
        value = where.split("'")[1]
        return "country", value, value
    parts = where.split()
    return "user_id", int(parts[2]), int(parts[6]) - 1


def delta_scan(root: str, expr: ds.Expression, version: int | None) -> Callable[[], Any]:
    from deltalake import DeltaTable

    dataset = DeltaTable(root, version=version).to_pyarrow_dataset()
    return lambda: dataset.to_table(filter=expr)


def cluster_ours(root: str, columns: list[str], target: int) -> dict[str, Any]:
    table = mt.open_table(root)
    table.set_properties({"cluster_by": columns})
    start = time.perf_counter()
    info = table.compact(target_file_size=target)
    return {"time": time.perf_counter() - start, "written": info.metrics["bytes_added"],
            "files": info.metrics["files_added"], "version": info.version}


def cluster_delta(root: str, columns: list[str], target: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    table = DeltaTable(root)
    start = time.perf_counter()
    metrics = table.optimize.z_order(columns, target_size=target)
    return {"time": time.perf_counter() - start, "written": json.loads(metrics["filesAdded"])["totalSize"],
            "files": metrics["numFilesAdded"], "version": DeltaTable(root).version()}


# --- the run -------------------------------------------------------------------------------
def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--files", type=int, default=1_000, help="appended files (each a random sample)")
    p.add_argument("--users", type=int, default=None, help="distinct user ids (default: rows)")
    p.add_argument("--filters", type=int, default=10, help="1%% filters per column")
    p.add_argument("--repeat", type=int, default=3, help="timed scans of each filter")
    p.add_argument("--target", type=int, default=None,
                   help="compaction target file size in bytes (default: the appended files' mean size)")
    args = p.parse_args()
    users = args.users or args.rows
    peers = [name for name in args.peers.split(",") if name == "deltalake"]
    print(f"machine: {machine()}; rows: {args.rows:,} in {args.files} files; users: {users:,}; "
          f"filters: {args.filters} per column, {args.repeat} timed scans each")
    with scratch(args) as work:
        base = os.path.join(work, "appended")
        start = time.perf_counter()
        table = mt.create_table(base, SCHEMA, target_file_size=1 << 40)
        rng = np.random.default_rng(0)
        per = args.rows // args.files
        with table.transaction() as tx:
            for i in range(args.files):
                tx.append(batch(rng, i * per, per, users))
        files = table.manifest().files
        target = args.target or int(sum(f.size for f in files) / len(files))
        print(f"setup {time.perf_counter() - start:.1f} s: {len(files)} files, "
              f"{size(sum(f.size for f in files))}; compaction target {size(target)}")
        chosen = filters(users, args.filters, seed=1)
        results = [run_layout(work, base, label, columns, target, chosen, args.repeat, peers)
                   for label, columns in LAYOUTS.items()]
        report(results, chosen, peers)
        incremental(work, base, args, users, target, peers)


def run_layout(work: str, base: str, label: str, columns: list[str], target: int,
               chosen: dict[str, list[tuple[str, ds.Expression]]], repeat: int, peers: list[str]) -> dict[str, Any]:
    ours = clone_dir(base, os.path.join(work, f"ours {label}"))
    before = mt.open_table(ours).version
    done = {"label": label, "ours": cluster_ours(ours, columns, target)}
    table = mt.open_table(ours)
    done["files"] = {"ours": len(table.manifest().files)}
    for column, texts in chosen.items():
        reads = [(ours_read(table, w, before), ours_read(table, w)) for w, _ in texts]
        done[("ours", column)] = reads
        timed = compare({f"{i} {when}": (lambda w=w, v=v: table.scan(where=w, version=v).to_arrow())
                         for i, (w, _) in enumerate(texts) for when, v in (("before", before), ("after", None))},
                        repeat)
        done[("ours time", column)] = {when: statistics.median(t.median for k, t in timed.items() if k.endswith(when))
                                       for when in ("before", "after")}
    if "deltalake" in peers:
        from deltalake import DeltaTable, convert_to_deltalake

        delta = os.path.join(work, f"delta {label}")
        os.makedirs(delta)
        for f in mt.open_table(base).manifest().files:  # the very same bytes
            os.link(os.path.join(base, *f.path.split("/")), os.path.join(delta, os.path.basename(f.path)))
        convert_to_deltalake(delta)
        start = DeltaTable(delta).version()
        done["delta"] = cluster_delta(delta, columns, target)
        done["files"]["delta"] = len(DeltaTable(delta).file_uris())
        for column, texts in chosen.items():
            done[("delta", column)] = [(delta_read(delta, bounds(w), start), delta_read(delta, bounds(w)))
                                       for w, _ in texts]
            timed = compare({f"{i} {when}": delta_scan(delta, e, v) for i, (_, e) in enumerate(texts)
                             for when, v in (("before", start), ("after", None))}, repeat)
            done[("delta time", column)] = {when: statistics.median(t.median for k, t in timed.items()
                                                                    if k.endswith(when))
                                            for when in ("before", "after")}
    return done


def report(results: list[dict[str, Any]], chosen: dict[str, Any], peers: list[str]) -> None:
    engines = ["ours"] + (["delta"] if "deltalake" in peers else [])
    rows = []
    for done in results:
        for engine in engines:
            for column in chosen:
                reads = done[(engine, column)]
                total = done["files"][engine]
                share = statistics.mean(after[0] for _, after in reads) / total
                target = TARGETS[done["label"]].get(column)
                verdict = "" if target is None or engine != "ours" else (
                    f"{'met' if share <= target else 'MISSED'} (<= {target:.0%})")
                times = done[(f"{engine} time", column)]
                rows.append([done["label"], engine, column, total,
                             f"{statistics.mean(b[0] for b, _ in reads):.0f} -> "
                             f"{statistics.mean(a[0] for _, a in reads):.1f}",
                             f"{share:.1%}", verdict,
                             f"{size(statistics.mean(b[1] for b, _ in reads))} -> "
                             f"{size(statistics.mean(a[1] for _, a in reads))}",
                             f"{seconds(times['before'])} -> {seconds(times['after'])}"])
    print_table("A 1% filter before -> after clustering (means over the filters; scan: median)",
                ["cluster by", "engine", "filter on", "files after", "files read", "share read", "target",
                 "bytes read", "scan time"], rows)
    print_table("The clustering itself (one run each, same input files)",
                ["cluster by", "engine", "time", "bytes written", "files written"],
                [[done["label"], engine, seconds(done[engine]["time"]), size(done[engine]["written"]),
                  done[engine]["files"]] for done in results for engine in engines])


def incremental(work: str, base: str, args: Any, users: int, target: int, peers: list[str]) -> None:
    """1% more rows (ten random files) after clustering by (user_id, country), compacted again,
    three times: what each compaction rewrites, ours against a Delta z-order of the table."""
    ours = mt.open_table(os.path.join(work, "ours user_id, country"))
    rng = np.random.default_rng(9)
    per = max(1, args.rows // 100 // 10)
    rows = []
    for round_ in range(3):
        start = 10 * args.rows + round_ * 10 * per
        new = [batch(rng, start + i * per, per, users) for i in range(10)]
        for b in new:
            ours.append(b)
        began = time.perf_counter()
        info = ours.compact(target_file_size=target)
        rows.append([round_ + 1, "ours", seconds(time.perf_counter() - began), info.metrics.get("files_removed", 0),
                     f"{info.metrics.get('rows_rewritten', 0):,}", size(info.metrics.get("bytes_added", 0))])
        if "deltalake" in peers:
            from deltalake import DeltaTable, write_deltalake

            delta = os.path.join(work, "delta user_id, country")
            for b in new:
                write_deltalake(delta, b, mode="append")
            began = time.perf_counter()
            metrics = DeltaTable(delta).optimize.z_order(["user_id", "country"], target_size=target)
            rewritten = pa.table(DeltaTable(delta).get_add_actions(flatten=True))["num_records"]
            rows.append([round_ + 1, "delta", seconds(time.perf_counter() - began), metrics["numFilesRemoved"],
                         f"{pc.sum(rewritten).as_py():,} (the table)" if metrics["numFilesRemoved"] else "0",
                         size(json.loads(metrics["filesAdded"])["totalSize"])])
    print_table(f"Clustering new data: 1% more rows ({10 * per:,} in 10 random files), then compaction",
                ["round", "engine", "time", "files rewritten", "rows rewritten", "bytes written"], rows)


if __name__ == "__main__":
    main()

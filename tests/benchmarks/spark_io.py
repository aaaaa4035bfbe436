"""Spark reads and writes of a table through manifest_table's native path (``read``/``write``)
and its Python data source, against Spark's own Parquet reader and writer on the same rows and
files, in one local session; and the time of a Spark delete of one row of a big table.

    python -m tests.benchmarks.spark_io [--rows 3000000] [--delete-rows 10000000] [--repeat 5]

Reads go into Spark's ``noop`` sink. Every read case reads the same data files: Spark's reader
reads them as they are (no deleted row dropped: what the deletes cost), ours read the table
with no deletes, 1% of each file's rows deleted at random positions, or 10% deleted in one
clustered run per file. Writes start from one DataFrame cached in memory, all zstd. Runs are
round-robin (A/B interleaved) and each ratio is the median of the per-round ratios to Spark's
own reader or writer in the same round (above 1.00x: faster than Spark); ``CPU`` is the same
ratio of CPU time, of this process and every process under it (Spark's JVM, its Python
workers), which a shared machine's load moves much less than wall time. ``path`` says how
each read ran: Spark's Parquet reader alone, with deleted rows dropped by the JVM function
(manifest_table_live_row) or by the broadcast anti-join it falls back to, or the data source.
The anti-join is timed too (``MANIFEST_TABLE_SPARK_JVM=0``), for docs/design/006-spark-deletes.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from pyroaring import BitMap

import manifest_table as mt

from ._common import (
    Timing,
    clone_dir,
    compare,
    data_paths,
    machine,
    make_data,
    print_table,
    scratch,
    seconds,
    write_ours,
)

FORMAT = "manifest_table"
SPARK = "Spark Parquet (same files)"
NATIVE = "read() / write()"
ANTI_JOIN = "read(), anti-join fallback"
SOURCE = 'format("manifest_table")'


def session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from manifest_table.spark import register

    spark = (SparkSession.builder.master(master).appName("manifest_table spark_io bench")
             .config("spark.driver.memory", "4g").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--delete-rows", type=int, default=10_000_000, help="rows of the table the delete runs on")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", help="scratch directory (default: a new temp dir, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()
    spark = session(args.master)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; Spark {spark.version} "
          f"{args.master}; rows: {args.rows:,}; repeat: {args.repeat}")
    with scratch(args) as work:
        writes, table = _writes(spark, work, args)
        writer = "Spark's Parquet writer"
        paths = {SPARK: writer, NATIVE: writer, SOURCE: "Python data source (Arrow)"}
        rows = [["write, zstd", name, paths[name], seconds(t.median), *_ratios(writes[SPARK], t)]
                for name, t in writes.items()]
        for case, timings, paths in _reads(spark, work, table, args.rows, args.repeat):
            rows += [[case, name, paths[name], seconds(t.median), *_ratios(timings[SPARK], t)]
                     for name, t in timings.items()]
        deletes = _delete_one(spark, work, args)
    spark.stop()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print_table(f"Spark reads and writes, {args.rows:,} rows of 6 columns (medians of {args.repeat}; "
                f"ratio: median of per-round ratios to Spark's own Parquet)",
                ["case", "reader / writer", "path", "time", "vs Spark", "CPU vs Spark"], rows)
    print_table(f"Spark delete of 1 row of {args.delete_rows:,}, end to end", ["delete", "median", "runs"],
                [["manifest_table.spark.delete", seconds(statistics.median(deletes[1:])),
                  ", ".join(seconds(d) for d in deletes[1:])]])
    print("ratios above 1.00x mean faster than Spark's own Parquet path")


def _writes(spark: Any, work: str, args: argparse.Namespace) -> tuple[dict[str, Timing], str]:
    """The three writers on one cached DataFrame; returns their timings and a table ``write`` made."""
    from manifest_table.spark import write

    source = os.path.join(work, "source.parquet")
    pq.write_table(make_data(args.rows), source)
    frame = spark.read.parquet(source).repartition(spark.sparkContext.defaultParallelism).cache()
    frame.count()
    outputs: dict[str, list[str]] = {}

    def writer(name: str, save: Callable[[str], Any]) -> Callable[[], None]:
        def run() -> None:
            runs = outputs.setdefault(name, [])
            runs.append(os.path.join(work, f"{name}-{len(runs)}"))
            save(runs[-1])
        return run

    timings = compare({
        SPARK: writer("zstd", frame.write.option("compression", "zstd").parquet),
        NATIVE: writer("native", lambda uri: write(frame, uri)),
        SOURCE: writer("source", frame.write.format(FORMAT).mode("append").save),
    }, args.repeat, cpu_clock=tree_cpu)
    frame.unpersist()
    return timings, outputs["native"][0]


def _reads(spark: Any, work: str, clean: str, rows: int,
           repeat: int) -> list[tuple[str, dict[str, Timing], dict[str, str]]]:
    """Each read case: its timings and the path each reader took."""
    from manifest_table.spark import read

    tables = {"none": clean,
              "1% random": _with_deletes(clone_dir(clean, os.path.join(work, "random")), _random_percent),
              "10% clustered": _with_deletes(clone_dir(clean, os.path.join(work, "clustered")), _clustered_tenth)}
    files = data_paths(mt.open_table(clean))  # the same list of files ours read, not a directory to list
    selective = f"id >= {rows // 2} AND id < {rows // 2 + rows // 100}"
    cases = [("full read, no deletes", "none", None, None),
             ("full read, 1% random deletes", "1% random", None, None),
             ("full read, 10% clustered deletes", "10% clustered", None, None),
             ("2 of 6 columns, 1% random deletes", "1% random", ["id", "category"], None),
             ("2 of 6 columns, no deletes", "none", ["id", "category"], None),
             ("filter on id (1% of rows), 1% random deletes", "1% random", None, selective)]
    out = []
    for case, deletes, columns, where in cases:
        uri = tables[deletes]

        def shaped(load: Callable[[], Any], columns=columns, where=where) -> Callable[[], Any]:
            return lambda: _shape(load(), columns, where)
        loads = {SPARK: shaped(lambda: spark.read.parquet(*files)), NATIVE: shaped(lambda uri=uri: read(spark, uri))}
        if deletes != "none":
            loads[ANTI_JOIN] = shaped(lambda uri=uri: _without_jvm(lambda: read(spark, uri)))
        loads[SOURCE] = shaped(lambda uri=uri: spark.read.format(FORMAT).option("pushdown", True).load(uri))
        paths = {name: _path(load) for name, load in loads.items()}
        out.append((case, compare({name: _drain(load) for name, load in loads.items()}, repeat, cpu_clock=tree_cpu),
                    paths))
    return out


def _shape(df: Any, columns: list[str] | None, where: str | None) -> Any:
    df = df.filter(where) if where else df
    return df.select(*columns) if columns else df


def _without_jvm(load: Callable[[], Any]) -> Any:
    from manifest_table.spark.live_row import SWITCH

    os.environ[SWITCH] = "0"
    try:
        return load()
    finally:
        del os.environ[SWITCH]


def _path(load: Callable[[], Any]) -> str:
    """How a read ran, from its physical plan."""
    from manifest_table.spark.live_row import FUNCTION

    plan = load()._jdf.queryExecution().executedPlan().toString()
    if "BatchScan manifest_table" in plan:
        return "Python data source (Arrow)"
    if FUNCTION in plan:
        return "Spark Parquet + JVM live-row filter"
    if "LeftAnti" in plan:
        return "Spark Parquet + broadcast anti-join"
    return "Spark's Parquet reader"


def _ratios(spark: Timing, ours: Timing) -> list[str]:
    """The medians over rounds of Spark's wall and CPU time over ours in the same round."""
    return [f"{statistics.median(s / o for s, o in zip(mine, theirs)):.2f}x"
            for mine, theirs in ((spark.samples, ours.samples), (spark.cpu, ours.cpu))]


def tree_cpu() -> float:
    """CPU seconds used so far by this process and every live process under it (Linux /proc):
    in local mode that is Spark's JVM and its Python workers too."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry))
            used[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0.0)
        todo += parents.get(pid, [])
    return total


def _with_deletes(uri: str, positions: Callable[[np.random.Generator, int], np.ndarray]) -> str:
    table = mt.open_table(uri)
    rng = np.random.default_rng(1)
    with table.transaction() as tx:
        tx.delete_positions({f.path: BitMap(positions(rng, f.rows).astype(np.uint32)) for f in table.manifest().files})
    return uri


def _random_percent(rng: np.random.Generator, rows: int) -> np.ndarray:
    return rng.choice(rows, rows // 100, replace=False)


def _clustered_tenth(rng: np.random.Generator, rows: int) -> np.ndarray:
    start = int(rng.integers(0, rows - rows // 10))
    return np.arange(start, start + rows // 10)


def _drain(load: Callable[[], Any]) -> Callable[[], None]:
    """Read every selected row and throw it away (Spark's ``noop`` sink)."""
    def run() -> None:
        load().write.format("noop").mode("overwrite").save()
    return run


def _delete_one(spark: Any, work: str, args: argparse.Namespace) -> list[float]:
    from manifest_table.spark import delete

    spark.catalog.clearCache()
    big = write_ours(os.path.join(work, "big"), make_data(args.delete_rows))
    deletes = []
    for k in range(args.repeat + 1):  # the first one warms the JVM up, as compare() does
        started = time.perf_counter()
        info = delete(spark, big.uri, f"id = {args.delete_rows // 3 + 7919 * k}")
        deletes.append(time.perf_counter() - started)
        assert info.metrics["rows_deleted"] == 1
    return deletes


if __name__ == "__main__":
    main()

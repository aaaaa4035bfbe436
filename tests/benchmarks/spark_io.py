"""Spark write and read throughput of manifest_table's native Spark path (and of its Python
data source) against Spark's own Parquet writer and reader, on the same rows, in a local
Spark session; and the time of a Spark delete of one row of a big table.

    python -m tests.benchmarks.spark_io [--rows 3000000] [--delete-rows 10000000] [--repeat 3]

Writes start from the same DataFrame cached in Spark's memory, so only the write path is
timed; every writer uses zstd. Reads go through every column into Spark's ``noop`` sink; the
baseline is Spark's reader on the very files the table holds. The read with 1% of rows
deleted is timed against Spark reading the same files without dropping anything (what the
deletes cost). The delete is timed end to end: planning, the Spark job, the commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import pyarrow.parquet as pq
from pyroaring import BitMap

import manifest_table as mt

from ._common import compare, machine, make_data, print_table, ratio, scratch, seconds, write_ours

FORMAT = "manifest_table"


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
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", help="scratch directory (default: a new temp dir, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()
    from manifest_table.spark import delete, read, write

    spark = session(args.master)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; Spark {spark.version} "
          f"{args.master}; rows: {args.rows:,}; repeat: {args.repeat}")
    with scratch(args) as work:
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

        writes = compare({
            "manifest_table native": writer("native", lambda uri: write(frame, uri)),
            "manifest_table data source": writer("source", frame.write.format(FORMAT).mode("append").save),
            "Spark Parquet": writer("zstd", frame.write.option("compression", "zstd").parquet),
        }, args.repeat)
        ours = outputs["native"][0]
        same_files = os.path.join(ours, "data")
        lo, hi = args.rows // 2, args.rows // 2 + args.rows // 100
        selective = f"id >= {lo} AND id < {hi}"
        reads = {
            "manifest_table native": lambda: read(spark, ours),
            "manifest_table data source": lambda: spark.read.format(FORMAT).load(ours),
            "Spark Parquet, same files": lambda: spark.read.parquet(same_files),
        }
        full = compare({name: _drain(load) for name, load in reads.items()}, args.repeat)
        reads["manifest_table data source"] = lambda: spark.read.format(FORMAT).option("pushdown", True).load(ours)
        narrow = compare({name: _drain(lambda load=load: load().filter(selective))
                          for name, load in reads.items()}, args.repeat)
        _delete_one_percent(mt.open_table(ours))
        deleted = compare({name: _drain(load) for name, load in reads.items()
                           if name != "manifest_table data source"}, args.repeat)
        frame.unpersist()
        spark.catalog.clearCache()
        big = write_ours(os.path.join(work, "big"), make_data(args.delete_rows))
        deletes = []
        for k in range(args.repeat + 1):  # the first one warms the JVM up, as compare() does
            started = time.perf_counter()
            info = delete(spark, big.uri, f"id = {args.delete_rows // 3 + 7919 * k}")
            deletes.append(time.perf_counter() - started)
            assert info.metrics["rows_deleted"] == 1
    spark.stop()

    rate = lambda t: f"{args.rows / t.median / 1e6:.2f} M rows/s"  # noqa: E731
    base = "Spark Parquet"
    print_table(f"Spark write, {args.rows:,} rows, zstd (median of {args.repeat})",
                ["writer", "time", "throughput", f"vs {base}"],
                [[name, seconds(t.median), rate(t), ratio(writes[base].median, t.median)]
                 for name, t in writes.items()])
    base = "Spark Parquet, same files"
    for title, timings in ((f"Spark full read, {args.rows:,} rows, every column", full),
                           (f"Spark selective read, {selective} (1% of rows)", narrow),
                           ("Spark full read, 1% of rows deleted (Spark reads every row)", deleted)):
        print_table(title, ["reader", "time", "throughput (table rows)", f"vs {base}"],
                    [[name, seconds(t.median), rate(t), ratio(timings[base].median, t.median)]
                     for name, t in timings.items()])
    print_table(f"Spark delete of 1 row of {args.delete_rows:,}, end to end",
                ["delete", "median", "runs"],
                [["manifest_table.spark.delete", seconds(statistics.median(deletes[1:])),
                  ", ".join(seconds(d) for d in deletes[1:])]])
    print("ratios above 1.00x mean faster than Spark's own Parquet path")


def _delete_one_percent(table: mt.Table) -> None:
    """Delete 1% of each file's rows at random positions, in one commit."""
    rng = np.random.default_rng(1)
    with table.transaction() as tx:
        tx.delete_positions({f.path: BitMap(rng.choice(f.rows, f.rows // 100, replace=False).astype(np.uint32))
                             for f in table.manifest().files})


def _drain(load: Callable[[], Any]) -> Callable[[], None]:
    """Read every column of every row and throw it away (Spark's ``noop`` sink)."""
    def run() -> None:
        load().write.format("noop").mode("overwrite").save()
    return run


if __name__ == "__main__":
    main()

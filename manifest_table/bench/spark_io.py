"""Spark write and read throughput of the manifest_table data source against Spark's own
Parquet writer and reader, on the same rows, in a local Spark session.

    python -m manifest_table.bench.spark_io [--rows 3000000] [--repeat 3] [--master local[2]]

Writes start from the same DataFrame cached in Spark's memory, so only the write path is
timed; Spark's writer runs with its default codec (snappy) and with ours (zstd). Reads are
forced through every column with Spark's ``noop`` sink; Spark's reader is timed both on the
very files our table holds and on the (snappy) files Spark wrote itself.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

import pyarrow.parquet as pq

from ._common import compare, machine, make_data, print_table, ratio, scratch, seconds

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
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", help="scratch directory (default: a new temp dir, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()
    spark = session(args.master)
    print(f"machine: {machine()}; Spark {spark.version} {args.master}; rows: {args.rows:,}; "
          f"repeat: {args.repeat}")
    with scratch(args) as work:
        source = os.path.join(work, "source.parquet")
        pq.write_table(make_data(args.rows), source)
        frame = spark.read.parquet(source).repartition(spark.sparkContext.defaultParallelism).cache()
        frame.count()
        outputs: dict[str, list[str]] = {}

        def writer(name: str, save: Callable[[str], None]) -> Callable[[], None]:
            def run() -> None:
                runs = outputs.setdefault(name, [])
                runs.append(os.path.join(work, f"{name}-{len(runs)}"))
                save(runs[-1])
            return run

        writes = compare({
            "manifest_table (zstd)": writer("ours", frame.write.format(FORMAT).mode("append").save),
            "Spark Parquet (snappy, its default)": writer("snappy", frame.write.parquet),
            "Spark Parquet (zstd)": writer("zstd", frame.write.option("compression", "zstd").parquet),
        }, args.repeat)
        ours, theirs = outputs["ours"][0], outputs["snappy"][0]
        lo, hi = args.rows // 2, args.rows // 2 + args.rows // 100
        selective = f"id >= {lo} AND id < {hi}"
        reads = {
            "manifest_table": lambda: spark.read.format(FORMAT).load(ours),
            "Spark Parquet, same files": lambda: spark.read.parquet(os.path.join(ours, "data")),
            "Spark Parquet, its own files": lambda: spark.read.parquet(theirs),
        }
        full = compare({name: _drain(load) for name, load in reads.items()}, args.repeat)
        reads["manifest_table"] = lambda: spark.read.format(FORMAT).option("pushdown", True).load(ours)
        narrow = compare({name: _drain(lambda load=load: load().filter(selective))
                          for name, load in reads.items()}, args.repeat)
    spark.stop()

    rate = lambda t: f"{args.rows / t.median / 1e6:.2f} M rows/s"  # noqa: E731
    base = "Spark Parquet (zstd)"
    print_table(f"Spark write, {args.rows:,} rows (median of {args.repeat})",
                ["writer", "time", "throughput", f"vs {base}"],
                [[name, seconds(t.median), rate(t), ratio(writes[base].median, t.median)]
                 for name, t in writes.items()])
    base = "Spark Parquet, same files"
    for title, timings in ((f"Spark full read, {args.rows:,} rows, every column", full),
                           (f"Spark selective read, {selective} (1% of rows)", narrow)):
        print_table(title, ["reader", "time", "throughput (table rows)", f"vs {base}"],
                    [[name, seconds(t.median), rate(t), ratio(timings[base].median, t.median)]
                     for name, t in timings.items()])
    print("ratios above 1.00x mean faster than Spark's own Parquet path")


def _drain(load: Callable[[], Any]) -> Callable[[], None]:
    """Read every column of every row and throw it away (Spark's ``noop`` sink)."""
    def run() -> None:
        load().write.format("noop").mode("overwrite").save()
    return run


if __name__ == "__main__":
    main()

"""The main job: an end-to-end Spark pipeline on a local-directory table.

    python -m manifest_table.pipeline [--rows N] [--users N] [--table PATH]

It generates a CSV data set of user events, ingests it through Spark into a table (two
appends, one per day of data, written by Spark's own Parquet writer), erases one user
GDPR-style with the Spark delete, reads the table back through Spark's own Parquet reader,
through the Python data source (timing both) and through the Python API, time-travels to
before the erase, then runs maintenance: a Spark purge that rewrites the files holding
erased rows, and a garbage collection that physically removes the old files, after which the
erased rows exist in no data file. It prints what happened at each step. Without ``--table`` everything lives
in a temporary directory that is removed at the end; ``--table`` must name a new or empty
directory, since the job's last step garbage-collects its table with no retention."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

import manifest_table as mt

EVENT_SCHEMA = pa.schema(
    [
        ("event_id", pa.int64()),
        ("user_id", pa.int64()),
        ("email", pa.string()),
        ("country", pa.string()),
        ("kind", pa.string()),
        ("amount", pa.float64()),
        ("event_time", pa.timestamp("us", "UTC")),
    ]
)
SPARK_SCHEMA = (
    "event_id BIGINT, user_id BIGINT, email STRING, country STRING, kind STRING, amount DOUBLE, event_time TIMESTAMP"
)
COUNTRIES = ["DE", "FR", "NL", "PL", "SE", "IT", "ES", "US"]
KINDS = ["view", "click", "cart", "purchase"]
DAY_US = 86_400 * 1_000_000
START_US = 1_798_761_600_000_000  # 2027-01-01T00:00:00Z
FILES_PER_DAY = 4


def generate(directory: Path, rows: int, users: int, seed: int = 7) -> list[Path]:
    """Two days of events as CSV, ``FILES_PER_DAY`` files per day in ``directory/day=N``."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, users, rows)
    events = pa.table(
        {
            "event_id": np.arange(rows),
            "user_id": user,
            "email": pc.binary_join_element_wise("user", pa.array(user).cast(pa.string()), "@example.com", ""),
            "country": pa.array(COUNTRIES).take(rng.integers(0, len(COUNTRIES), rows)),
            "kind": pa.array(KINDS).take(rng.integers(0, len(KINDS), rows)),
            "amount": np.round(rng.random(rows) * 200, 2),
            "event_time": pa.array(START_US + np.sort(rng.integers(0, 2 * DAY_US, rows)), pa.timestamp("us", "UTC")),
        },
        schema=EVENT_SCHEMA,
    )
    days = []
    half = rows // 2
    for day, part in enumerate((events.slice(0, half), events.slice(half))):
        folder = directory / f"day={day}"
        folder.mkdir(parents=True)
        step = -(-part.num_rows // FILES_PER_DAY)
        for i in range(FILES_PER_DAY):
            pcsv.write_csv(part.slice(i * step, step), folder / f"events-{i}.csv")
        days.append(folder)
    return days


def spark_session() -> Any:
    """A local Spark with two cores whose Python workers run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import manifest_table.spark  # noqa: F401  before the session: its pandas warning filter

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("manifest_table pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Report:
    """Prints each step as it finishes, with how long it took."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def step(self, name: str, text: str) -> None:
        now = time.perf_counter()
        print(f"  {name:<12} {text}  ({now - self._started:.1f} s)", flush=True)
        self._started = now


def run(spark: Any, work: Path, table_uri: str, rows: int, users: int) -> None:
    from manifest_table.spark import delete, purge, read, register, write

    register(spark)
    report = Report()
    days = generate(work / "input", rows, users)
    csv_bytes = sum(p.stat().st_size for day in days for p in day.iterdir())
    report.step(
        "generated",
        f"{rows:,} events of {users:,} users: {len(days) * FILES_PER_DAY} CSV files, {csv_bytes / 1e6:.1f} MB",
    )

    for day in days:
        write(spark.read.schema(SPARK_SCHEMA).option("header", True).csv(str(day)), table_uri)
    table = mt.open_table(table_uri)
    report.step(
        "ingested",
        f"{len(days)} Spark appends -> version {table.version}: "
        f"{table.scan().count():,} rows in {table.manifest().totals.files} data files",
    )

    victim = int(table.scan(columns=["user_id"], where="event_id = 0").to_arrow()["user_id"][0])
    erase = f"user_id = {victim}"
    before_erase = table.version
    info = delete(spark, table_uri, erase)
    report.step(
        "erased",
        f"user {victim} (GDPR): {info.metrics['rows_deleted']} rows deleted by Spark "
        f"-> version {info.version}, no data file rewritten",
    )

    def summary(events: Any) -> tuple[int, Any, float]:
        started = time.perf_counter()
        count = events.count()
        top = events.groupBy("country").sum("amount").orderBy("sum(amount)", ascending=False).first()
        return count, top, time.perf_counter() - started

    spark_rows, top, native_time = summary(read(spark, table_uri))
    source_rows, source_top, source_time = summary(spark.read.format("manifest_table").load(table_uri))
    spark_victim = read(spark, table_uri).filter(erase).count()
    python_rows, python_victim = table.scan().count(), table.scan(where=erase).count()
    assert spark_rows == source_rows == python_rows and spark_victim == python_victim == 0
    if top is None:  # the erased user held every event
        assert source_top is None
        leader = "no events left"
    else:  # Sums of doubles depend on the order rows are added in: equal up to rounding.
        assert top["country"] == source_top["country"]
        assert math.isclose(top["sum(amount)"], source_top["sum(amount)"], rel_tol=1e-9)
        leader = f"top country {top['country']} ({top['sum(amount)']:,.2f})"
    report.step(
        "read back",
        f"Spark {spark_rows:,} rows (native Parquet path {native_time:.1f} s, Python data "
        f"source {source_time:.1f} s), Python API {python_rows:,} rows; user {victim}: "
        f"{spark_victim} rows; {leader}",
    )

    old_victim = read(spark, table_uri, version=before_erase).filter(erase).count()
    assert old_victim == table.scan(where=erase, version=before_erase).count() == info.metrics["rows_deleted"]
    report.step(
        "time travel", f"version {before_erase} (before the erase) still has {old_victim} rows of user {victim}"
    )

    # Erasing for good (docs/operations.md, "Erasing data physically"): rewrite every file
    # holding erased rows, then drop the old versions.
    purged = purge(spark, table_uri)
    report.step(
        "purge",
        f"version {purged.version}: {purged.metrics['files_removed']} files rewritten on Spark, "
        f"{purged.metrics['rows_dropped']} deleted rows dropped",
    )
    gc = table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    left = sum(
        pc.sum(pc.equal(pq.read_table(path, columns=["user_id"])["user_id"], victim)).as_py() or 0
        for path in _data_files(table_uri)
    )
    report.step(
        "gc",
        f"{sum(t.count for t in gc.deleted.values())} objects deleted; rows of user {victim} "
        f"left in any data file: {left}",
    )
    assert left == 0


def _data_files(table_uri: str) -> Iterator[Path]:
    """Every Parquet file under data/, at any depth: no erased row may hide anywhere."""
    return (Path(table_uri) / "data").rglob("*.parquet")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m manifest_table.pipeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="events to generate (default 200000)")
    parser.add_argument("--users", type=int, default=2_000, help="distinct users (default 2000)")
    parser.add_argument("--table", help="table directory to create (default: a temporary one); must be new or empty")
    args = parser.parse_args(argv)
    if args.rows < 2 or args.users < 1:
        parser.error("--rows must be at least 2 (one day of events each) and --users at least 1")
    given = Path(args.table) if args.table else None
    if given is not None and given.exists() and (not given.is_dir() or any(given.iterdir())):
        # The job ends by garbage-collecting with force and no retention: on a table that
        # holds anyone's data it would erase that table's history.
        parser.error(f"--table {args.table} is not a new or empty directory: the pipeline creates its own table there")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="manifest_table-pipeline-") as tmp:
        work = Path(tmp)
        table_uri = os.path.abspath(args.table) if args.table else str(work / "events")
        print(f"manifest_table pipeline: {args.rows:,} events into {table_uri}", flush=True)
        spark = spark_session()
        try:
            run(spark, work, table_uri, args.rows, args.users)
        finally:
            spark.stop()
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

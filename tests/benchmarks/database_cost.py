"""What a database costs against standalone tables (issue 20, docs/design/003-databases.md).

    python -m tests.benchmarks.database_cost [--repeat 30] [--seconds 5] [--procs 8] [--no-s3]
        [--workdir /tmp/database-cost]

- a 1-row append to a database's table against one to a standalone table: median latency on
  a local directory (and the ratio), and the requests each makes on S3 (moto, counted at the
  server as tests/protocol/test_s3_requests.py does), from a handle that has the table open;
- a transaction over two tables of one database: median and p95 latency on a local directory;
- commits per second with ``--procs`` writer processes appending 1-row batches for
  ``--seconds``, each to its own table: all tables in one database, against standalone tables.
Prints Markdown tables. Not a test: it times things.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

import manifest_table as mt
from tests.benchmarks._common import compare, print_table, ratio, seconds

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
ROW = pa.table({"id": [1], "v": [2]}, schema=SCHEMA)


def append_latency(work: Path, repeat: int) -> list[list[Any]]:
    db = mt.create_database(str(work / "db"))
    in_db = db.create_table("t", SCHEMA)
    db.create_table("u", SCHEMA)
    standalone = mt.create_table(str(work / "standalone"), SCHEMA)
    two = {"db": lambda: in_db.append(ROW), "standalone": lambda: standalone.append(ROW)}

    def transaction() -> None:
        with db.transaction() as tx:
            tx.table("t").append(ROW)
            tx.table("u").append(ROW)

    timings = compare({**two, "tx": transaction}, repeat)
    return [
        ["1-row append, standalone table", seconds(timings["standalone"].median), "1.00x"],
        ["1-row append, database table", seconds(timings["db"].median),
         ratio(timings["db"].median, timings["standalone"].median)],
        ["2-table transaction (median)", seconds(timings["tx"].median),
         ratio(timings["tx"].median, timings["standalone"].median)],
        ["2-table transaction (p95)", seconds(timings["tx"].p95), ""],
    ]


def s3_requests() -> list[list[Any]]:
    import boto3

    from tests.s3_server import start_moto_server, take_requests
    from tests.stores import kind_of

    endpoint, stop = start_moto_server()
    try:
        bucket = f"bench-{uuid.uuid4().hex[:20]}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                     aws_secret_access_key="x").create_bucket(Bucket=bucket)
        options = {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": "x", "secret_access_key": "x"}
        db = mt.create_database(f"s3://{bucket}/db", storage_options=options)
        in_db = db.create_table("t", SCHEMA)
        other = mt.open_database(f"s3://{bucket}/db", storage_options=options).create_table("u", SCHEMA)
        standalone = mt.create_table(f"s3://{bucket}/standalone", SCHEMA, storage_options=options)
        in_db.append(ROW)
        standalone.append(ROW)

        def counted(fn: Any) -> str:
            take_requests(endpoint)
            fn()
            counts = Counter(f"{m} {kind_of(p.split('/', 3)[3])}"
                             for m, p, _ in take_requests(endpoint) if p.startswith(f"/{bucket}/"))
            puts = sum(n for k, n in counts.items() if k.startswith("PUT"))
            gets = sum(n for k, n in counts.items() if k.startswith("GET"))
            return f"{puts} PUT, {gets} GET ({', '.join(f'{k}: {n}' for k, n in sorted(counts.items()))})"

        return [["standalone table, from an open handle", counted(lambda: standalone.append(ROW))],
                ["database table, from an open handle", counted(lambda: in_db.append(ROW))],
                ["database table, after a commit to another table", counted(
                    lambda: (other.append(ROW), take_requests(endpoint), in_db.append(ROW)))]]
    finally:
        stop()


def _writer(uri: str, database: bool, name: str, seconds_: float, start: Any, out: Any) -> None:
    table = mt.open_database(uri).table(name) if database else mt.open_table(f"{uri}/{name}")
    start.wait()
    commits, deadline = 0, time.monotonic() + seconds_
    while time.monotonic() < deadline:
        table.append(ROW)
        commits += 1
    out.put(commits)


def commit_rate(work: Path, procs: int, seconds_: float) -> list[list[Any]]:
    ctx = multiprocessing.get_context("spawn")
    rows = []
    for database in (False, True):
        uri = str(work / ("rate-db" if database else "rate-standalone"))
        db = mt.create_database(uri) if database else None
        for i in range(procs):
            db.create_table(f"t{i}", SCHEMA) if db is not None else mt.create_table(f"{uri}/t{i}", SCHEMA)
        start, out = ctx.Barrier(procs + 1), ctx.Queue()
        workers = [ctx.Process(target=_writer, args=(uri, database, f"t{i}", seconds_, start, out))
                   for i in range(procs)]
        for w in workers:
            w.start()
        start.wait()
        total = sum(out.get(timeout=seconds_ + 120) for _ in workers)
        for w in workers:
            w.join()
        rows.append([f"{procs} writers, {procs} {'tables of one database' if database else 'standalone tables'}",
                     total, f"{total / seconds_:.1f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--no-s3", action="store_true", help="skip the request counts on moto")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="database-cost-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print_table("Commit latency, local directory", ["commit", "median", "vs standalone append"],
                append_latency(work, args.repeat))
    if not args.no_s3:
        print_table("S3 requests per 1-row append (moto, counted at the server)", ["table", "requests"],
                    s3_requests())
    print_table(f"Commits per second, local directory, {args.seconds:g} s", ["writers", "commits", "commits/s"],
                commit_rate(work, args.procs, args.seconds))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

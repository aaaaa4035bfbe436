"""Interop speed: ``Table.to_duckdb`` against DuckDB's ``read_parquet`` on the very same
files (no deletes, and 1% of rows deleted), and ``manifest-table scan --format csv``
against ``pyarrow.csv.write_csv`` of the same rows.

    python -m tests.benchmarks.interop [--rows 5000000] [--csv-rows 1500000] [--repeat 5]

The DuckDB table is written in files of about 32 MiB (``--file-mb``) so that it has several
files, as a real table does; deletes are spread over every file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pyarrow.csv as pacsv
from pyroaring import BitMap

import manifest_table as mt

from ._common import (
    clone_dir,
    compare,
    data_paths,
    machine,
    make_data,
    parser,
    print_table,
    ratio,
    scratch,
    seconds,
    size,
    write_ours,
)

FULL = "SELECT count(*), sum(qty), sum(price), max(ts), max(category), max(name) FROM {}"
SELECTIVE = "SELECT count(*), sum(price), max(name) FROM {} WHERE id >= {} AND id < {}"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--csv-rows", type=int, default=1_500_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--deleted", type=float, default=0.01, help="fraction of rows deleted in the second table")
    p.add_argument("--file-mb", type=float, default=32.0, help="table option target_file_size, in MiB")
    args = p.parse_args()
    print(f"machine: {machine()}; rows: {args.rows:,}; repeat: {args.repeat} (warm page cache)")
    with scratch(args) as work:
        duckdb_queries(work, args)
        csv_output(work, args)


def duckdb_queries(work: str, args) -> None:
    import duckdb

    start = time.perf_counter()
    root = os.path.join(work, "ours")
    table = write_ours(root, make_data(args.rows), row_group_size=4 << 20,
                       target_file_size=int(args.file_mb * 2**20))
    deleted_root = clone_dir(root, os.path.join(work, "deleted"))
    rng = np.random.default_rng(1)
    deleted = mt.open_table(deleted_root)
    with deleted.transaction() as tx:
        tx.delete_positions({f.path: BitMap(rng.choice(f.rows, max(1, int(f.rows * args.deleted)), replace=False)
                                            .astype(np.uint32)) for f in deleted.manifest().files})
    paths = data_paths(table)
    print(f"setup {time.perf_counter() - start:.1f} s: {len(paths)} files, "
          f"{size(sum(os.path.getsize(x) for x in paths))} of Parquet")

    con = duckdb.connect()
    files = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    con.execute(f"CREATE VIEW raw AS FROM read_parquet({files})")
    registration = compare({"to_duckdb, no deletes": lambda: table.to_duckdb(con, "plain"),
                            f"to_duckdb, {args.deleted:.0%} deleted": lambda: deleted.to_duckdb(con, "deleted")},
                           args.repeat)
    lo = args.rows // 2
    span = max(1, args.rows // 100)
    rows = []
    for label, sql in (("full: 6 columns aggregated", FULL), ("selective: 1% of ids", SELECTIVE)):
        def query(view: str, sql: str = sql) -> object:
            return con.sql(sql.format(view, lo, lo + span)).fetchall()
        results = compare({"read_parquet": lambda: query("raw"), "to_duckdb": lambda: query("plain"),
                           "to_duckdb with deletes": lambda: query("deleted")}, args.repeat)
        base = results["read_parquet"]
        for name, timing in results.items():
            rows.append([label, name, seconds(timing.median), seconds(timing.min),
                         "" if name == "read_parquet" else ratio(timing.median, base.median)])
            label = ""
    print_table("DuckDB queries (ratio = engine / read_parquet on the same files, medians)",
                ["query", "engine", "wall median", "wall best", "vs read_parquet"], rows)
    print_table("to_duckdb registration (plan, load bitmaps, create the view)", ["table", "wall median"],
                [[name, seconds(t.median)] for name, t in registration.items()])


def csv_output(work: str, args) -> None:
    root = os.path.join(work, "csv")
    table = write_ours(root, make_data(args.csv_rows))
    paths = data_paths(table)
    rows = table.to_arrow()
    cli = [sys.executable, "-m", "manifest_table.cli", "scan", root, "--format", "csv"]
    text = [sys.executable, "-m", "manifest_table.cli", "scan", root, "--format", "table", "--limit", "0"]
    pyarrow_cli = [sys.executable, "-c", "import sys, pyarrow.csv as c, pyarrow.parquet as pq; "
                   f"c.write_csv(pq.read_table({paths!r}), sys.stdout.buffer)"]
    with open(os.devnull, "wb") as devnull:
        results = compare({
            "manifest-table scan --format csv": lambda: subprocess.run(cli, stdout=devnull, check=True),
            "python -c pyarrow read + write_csv": lambda: subprocess.run(pyarrow_cli, stdout=devnull, check=True),
            "pyarrow.csv.write_csv (in process, rows in memory)": lambda: pacsv.write_csv(rows, devnull),
            "manifest-table scan --format table --limit 0": lambda: subprocess.run(text, stdout=devnull, check=True),
        }, args.repeat)
    ours = results["manifest-table scan --format csv"]
    print_table(f"{args.csv_rows:,} rows as text to /dev/null (ratio = our CSV / this, medians)",
                ["writer", "wall median", "wall best", "our CSV / this"],
                [[name, seconds(t.median), seconds(t.min), ratio(ours.median, t.median)]
                 for name, t in results.items()])


if __name__ == "__main__":
    main()

"""Throughput on the same rows (10 mixed columns): append, full scan, 2-column projection, 1%
selective scan, pyarrow vs manifest_table vs deltalake vs pyiceberg, interleaved; a full scan
with 1% of rows deleted; ingestion from pandas and Python rows; peak memory of a streamed append.

    python -m tests.benchmarks.throughput [--rows 10000000] [--repeat 3]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

import manifest_table as mt

from . import _peers
from ._common import (
    WIDE_SCHEMA,
    Timing,
    clone_dir,
    compare,
    data_paths,
    machine,
    make_wide_data,
    parser,
    print_table,
    ratio,
    scratch,
    seconds,
    size,
)

OURS, PYARROW, PYARROW_OWN = "manifest_table", "pyarrow", "pyarrow, own file"
CODEC = "zstd"
PROJECTION = ["price", "name"]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(peers="deltalake,pyiceberg")
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--selectivity", type=float, default=0.01, help="fraction of the id range the filter keeps")
    p.add_argument("--pylist-rows", type=int, default=500_000, help="rows of the list-of-dicts ingestion")
    p.add_argument("--row-group-mb", type=float, help="table option row_group_size in MiB (default: the library's)")
    p.add_argument("--file-mb", type=float, help="table option target_file_size in MiB (default: the library's)")
    p.add_argument("--compression", help="table option compression (default: the library's)")
    p.add_argument("--only", default="append,scan,delete,ingest,memory", help="parts to run, comma-separated")
    args = p.parse_args()
    options = {k: v for k, v in (("row_group_size", args.row_group_mb and int(args.row_group_mb * 2**20)),
                                 ("target_file_size", args.file_mb and int(args.file_mb * 2**20)),
                                 ("compression", args.compression)) if v}
    parts = set(args.only.split(","))
    print(f"machine: {machine()}; rows: {args.rows:,} x {len(WIDE_SCHEMA)} columns; repeat: {args.repeat}; "
          f"load average at start: {os.getloadavg()[0]:.1f}")
    peers = _peers.selected(args.peers)
    data = make_wide_data(args.rows)
    summary: dict[str, dict[str, Timing]] = {}
    with scratch(args) as work:
        if "append" in parts:
            summary["write / append"] = appends(work, data, peers, args.repeat, options)
        root = os.path.join(work, "ours")
        mt.create_table(root, WIDE_SCHEMA, **options).append(data)
        if "scan" in parts:
            summary.update(scans(work, root, data, args, peers))
        if "delete" in parts:
            deletes(work, root, args.repeat)
        if "ingest" in parts:
            ingestion(work, data, args, options)
        if "memory" in parts:
            memory(work, args.rows, options)
    print_summary(summary, [PYARROW, PYARROW_OWN, OURS, *(cls.name for cls in peers)])


def appends(work: str, data: pa.Table, peers: list[Any], repeat: int, options: dict[str, Any]) -> dict[str, Timing]:
    """Each engine writes the rows into a fresh directory (cleared untimed before each call)."""
    def at(name: str) -> str:
        return os.path.join(work, f"append-{name}")
    writers: dict[str, Callable[[], Any]] = {
        PYARROW: lambda: pq.write_table(data, os.path.join(at(PYARROW), "data.parquet"), compression=CODEC),
        OURS: lambda: mt.create_table(at(OURS), WIDE_SCHEMA, **options).append(data),
        **{cls.name: (lambda cls=cls: cls.create(at(cls.name), data)) for cls in peers},
    }

    def clear(name: str) -> None:
        shutil.rmtree(at(name), ignore_errors=True)
        if name == PYARROW:
            os.makedirs(at(name))
    results = compare(writers, repeat, before=clear)
    rows = []
    for name, timing in results.items():
        files = [os.path.join(d, f) for d, _, fs in os.walk(at(name)) for f in fs if f.endswith(".parquet")]
        codecs = {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files[:1]}
        rows.append([name, seconds(timing.median), seconds(timing.min), seconds(timing.cpu_median),
                     f"{len(files)} / {size(sum(map(os.path.getsize, files)))}", ",".join(sorted(codecs)),
                     "" if name == OURS else f"{ratio(results[OURS].median, timing.median)} / "
                                             f"{ratio(results[OURS].cpu_median, timing.cpu_median)}"])
    print_table(f"Append {data.num_rows:,} rows (ratio = ours / engine: below 1 means ours is faster)",
                ["engine", "wall median", "wall best", "CPU median", "files / bytes", "codec",
                 "ours/engine wall / CPU"], rows)
    return results


def scans(work: str, root: str, data: pa.Table, args: Any, peers: list[Any]) -> dict[str, dict[str, Timing]]:
    """Every engine reads the files our append wrote (peers through hard links); "pyarrow,
    own file" reads the one file ``write_table`` made of the same rows (its default row
    groups of 1Mi rows), the single-file layout a plain pyarrow user gets."""
    paths = data_paths(mt.open_table(root))
    own = os.path.join(work, "pyarrow-own.parquet")
    pq.write_table(data, own, compression=CODEC)
    handles = [(cls.name, cls.from_files(os.path.join(work, f"scan-{cls.name}"), paths)) for cls in peers]
    lo = args.rows // 2
    ids = (lo, lo + max(1, int(args.rows * args.selectivity)))
    groups = sum(pq.ParquetFile(x).metadata.num_row_groups for x in paths)
    cases = {"full scan": (None, None), f"{len(PROJECTION)}-column projection": (PROJECTION, None),
             f"{args.selectivity:.0%} selective scan (sorted key)": (None, ids)}
    engines: dict[str, Callable[[list[str] | None, tuple[int, int] | None], pa.Table]] = {
        PYARROW: lambda cols, r: pq.read_table(paths, columns=cols, filters=_dnf(r)),
        PYARROW_OWN: lambda cols, r: pq.read_table(own, columns=cols, filters=_dnf(r)),
        OURS: lambda cols, r: _ours(root, cols, r),
        **{name: handle.read for name, handle in handles},
    }
    out, rows = {}, []
    for label, (columns, id_range) in cases.items():
        counts: dict[str, int] = {}

        def run(name: str, columns: Any = columns, id_range: Any = id_range,
                counts: dict[str, int] = counts) -> Callable[[], None]:
            return lambda: counts.__setitem__(name, engines[name](columns, id_range).num_rows)
        out[label] = results = compare({name: run(name) for name in engines}, args.repeat)
        for name, timing in results.items():
            rows.append([label, name, seconds(timing.median), seconds(timing.min), seconds(timing.cpu_median),
                         f"{counts[name]:,}", "" if name == OURS else
                         f"{ratio(results[OURS].median, timing.median)} / "
                         f"{ratio(results[OURS].cpu_median, timing.cpu_median)}"])
            label = ""
    print_table(f"Scans of the same {len(paths)} files ({groups} row groups)",
                ["case", "engine", "wall median", "wall best", "CPU median", "rows", "ours/engine wall / CPU"], rows)
    return out


def deletes(work: str, root: str, repeat: int) -> None:
    """The same table with 1% of each file's rows deleted at random positions (tombstones)."""
    clone = clone_dir(root, os.path.join(work, "deleted"))
    table = mt.open_table(clone)
    rng = np.random.default_rng(1)
    with table.transaction() as tx:
        tx.delete_positions({f.path: BitMap(rng.choice(f.rows, max(1, f.rows // 100), replace=False)
                                            .astype(np.uint32)) for f in table.manifest().files})
    paths = data_paths(table)
    results = compare({"clean": lambda: _ours(root, None, None), OURS: lambda: _ours(clone, None, None),
                       PYARROW: lambda: pq.read_table(paths)}, repeat)
    clean = results["clean"]
    print_table("Full scan with 1% of rows deleted (ours; ratio to the same table without deletes)",
                ["table", "wall median", "CPU median", "wall / CPU vs clean"],
                [[{OURS: "1% deleted", PYARROW: "pyarrow, no deletes"}.get(name, name), seconds(t.median),
                  seconds(t.cpu_median), f"{ratio(t.median, clean.median)} / {ratio(t.cpu_median, clean.cpu_median)}"]
                 for name, t in results.items()])


def ingestion(work: str, data: pa.Table, args: Any, options: dict[str, Any]) -> None:
    """Appending a pandas DataFrame and a list of dicts vs pyarrow converting them
    (``from_pandas`` / ``from_pylist``) and writing one file."""
    frame = data.to_pandas()
    pylist = data.slice(0, args.pylist_rows).to_pylist()
    path = os.path.join(work, "ingest", "data.parquet")

    def clear(name: str) -> None:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        os.makedirs(os.path.dirname(path))
    rows = []
    inputs: list[tuple[str, Any, Callable[[], pa.Table]]] = [
        ("pandas DataFrame", frame, lambda: pa.Table.from_pandas(frame, preserve_index=False)),
        ("list of dicts", pylist, lambda: pa.Table.from_pylist(pylist, schema=WIDE_SCHEMA))]
    for label, source, convert in inputs:
        def theirs(convert: Callable[[], pa.Table] = convert) -> None:
            pq.write_table(convert(), path, compression=CODEC)

        def ours(source: Any = source) -> None:
            mt.create_table(os.path.dirname(path), WIDE_SCHEMA, **options).append(source)
        results = compare({PYARROW: theirs, OURS: ours}, args.repeat, before=clear)
        mine, base = results[OURS], results[PYARROW]
        rows.append([f"{label}, {len(source):,} rows", seconds(base.median), seconds(mine.median),
                     f"{ratio(mine.median, base.median)} / {ratio(mine.cpu_median, base.cpu_median)}"])
    print_table("Ingestion (pyarrow: convert + write_table, one file)",
                ["input", "pyarrow", OURS, "ours/pyarrow wall / CPU"], rows)


_STREAM = textwrap.dedent("""
    import sys
    import pyarrow as pa, pyarrow.parquet as pq
    import manifest_table as mt
    from tests.benchmarks._common import WIDE_SCHEMA, make_wide_data
    engine, root, rows, options = sys.argv[1], sys.argv[2], int(sys.argv[3]), eval(sys.argv[4])
    def batches():
        for start in range(0, rows, 100_000):
            yield from make_wide_data(min(100_000, rows - start), start).to_batches()
    def peak():  # VmHWM: ru_maxrss would carry the parent's peak over exec
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM"))
    reader = pa.RecordBatchReader.from_batches(WIDE_SCHEMA, batches())
    base = peak()
    if engine == "manifest_table":
        mt.create_table(root, WIDE_SCHEMA, **options).append(reader)
    else:
        with pq.ParquetWriter(root + ".parquet", WIDE_SCHEMA, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)
    print(base, peak())
""")


def memory(work: str, rows: int, options: dict[str, Any]) -> None:
    """Peak RSS of appending ``rows`` rows from a RecordBatchReader whose source generates
    them 100,000 at a time, in a fresh process (Linux VmHWM), next to pyarrow streaming the
    same batches into one file with ParquetWriter."""
    out = []
    for engine in (PYARROW, OURS):
        done = subprocess.run([sys.executable, "-c", _STREAM, engine, os.path.join(work, f"stream-{engine}"),
                               str(rows), repr(options)], capture_output=True, text=True, check=True)
        base, peak = map(int, done.stdout.split())
        out.append([engine, size(peak), size(base)])
    print_table(f"Peak memory of a streamed append of {rows:,} rows (RecordBatchReader, 100,000-row batches)",
                ["engine", "peak RSS", "RSS before the append (interpreter + imports)"], out)


def print_summary(summary: dict[str, dict[str, Timing]], names: list[str]) -> None:
    """The four systems side by side: wall medians, and ours / each."""
    others = [n for n in names if n != OURS]
    rows = []
    for operation, results in summary.items():
        rows.append([operation, *(seconds(results[n].median) if n in results else "-" for n in names),
                     *(ratio(results[OURS].median, results[n].median) if n in results else "-" for n in others)])
    print_table("Summary (wall medians, engines interleaved within each operation; \"pyarrow\" reads our "
                "files, \"pyarrow, own file\" the one file write_table made)",
                ["operation", *names, *(f"ours/{n}" for n in others)], rows)


def _ours(root: str, columns: list[str] | None, ids: tuple[int, int] | None) -> pa.Table:
    where = f"id >= {ids[0]} AND id < {ids[1]}" if ids else None
    return mt.open_table(root).scan(columns=columns, where=where).to_arrow()


def _dnf(ids: tuple[int, int] | None) -> list[tuple[str, str, int]] | None:
    return [("id", ">=", ids[0]), ("id", "<", ids[1])] if ids else None


if __name__ == "__main__":
    main()

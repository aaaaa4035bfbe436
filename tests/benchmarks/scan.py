"""Scan throughput: full scan, selective scan (~1% of row groups) and a one-column projection,
ours vs raw pyarrow over the very same Parquet files, and vs Delta, Iceberg (same files) and
Lance (same rows in its own format).

    python -m tests.benchmarks.scan [--rows 10000000] [--repeat 5]
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow.parquet as pq
from pyroaring import BitMap

import manifest_table as mt

from . import _peers
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


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--row-group-mb", type=float, default=4.0,
                   help="table option row_group_size (uncompressed MiB): 4 gives ~150 row groups at 10M rows")
    p.add_argument("--selectivity", type=float, default=0.01, help="fraction of the id range the filter keeps")
    args = p.parse_args()
    print(f"machine: {machine()}; rows: {args.rows:,}; repeat: {args.repeat} (warm page cache)")

    with scratch(args) as work:
        start = time.perf_counter()
        root = os.path.join(work, "ours")
        table = write_ours(root, make_data(args.rows), row_group_size=int(args.row_group_mb * 2**20))
        paths = data_paths(table)
        peers = [(cls.name, cls.from_files(os.path.join(work, cls.name), paths))
                 for cls in _peers.selected(args.peers)]
        metas = [pq.ParquetFile(path).metadata for path in paths]
        groups = sum(m.num_row_groups for m in metas)
        print(f"setup {time.perf_counter() - start:.1f} s: {len(paths)} files, {groups} row groups, "
              f"{size(sum(os.path.getsize(x) for x in paths))} of Parquet (zstd)")

        span = max(1, int(args.rows * args.selectivity))
        lo = args.rows // 2
        ids = (lo, lo + span)
        hit = sum(1 for m in metas for i in range(m.num_row_groups)
                  if _overlaps(m.row_group(i).column(0).statistics, ids))
        cases = [
            ("full scan", None, None),
            (f"selective: id in [{ids[0]}, {ids[1]}), {hit}/{groups} row groups", None, ids),
            ("projection: 1 column (price)", ["price"], None),
        ]
        engines = [
            ("manifest_table", lambda cols, r: _ours(root, cols, r)),
            ("pyarrow.parquet", lambda cols, r: pq.read_table(paths, columns=cols, filters=_dnf(r))),
            *[(name, peer.read) for name, peer in peers],
        ]
        rows = []
        for label, columns, id_range in cases:
            counts: dict[str, int] = {}

            def run(name, read, columns=columns, id_range=id_range):
                return lambda: counts.__setitem__(name, read(columns, id_range).num_rows)
            results = compare({name: run(name, read) for name, read in engines}, args.repeat)
            ours = results["manifest_table"]
            for name, timing in results.items():
                rows.append([label, name, seconds(timing.median), seconds(timing.min), seconds(timing.cpu_median),
                             f"{counts[name]:,}", "" if name == "manifest_table" else
                             f"{ratio(ours.median, timing.median)} / {ratio(ours.cpu_median, timing.cpu_median)}"])
                label = ""
        print_table("Scan (engines interleaved; ratio = ours / engine: below 1 means ours is faster)",
                    ["case", "engine", "wall median", "wall best", "CPU median", "rows", "ours/engine wall / CPU"],
                    rows)
        tombstones(work, root, args.repeat)


def tombstones(work: str, root: str, repeat: int) -> None:
    """What deletion bitmaps cost a full scan: the same table with deleted rows scattered."""
    rng = np.random.default_rng(1)
    scans = {"no deletes": lambda: _ours(root, None, None)}
    for label, fraction in (("1 row per file", 0), ("1% of rows", 0.01), ("10% of rows", 0.10)):
        clone = clone_dir(root, os.path.join(work, f"deleted-{fraction}"))
        table = mt.open_table(clone)
        with table.transaction() as tx:
            tx.delete_positions({f.path: BitMap(rng.choice(f.rows, max(1, int(f.rows * fraction)), replace=False)
                                                .astype(np.uint32)) for f in table.manifest().files})
        scans[f"{label} deleted"] = lambda clone=clone: _ours(clone, None, None)
    results = compare(scans, repeat)
    base = results["no deletes"]
    print_table("Full scan with tombstones (ours; ratio to the same table without deletes)",
                ["table", "wall median", "CPU median", "wall / CPU vs no deletes"],
                [[name, seconds(t.median), seconds(t.cpu_median),
                  f"{ratio(t.median, base.median)} / {ratio(t.cpu_median, base.cpu_median)}"]
                 for name, t in results.items()])


def _ours(root: str, columns: list[str] | None, ids: tuple[int, int] | None):
    where = f"id >= {ids[0]} AND id < {ids[1]}" if ids else None
    return mt.open_table(root).scan(columns=columns, where=where).to_arrow()


def _dnf(ids: tuple[int, int] | None):
    return [("id", ">=", ids[0]), ("id", "<", ids[1])] if ids else None


def _overlaps(stats, ids: tuple[int, int]) -> bool:
    return stats is None or not stats.has_min_max or (stats.max >= ids[0] and stats.min < ids[1])


if __name__ == "__main__":
    main()

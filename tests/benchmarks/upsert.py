"""The cost of an upsert: 1,000 source rows, half of them matching keys of the table, half
new; time and bytes written, ours (tombstones + one new file) vs deltalake ``merge`` and
pyiceberg ``upsert`` (both copy-on-write) over the same Parquet files.

    python -m tests.benchmarks.upsert [--rows 10000000] [--source 1000] [--repeat 3]

Two layouts of the matching keys: spread at random over the whole table (every file holds
some: nobody can skip a file), and clustered in one id range (stats prune the other files).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

import manifest_table as mt

from . import _peers
from ._common import (
    clone_dir,
    data_paths,
    fresh_copy_rows,
    machine,
    make_data,
    parser,
    print_table,
    scratch,
    size,
    write_ours,
)

Setup = Callable[[str], Any]                # fresh directory -> handle
Action = Callable[[Any, pa.Table], str]     # (handle, source) -> note


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000, help="rows in the table")
    p.add_argument("--source", type=int, default=1000, help="rows in the source (half matching)")
    p.add_argument("--repeat", type=int, default=3, help="upserts per variant (each on a fresh copy)")
    p.set_defaults(peers="deltalake,pyiceberg")
    args = p.parse_args()
    print(f"machine: {machine()}")
    peers = _peers.selected(args.peers)
    with scratch(args) as work:
        src = os.path.join(work, "src")
        paths = data_paths(write_ours(src, make_data(args.rows)))
        for layout in ("spread", "clustered"):
            run(os.path.join(work, layout), src, paths, source_rows(args.rows, args.source, layout),
                peers, args.repeat, layout, args.rows)


def source_rows(rows: int, count: int, layout: str) -> pa.Table:
    """``count`` rows of the table's schema: half with ids the table holds (spread at random
    or one run in the middle), half with new ids past its end; other columns changed."""
    rng = np.random.default_rng(42)
    half = count // 2
    if layout == "spread":
        matching = np.sort(rng.choice(rows, half, replace=False))
    else:
        matching = np.arange(rows // 2, rows // 2 + half)
    ids = np.concatenate([matching, np.arange(rows, rows + count - half)])
    fresh = make_data(count, seed=7)
    return fresh.set_column(0, "id", pa.array(ids, pa.int64()))


def run(work: str, src: str, paths: list[str], source: pa.Table, peers: list[Any], repeat: int,
        layout: str, rows: int) -> None:
    variants: list[tuple[str, Setup, Action]] = [
        ("manifest_table upsert", lambda d: mt.open_table(clone_dir(src, d)), _ours),
    ]
    for cls in peers:
        if cls is _peers.Lance:
            continue  # not a peer here: the targets are deltalake and pyiceberg
        variants.append((f"{cls.name} {'merge' if cls is _peers.Delta else 'upsert'}",
                         lambda d, cls=cls: cls.from_files(d, paths), lambda h, s: h.upsert(s)))
    table_rows = fresh_copy_rows(work, [(label, setup, lambda h, _, act=act: act(h, source))
                                        for label, setup, act in variants], repeat)
    files_note = f"{len(paths)} file(s), {size(sum(map(os.path.getsize, paths)))} of Parquet"
    print_table(f"Upsert {source.num_rows:,} rows (half matching, {layout}) into {rows:,} rows ({files_note}; "
                f"median of {repeat}, each on a fresh copy)",
                ["method", "time", "objects / bytes written", "time vs ours", "bytes vs ours", "note"], table_rows)


def _ours(table: mt.Table, source: pa.Table) -> str:
    info = table.upsert(source, ["id"])
    return f"{info.metrics['rows_updated']} updated, {info.metrics['rows_inserted']} inserted"


if __name__ == "__main__":
    main()

"""The cost of deleting one row: time and bytes written, ours (a tombstone) vs rewriting
(ours via overwrite, raw pyarrow) vs Delta, Iceberg (copy-on-write over the same Parquet files)
and Lance (deletion files); and how many data files a delete opens in a table of many files.

    python -m tests.benchmarks.delete [--rows 1000000,10000000] [--repeat 3] [--files 100]
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

import manifest_table as mt
from manifest_table.storage import MemoryStore

from . import _peers
from ._common import (
    SCHEMA,
    CountingStore,
    clone_dir,
    data_paths,
    describe,
    fresh_copy_rows,
    machine,
    make_data,
    parser,
    print_table,
    scratch,
    seconds,
    size,
    write_ours,
)

Setup = Callable[[str], Any]          # fresh directory -> handle
Action = Callable[[Any, int], str]    # (handle, id) -> note


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", default="1000000,10000000", help="table sizes, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="deletes per variant (each on a fresh copy)")
    p.add_argument("--files", type=int, default=100, help="files in the file-pruning table")
    args = p.parse_args()
    print(f"machine: {machine()}")
    peers = _peers.selected(args.peers)
    with scratch(args) as work:
        for rows in (int(r) for r in args.rows.split(",")):
            one_row(os.path.join(work, f"rows-{rows}"), rows, peers, args.repeat)
        files_opened(os.path.join(work, "files"), args.files, peers)


def one_row(work: str, rows: int, peers: list[Any], repeat: int) -> None:
    src = os.path.join(work, "src")
    paths = data_paths(write_ours(src, make_data(rows)))
    lance_src = None
    variants: list[tuple[str, Setup, Action]] = [
        ("manifest_table delete (tombstone)", lambda d: mt.open_table(clone_dir(src, d)), _ours_delete),
        ("manifest_table overwrite (rewrite all)", lambda d: mt.open_table(clone_dir(src, d)), _ours_rewrite),
        ("pyarrow: rewrite every file", lambda d: clone_dir(src, d), _pyarrow_rewrite),
    ]
    for cls in peers:
        if cls is _peers.Lance:  # its own format: convert once, then clone
            lance_src = lance_src or cls.from_files(os.path.join(work, "lance-src"), paths).root
            variants.append((f"{cls.name} delete", lambda d: _peers.Lance(clone_dir(lance_src, d)),
                             lambda h, x: h.delete_id(x)))
        else:
            variants.append((f"{cls.name} delete", lambda d, cls=cls: cls.from_files(d, paths),
                             lambda h, x: h.delete_id(x)))

    table_rows = fresh_copy_rows(work, [(label, setup, lambda h, i, act=act: act(h, rows // 2 + 7919 * i))
                                        for label, setup, act in variants], repeat)
    files_note = f"{len(paths)} file(s), {size(sum(map(os.path.getsize, paths)))} of Parquet"
    print_table(f"Delete 1 row of {rows:,} ({files_note}; median of {repeat}, each on a fresh copy)",
                ["method", "time", "objects / bytes written", "time vs tombstone", "bytes vs tombstone", "note"],
                table_rows)


def _ours_delete(table: mt.Table, value: int) -> str:
    info = table.delete(f"id = {value}")
    return f"{info.metrics.get('rows_deleted')} row(s)"


def _ours_rewrite(table: mt.Table, value: int) -> str:
    table.overwrite(table.scan(where=f"NOT (id = {value})").to_arrow())
    return ""


def _pyarrow_rewrite(root: str, value: int) -> str:
    """What a table without deletion support does: read every file, drop the row, write it
    back (same row groups, same codec)."""
    out = os.path.join(root, "rewritten")
    os.makedirs(out)
    for path in sorted(os.listdir(os.path.join(root, "data"))):
        source = pq.ParquetFile(os.path.join(root, "data", path))
        table = source.read()
        table = table.filter(pc.not_equal(table["id"], value))
        pq.write_table(table, os.path.join(out, path), compression="zstd",
                       row_group_size=source.metadata.row_group(0).num_rows)
    return ""


def files_opened(work: str, files: int, peers: list[Any], rows_per_file: int = 10_000) -> None:
    """A table of ``files`` appends. With ids clustered (each file holds a range) a delete
    opens only the file whose stats may match; with ids shuffled every file may match."""
    rows = []
    total = files * rows_per_file
    target = total // 2 + 17
    for layout in ("clustered ids", "shuffled ids"):  # on a MemoryStore: every data file read is a GET
        store = CountingStore(MemoryStore())
        table = mt.create_table("memory://files", SCHEMA, store=store)
        order = make_data(total)
        if layout == "shuffled ids":
            order = order.take(pc.sort_indices(order["name"]))  # a random permutation of ids
        for i in range(files):
            table.append(order.slice(i * rows_per_file, rows_per_file))
        store.take()
        start = time.perf_counter()
        table.delete(f"id = {target}")
        elapsed = time.perf_counter() - start
        counts = store.take()
        rows.append([f"{layout}, memory", "manifest_table", f"{counts[('get', 'data')]} of {files}", seconds(elapsed),
                     describe(counts)])
    # The same clustered table in a local directory, timed against the peers over its files.
    table = mt.create_table(os.path.join(work, "ours"), SCHEMA)
    for i in range(files):
        table.append(make_data(rows_per_file, start=i * rows_per_file))
    paths = data_paths(table)
    local_peers = [(c.name, c.from_files(os.path.join(work, c.name), paths)) for c in peers if c is not _peers.Lance]
    planned = len(table.scan(where=f"id = {target}").plan_files())
    start = time.perf_counter()
    table.delete(f"id = {target}")
    rows.append(["clustered ids, local dir", "manifest_table", f"{planned} of {files} (planned)",
                 seconds(time.perf_counter() - start), "tombstone"])
    for name, peer in local_peers:
        start = time.perf_counter()
        note = peer.delete_id(target)
        rows.append(["clustered ids, local dir", name, "-", seconds(time.perf_counter() - start), note])
    print_table(f"Delete 1 row from a table of {files} files x {rows_per_file:,} rows: data files opened",
                ["layout", "engine", "files opened", "time", "requests / note"], rows)


if __name__ == "__main__":
    main()

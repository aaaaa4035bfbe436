"""Peak memory of reading the change feed of one commit that deleted, or updated, 10M rows
(issue 33: at most 256 MiB above the process's baseline), with rows streamed and counted.

Each read runs in a fresh process: its baseline is its resident memory once the table is
open, its peak the kernel's high-water mark (``VmHWM``) after the last batch. With
``--peers deltalake``, the same commits on a Delta table with its change data feed enabled,
read with ``DeltaTable.load_cdf`` (which writes extra CDC files at every commit).

    python -m tests.benchmarks.changes_memory [--rows 10000000] [--peers deltalake]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa

import manifest_table as mt

from ._common import SCHEMA, machine, make_data, parser, scratch

_CHUNK = 1_000_000
LIMIT_MIB = 256


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(peers="")
    p.add_argument("--rows", type=int, default=10_000_000, help="rows deleted, and rows updated, in one commit")
    p.add_argument("--child", nargs=3, metavar=("KIND", "URI", "VERSION"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_read(*args.child)))
        return
    print(f"machine: {machine()}")
    print(f"| commit | rows changed | change rows read | seconds | peak RSS above baseline | limit {LIMIT_MIB} MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    with scratch(args) as work:
        for kind, version in _ours(work, args.rows):
            _report(f"manifest_table {kind}", args.rows, _child("ours", os.path.join(work, kind), version))
        if "deltalake" in args.peers:
            for kind, version in _delta(work, args.rows):
                _report(f"deltalake {kind} (load_cdf)", args.rows, _child("delta", os.path.join(work, f"delta-{kind}"),
                                                                          version))


def _chunks(rows: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, rows, _CHUNK):
        yield from make_data(min(_CHUNK, rows - start), start).to_batches()


def _ours(work: str, rows: int) -> list[tuple[str, int]]:
    """Two tables of ``rows`` rows: all deleted in one commit, all updated in one commit."""
    done = []
    for kind in ("delete", "update"):
        table = mt.create_table(os.path.join(work, kind), SCHEMA)
        table.append(pa.RecordBatchReader.from_batches(SCHEMA, _chunks(rows)))
        info = table.delete("id >= 0") if kind == "delete" else table.update({"qty": "qty + 1"})
        done.append((kind, info.version))
    return done


def _delta(work: str, rows: int) -> list[tuple[str, int]]:
    from deltalake import DeltaTable, write_deltalake

    done = []
    for kind in ("delete", "update"):
        uri = os.path.join(work, f"delta-{kind}")
        write_deltalake(uri, pa.RecordBatchReader.from_batches(SCHEMA, _chunks(rows)),
                        configuration={"delta.enableChangeDataFeed": "true"})
        table = DeltaTable(uri)
        table.delete("id >= 0") if kind == "delete" else table.update(updates={"qty": "qty + 1"})
        done.append((kind, table.version()))
    return done


def _child(kind: str, uri: str, version: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "tests.benchmarks.changes_memory", "--child", kind, uri, str(version)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _read(kind: str, uri: str, version: str) -> dict[str, float]:
    """In the child process: stream the changes of ``version``, counting rows by change type."""
    v = int(version)
    if kind == "ours":
        batches = mt.open_table(uri).changes(v - 1, v).to_batches()
    else:
        from deltalake import DeltaTable

        batches = iter(DeltaTable(uri).load_cdf(starting_version=v, ending_version=v))
    baseline = _status("VmRSS")
    started = time.perf_counter()
    found: Counter[str] = Counter()
    for batch in batches:
        found.update(batch.column("_change_type").to_pylist())
    return {"seconds": time.perf_counter() - started, "rows": sum(found.values()),
            "kinds": dict(found), "above_mib": (_status("VmHWM") - baseline) / 1024}  # type: ignore[dict-item]


def _status(field: str) -> int:
    """A ``/proc/self/status`` memory figure, in KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _report(name: str, rows: int, found: dict) -> None:
    above = found["above_mib"]
    print(f"| {name} | {rows:,} | {found['rows']:,} ({', '.join(f'{k} {n:,}' for k, n in found['kinds'].items())}) "
          f"| {found['seconds']:.1f} | {above:.0f} MiB | {'met' if above <= LIMIT_MIB else 'MISSED'} |", flush=True)


if __name__ == "__main__":
    main()

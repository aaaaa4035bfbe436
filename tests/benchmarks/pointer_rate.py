"""Commits per second when the store limits writes to one object (GCS: about one per second
to an object name), with the pointer policy of docs/protocol.md ("The pointer under rate
limits") and, for comparison, with a pointer that must move before each acknowledgement.

    python -m tests.benchmarks.pointer_rate [--seconds 5] [--writers 1,4] [--rate 1]

Each run appends one-row batches from threads for ``--seconds`` to a local table (tmpfs when
there is one) behind ``tests.stores.RateLimitedStore``, then checks every acknowledged
commit is in the table once, and counts a fresh reader's requests.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time

import pyarrow as pa

import manifest_table as mt
from manifest_table.format.pointer import POINTER_KEY, decode_pointer
from manifest_table.storage import ObjectStore, store_for_uri

from ..stores import CountingStore, RateLimitedStore
from ._common import machine, parser, print_table

SCHEMA = pa.schema([("writer", pa.int64()), ("seq", pa.int64())])


class PointerGatedStore(RateLimitedStore):
    """The same limit where readers do not probe past the pointer: every commit must wait
    until its pointer move is allowed, as on a store without the lag policy."""

    @property
    def pointer_may_lag(self) -> bool:
        return False


def run(root: str, wrap: type[RateLimitedStore] | None, rate: float, writers: int, seconds: float) -> list[str]:
    inner = store_for_uri(root)
    store: ObjectStore = inner if wrap is None else wrap(inner, writes_per_second=rate)
    mt.create_table(root, SCHEMA, store=store)
    acks: list[tuple[int, str]] = []
    stop = time.monotonic() + seconds

    def write(writer: int) -> None:
        table = mt.open_table(root, store=store)
        seq = 0
        while time.monotonic() < stop:
            info = table.append(pa.table({"writer": [writer], "seq": [seq]}, schema=SCHEMA))
            acks.append((info.version, info.commit_id))
            seq += 1

    started = time.monotonic()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    reader = CountingStore(store)
    table = mt.open_table(root, store=reader)
    rows = table.scan().count()
    assert rows == len(acks) == table.version and len({v for v, _ in acks}) == len(acks), "lost a commit"
    lag = table.version - decode_pointer(*inner.get_with_etag(POINTER_KEY)).version
    requests = sum(reader.counts.values())
    refused = wrap and store.refused  # type: ignore[attr-defined]
    policy = {None: "no limit", RateLimitedStore: "limit, pointer may lag",
              PointerGatedStore: "limit, pointer gates each commit"}[wrap]
    return [policy, str(writers), str(len(acks)), f"{len(acks) / elapsed:.1f}",
            f"{(refused or 0) / max(1, len(acks)):.2f}", str(lag), str(requests)]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="seconds of appends per run")
    p.add_argument("--writers", default="1,4", help="writer threads per run, comma-separated")
    p.add_argument("--rate", type=float, default=1.0, help="writes per second allowed to one object")
    args = p.parse_args()
    print(f"machine: {machine()}")
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="mt-bench-", dir=tmpfs) as work:
        for writers in [int(w) for w in args.writers.split(",")]:
            for wrap in (None, RateLimitedStore, PointerGatedStore):
                root = os.path.join(work, f"{writers}-{wrap.__name__ if wrap else 'none'}")
                rows.append(run(root, wrap, args.rate, writers, args.seconds))
    print_table(f"Commits under a pointer write limit of {args.rate:g}/s ({args.seconds:g} s per run, "
                "1-row appends, local tmpfs)",
                ["pointer", "writers", "commits", "commits/s", "refused pointer writes per commit",
                 "final pointer lag", "requests of open + count"], rows)


if __name__ == "__main__":
    main()

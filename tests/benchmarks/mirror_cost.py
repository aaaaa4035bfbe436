"""What the Iceberg and Delta mirrors add to a commit (issues 22 and 31), at 10 and 100,000 files.

    python -m tests.benchmarks.mirror_cost [--sizes 10,100000] [--repeat 5] [--work /tmp/mirror-cost]
                                           [--targets 40] [--history 100]

First the targets of issue 31 (``--targets`` interleaved pairs of commits; 0 skips them): a
1-row append to a table with both mirrors against the same append to a table without, A/B
interleaved, once the mirrored table holds ``--history`` retained versions (its Iceberg
metadata then lists ``max_snapshots`` of them): the median latency ratio (target: at most
1.5) and the mirror objects' bytes per commit, median and averaged over a Delta checkpoint
interval (target: at most 24 KB). The latency ratio is also measured on S3 (a moto server in
its own process, requests counted there) unless ``--no-s3``.

Per size, a local-directory table built as ``tests.benchmarks.scale`` builds it (3 real
files, the rest synthetic entries committed by one ``add_files``; no operation here reads a
synthetic file), then:
- enabling both mirrors: the full description of that version (every manifest, Puffin and DV
  file, a Delta checkpoint), its objects, bytes and seconds;
- a 1-row append and a 1-row delete (of a row of a real file), ``--repeat`` times each: the
  median milliseconds of the whole commit and of the mirror writes after its commit point,
  and the objects and bytes the mirrors PUT per commit (new objects and pointer updates);
- one Delta checkpoint of the table (written every ``checkpoint_interval`` = 100 versions):
  its bytes and seconds.
Prints a table; ``--json`` also writes the figures. Not a test: it times things.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

import manifest_table as mt
from manifest_table.mirrors import delta, sync
from manifest_table.mirrors.source import Source
from manifest_table.storage import LocalStore, ObjectStore
from tests.benchmarks.scale import REAL_FILES, REAL_ROWS, build


class RecordingStore(ObjectStore):
    """Delegates to ``inner``; records every PUT as (key, bytes)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.puts = inner, []

    def get(self, key):
        return self.inner.get(key)

    def get_with_etag(self, key):
        return self.inner.get_with_etag(key)

    def head(self, key):
        return self.inner.head(key)

    def put_if_absent(self, key, data):
        self.puts.append((key, len(data)))
        return self.inner.put_if_absent(key, data)

    def put_if_match(self, key, data, etag):
        self.puts.append((key, len(data)))
        return self.inner.put_if_match(key, data, etag)

    def list(self, prefix=""):
        return self.inner.list(prefix)

    def delete(self, key):
        return self.inner.delete(key)

    def arrow_filesystem(self):
        return self.inner.arrow_filesystem()

    def mirror_puts(self) -> tuple[int, int, str]:
        """(objects, bytes, by kind) of the mirrors' PUTs since the last call."""
        kinds: Counter[str] = Counter()
        total = count = 0
        for key, size in self.puts:
            kind = _kind(key)
            if kind:
                kinds[kind] += 1
                count, total = count + 1, total + size
        self.puts = []
        return count, total, ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))


class LatencyStore(RecordingStore):
    """``RecordingStore`` whose every request first waits ``seconds`` (a store far away, such
    as S3 from another region, that serves requests in parallel: moto serialises writes), and
    that carries data files as objects too, so their writes wait as well."""

    def __init__(self, inner: ObjectStore, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    def get(self, key):
        time.sleep(self.seconds)
        return super().get(key)

    def get_with_etag(self, key):
        time.sleep(self.seconds)
        return super().get_with_etag(key)

    def head(self, key):
        time.sleep(self.seconds)
        return super().head(key)

    def put_if_absent(self, key, data):
        time.sleep(self.seconds)
        return super().put_if_absent(key, data)

    def put_if_match(self, key, data, etag):
        time.sleep(self.seconds)
        return super().put_if_match(key, data, etag)

    def arrow_filesystem(self):
        return None


def _kind(key: str) -> str | None:
    if key.startswith("metadata/"):
        return "iceberg " + ("metadata" if key.endswith(".json") else "hint" if key.endswith(".text")
                             else "manifest list" if "/snap-" in key else "manifest")
    if key.startswith("_delta_log/"):
        return "delta " + ("commit" if key.endswith(".json") else "checkpoint" if "checkpoint." in key else "pointer")
    if key.endswith(".puffin"):
        return "puffin"
    if key.endswith(".bin"):
        return "delta dv"
    return None


class HookTimer:
    """Times the mirror writes of each commit (``mirrors.sync.start``, from the commit point,
    while the pointer advances, to the end of the wait for them)."""

    def __init__(self) -> None:
        self.last = 0.0
        self._original = sync.start

    def __enter__(self) -> HookTimer:
        def timed(*args: Any) -> Callable[[], None]:
            started = time.perf_counter()
            wait = self._original(*args)

            def timed_wait() -> None:
                wait()
                self.last = time.perf_counter() - started
            return timed_wait
        sync.start = timed
        return self

    def __exit__(self, *exc: Any) -> None:
        sync.start = self._original


def measure(table: mt.Table, store: RecordingStore, op: Callable[[int], Any], repeat: int) -> dict[str, Any]:
    totals, hooks, objects, sizes, kinds = [], [], [], [], ""
    with HookTimer() as hook:
        for k in range(repeat):
            store.mirror_puts()
            started = time.perf_counter()
            op(k)
            totals.append(time.perf_counter() - started)
            hooks.append(hook.last)
            count, size, kinds = store.mirror_puts()
            objects.append(count)
            sizes.append(size)
    return {"commit_ms": round(statistics.median(totals) * 1000, 1),
            "mirror_ms": round(statistics.median(hooks) * 1000, 1),
            "mirror_objects": statistics.median(objects), "mirror_bytes": int(statistics.median(sizes)),
            "kinds": kinds}


def run_size(work: str, files: int, repeat: int) -> dict[str, Any]:
    root = os.path.join(work, f"t{files}")
    shutil.rmtree(root, ignore_errors=True)
    build(root, files)
    store = RecordingStore(LocalStore(root))
    table = mt.open_table(root, store=store)
    started = time.perf_counter()
    table.set_mirrors({"iceberg": {}, "delta": {"checkpoint_interval": 100}})
    enable_s = time.perf_counter() - started
    count, size, kinds = store.mirror_puts()
    result: dict[str, Any] = {"files": files, "enable": {"seconds": round(enable_s, 2), "objects": count,
                                                         "bytes": size, "kinds": kinds}}
    schema = table.schema
    result["append"] = measure(table, store, lambda k: table.append(
        pa.Table.from_pylist([{"id": 3_000_000_000 + k}], schema=schema)), repeat)
    result["delete"] = measure(table, store, lambda k: table.delete(
        f"id = {(k % REAL_FILES) * REAL_ROWS + k // REAL_FILES}"), repeat)
    started = time.perf_counter()
    latest = table.manifest()
    src = Source.of(table.log)
    delta.write_checkpoint(src, latest)  # the version has one already: this measures writing it
    result["delta_checkpoint"] = {"seconds": round(time.perf_counter() - started, 2),
                                  "bytes": (Path(root) / delta.checkpoint_key(latest.version)).stat().st_size}
    return result


def targets(work: str, pairs: int, history: int, latency: float = 0.0) -> dict[str, Any]:
    """Issue 31's targets: latency ratio and mirror bytes per 1-row append (see the docstring);
    ``latency``: seconds each store request waits (``LatencyStore``)."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    tables, stores = {}, {}
    for name, mirrors in (("plain", None), ("mirrored", ["iceberg", "delta"])):
        root = os.path.join(work, f"targets-{name}")
        shutil.rmtree(root, ignore_errors=True)
        mt.create_table(root, schema, mirrors=mirrors)
        stores[name] = LatencyStore(LocalStore(root), latency) if latency else RecordingStore(LocalStore(root))
        tables[name] = mt.open_table(root, store=stores[name])
    row = pa.Table.from_pylist([{"id": 1, "name": "x"}], schema=schema)
    for _ in range(history):
        tables["mirrored"].append(row)
    stores["mirrored"].mirror_puts()
    times: dict[str, list[float]] = {"plain": [], "mirrored": []}
    sizes, per_interval = [], []
    for k in range(pairs if latency else max(pairs, 100)):
        for name in ("plain", "mirrored") if k % 2 == 0 else ("mirrored", "plain"):
            started = time.perf_counter()
            tables[name].append(row)
            if k < pairs:
                times[name].append(time.perf_counter() - started)
        _, size, _ = stores["mirrored"].mirror_puts()
        per_interval.append(size)
        if k < pairs:
            sizes.append(size)
    plain, mirrored = (statistics.median(times[n]) * 1000 for n in ("plain", "mirrored"))
    return {"plain_ms": round(plain, 1), "mirrored_ms": round(mirrored, 1), "ratio": round(mirrored / plain, 2),
            "bytes_median": int(statistics.median(sizes)), "bytes_mean_100": int(statistics.mean(per_interval[-100:])),
            "retained_versions": len(tables["mirrored"].history())}


def s3_latency(pairs: int, history: int) -> dict[str, Any]:
    """The latency ratio of the targets on S3 (moto), and the requests of one append each."""
    import boto3

    from tests.s3_server import start_moto_server, take_requests

    endpoint, stop = start_moto_server()
    try:
        bucket = "mirror-cost"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                     aws_secret_access_key="x").create_bucket(Bucket=bucket)
        options = {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": "x", "secret_access_key": "x"}
        schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
        row = pa.Table.from_pylist([{"id": 1, "name": "x"}], schema=schema)
        tables = {name: mt.create_table(f"s3://{bucket}/{name}", schema, mirrors=mirrors, storage_options=options)
                  for name, mirrors in (("plain", None), ("mirrored", ["iceberg", "delta"]))}
        for _ in range(history):
            tables["mirrored"].append(row)
        times: dict[str, list[float]] = {"plain": [], "mirrored": []}
        requests = {}
        for k in range(pairs):
            for name in ("plain", "mirrored") if k % 2 == 0 else ("mirrored", "plain"):
                take_requests(endpoint)
                started = time.perf_counter()
                tables[name].append(row)
                times[name].append(time.perf_counter() - started)
                requests[name] = Counter(m for m, p, _ in take_requests(endpoint) if p.startswith(f"/{bucket}/"))
        plain, mirrored = (statistics.median(times[n]) * 1000 for n in ("plain", "mirrored"))
        return {"plain_ms": round(plain, 1), "mirrored_ms": round(mirrored, 1), "ratio": round(mirrored / plain, 2),
                "requests": {n: dict(c) for n, c in requests.items()}}
    finally:
        stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", default="/tmp/mirror-cost")
    parser.add_argument("--targets", type=int, default=40)
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--latency-ms", type=float, default=20.0,
                        help="also the latency ratio when every request waits this long (0: not)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.targets:
        t = targets(args.work, args.targets, args.history)
        print(f"== targets (1-row appends, {t['retained_versions']} retained versions) ==")
        print(f"  latency: {t['mirrored_ms']} ms with both mirrors, {t['plain_ms']} ms without: {t['ratio']}x "
              f"(target <= 1.5x)")
        print(f"  mirror objects per commit: {t['bytes_median']:,} bytes median, {t['bytes_mean_100']:,} bytes "
              "averaged over 100 commits with a Delta checkpoint (target <= 24 KB)")
        if args.latency_ms:
            slow = targets(args.work, max(10, args.targets // 2), 20, args.latency_ms / 1000)
            print(f"  with {args.latency_ms:g} ms per request: {slow['mirrored_ms']} ms with both mirrors, "
                  f"{slow['plain_ms']} ms without: {slow['ratio']}x")
        if not args.no_s3:
            s3 = s3_latency(args.targets, args.history)
            print(f"  on S3 (moto): {s3['mirrored_ms']} ms with both mirrors, {s3['plain_ms']} ms without: "
                  f"{s3['ratio']}x; requests per append: {s3['requests']}")
    results = [run_size(args.work, int(n), args.repeat) for n in args.sizes.split(",") if n]
    for r in results:
        print(f"== {r['files']:,} files ==")
        e = r["enable"]
        print(f"  enable both mirrors: {e['seconds']} s, {e['objects']} objects, {e['bytes']:,} bytes ({e['kinds']})")
        for op in ("append", "delete"):
            m = r[op]
            print(f"  1-row {op}: commit {m['commit_ms']} ms, of which mirrors {m['mirror_ms']} ms; mirrors PUT "
                  f"{m['mirror_objects']} objects, {m['mirror_bytes']:,} bytes ({m['kinds']})")
        c = r["delta_checkpoint"]
        print(f"  a Delta checkpoint (every 100 versions): {c['seconds']} s, {c['bytes']:,} bytes")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

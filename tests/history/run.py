"""One history-checker run: writer processes (workload.py) under faults, each on a clock up to
10 minutes off, garbage collection and compaction running meanwhile on another such clock,
then the checker (checker.py).

Faults injected: in each writer, a ``FaultStorm`` (503s, lost responses of writes that
landed, 412/409 on conditional writes, in bursts); from outside, SIGSTOP for longer than the
grace then SIGCONT (a writer paused while it holds staged objects, which GC then deletes), and
SIGKILL at random points (the process is replaced by a new one).

Run a soak from the shell (docs/protocol.md, "The history checker")::

    nice python -m tests.history.run --store local --transactions 100000 --processes 4
    nice python -m tests.history.run --store local --seconds 1200 --processes 4

Run it from a copy of the code (``git archive HEAD | tar -x -C DIR``, then ``cd DIR``): writer
processes restarted after a SIGKILL import the code afresh, so editing the checkout under a
running soak changes the code it runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import manifest_table as mt
from manifest_table.arguments import parse_duration
from manifest_table.errors import CommitConflictError, CommitFailedError, ManifestTableError
from manifest_table.testing import skewed_clock
from tests.history.checker import Report, check
from tests.history.workload import SKEWS, STORM_FAULTS, Target, set_up, work


@dataclass
class Settings:
    processes: int = 3
    seconds: float = 8.0
    transactions: int | None = None
    """Stop after about this many transactions (all processes together) instead of ``seconds``."""
    grace: str = "3s"
    fault_rate: float = 0.01
    pause_every: float = 3.0
    """Seconds between outside faults (a pause or a kill, at random)."""
    retain_for: str = "1h"
    seed: int = 0
    least: int = 0
    """Write past ``seconds`` (up to four times as long) until this many transactions have
    ended and each writer-side fault kind was injected: a CI run on a loaded machine still
    meets every fault."""


@dataclass
class Outside:
    """What the injector did from outside the writers."""

    counts: Counter[str] = field(default_factory=Counter)
    gc_runs: int = 0
    gc_deleted: int = 0
    gc_errors: list[str] = field(default_factory=list)


def run(root: str, options: dict[str, str] | None, workdir: Path, settings: Settings) -> Report:
    began = time.monotonic()
    target = Target.under(root, options)
    set_up(target, settings.grace)
    ctx = multiprocessing.get_context("forkserver")  # writers fork from a server that imported them once
    ctx.set_forkserver_preload(["tests.history.workload"])
    rng = random.Random(settings.seed)
    until = ctx.Value("d", 0.0)  # set once every first writer is ready: spawning takes seconds
    ready = ctx.Value("i", 0)
    quota = -(-settings.transactions // settings.processes) if settings.transactions else 10**12
    logs: list[Path] = []
    outside = Outside()

    def start(slot: int, generation: int) -> tuple[multiprocessing.process.BaseProcess, int]:
        number = generation * settings.processes + slot
        done = sum(_transactions(workdir / f"writer-{g * settings.processes + slot}.jsonl") for g in range(generation))
        log = workdir / f"writer-{number}.jsonl"
        logs.append(log)
        proc = ctx.Process(target=work, args=(target, number, str(log), settings.seed * 1000 + number,
                                              settings.fault_rate, until, ready, quota - done))
        proc.start()
        return proc, generation

    writers = {slot: start(slot, 0) for slot in range(settings.processes)}
    while ready.value < settings.processes and all(proc.is_alive() for proc, _ in writers.values()):
        time.sleep(0.05)
    until.value = time.time() + (settings.seconds if settings.transactions is None else 10**9)
    cap = until.value + 3 * settings.seconds
    writing = time.monotonic()
    stop = threading.Event()
    collector = threading.Thread(target=_collect, args=(target, settings, rng.random(), stop, outside))
    collector.start()
    try:
        while any(proc.is_alive() for proc, _ in writers.values()):
            next_fault = time.monotonic() + rng.uniform(0.5, settings.pause_every)
            while time.monotonic() < next_fault and any(proc.is_alive() for proc, _ in writers.values()):
                _extend(until, logs, settings, cap)
                time.sleep(0.1)
            if time.time() >= until.value and len(outside.counts) == 2:
                break  # the writing time is over, and a kill and a pause happened: let the writers finish
            slot = rng.randrange(settings.processes)
            proc, generation = writers[slot]
            if not proc.is_alive():
                continue
            # A kill first, then a pause (so that even a short run has both), then at random.
            injected = sum(outside.counts.values())
            if injected == 1 or (injected > 1 and rng.random() < 0.6):  # a pause longer than the grace
                os.kill(proc.pid, signal.SIGSTOP)  # type: ignore[arg-type]
                time.sleep(parse_duration(settings.grace).total_seconds() + 0.5)
                os.kill(proc.pid, signal.SIGCONT)  # type: ignore[arg-type]
                outside.counts["SIGSTOP past the grace"] += 1
            else:
                os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
                proc.join()
                outside.counts["SIGKILL"] += 1
                if time.time() < until.value:
                    writers[slot] = start(slot, generation + 1)
        for proc, _ in writers.values():
            proc.join()
    finally:
        stop.set()
        collector.join()
        for proc, _ in writers.values():
            if proc.is_alive():
                proc.kill()
    outside.counts["gc runs"] = outside.gc_runs
    checking = time.monotonic()
    report = check(target, logs, outside.counts)
    report.seconds = {"set up": writing - began, "writing": checking - writing, "checking": time.monotonic() - checking}
    for error in outside.gc_errors:
        report.add("gc failed", error)
    return report


def _collect(target: Target, settings: Settings, seed: float, stop: threading.Event, outside: Outside) -> None:
    """GC of ``s`` and of the database, with their own grace, and now and then a compaction,
    on a clock that is off."""
    rng = random.Random(seed)
    s = mt.open_table(target.table, storage_options=target.options)
    db = mt.open_database(target.database, storage_options=target.options)
    while not stop.wait(rng.uniform(0.3, 1.0)):
        with skewed_clock(rng.choice(SKEWS)):
            for collectable in (s, db):
                try:
                    outside.gc_deleted += len(collectable.gc(retain_for=settings.retain_for).deleted_keys)
                    outside.gc_runs += 1
                    if collectable is s and rng.random() < 0.3:
                        _compact(s)
                except ManifestTableError as exc:
                    outside.gc_errors.append(f"{type(exc).__name__}: {exc}"[:300])


def _compact(table: mt.Table) -> None:
    try:
        table.compact()
    except (CommitConflictError, CommitFailedError):
        pass  # lost to a writer, or outlived its deadline: nothing committed


def _extend(until: Any, logs: list[Path], settings: Settings, cap: float) -> None:
    """Move the end of writing on (past a pause) while ``settings.least`` is not met."""
    if not settings.least or time.time() < until.value - 0.5 or until.value >= cap:
        return
    ended, faults = 0, set()
    for log in logs:
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        ends = [line for line in lines if line.get("phase") == "end"]
        ended += len(ends)
        faults |= set(ends[-1].get("faults", {})) if ends else set()
    if ended < settings.least or not set(STORM_FAULTS) <= faults:
        until.value = min(cap, time.time() + parse_duration(settings.grace).total_seconds() + 1.5)


def _transactions(log: Path) -> int:
    return log.read_text().count('"phase": "begin"') if log.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default="local", help="local, or a location such as s3://bucket/prefix")
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, help="write for this long instead (a soak bounded in time)")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", help="where the logs (and a local table) go; kept (default: a new temp dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="history-"))
    workdir.mkdir(parents=True, exist_ok=True)
    root = str(workdir / "history") if args.store == "local" else args.store
    print(f"logs in {workdir}", flush=True)
    started = time.monotonic()
    bound = {"seconds": args.seconds} if args.seconds else {"transactions": args.transactions}
    settings = Settings(args.processes, seed=args.seed, retain_for="30s", **bound)  # type: ignore[arg-type]
    report = run(root, None, workdir, settings)
    print(f"{time.monotonic() - started:.0f} s; {report}")


if __name__ == "__main__":
    main()

"""Processes that write one database at once, each logging what it was acknowledged as JSON
lines (an ``"error"`` line: a traceback that fails the test). Shared by the bank test and the
catalog race."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any

Worker = Callable[[str, int, float, str, Any], None]
"""(uri, worker number, seconds, log path, start barrier): waits at the barrier, then writes
for ``seconds`` and logs each outcome to the log path."""


def run_workers(worker: Worker, uri: str, count: int, seconds: float, directory: Path) -> list[dict[str, Any]]:
    """Start ``count`` processes of ``worker`` together, wait for them, and return every line
    they logged; fails on an error line or a process that did not exit cleanly."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(count + 1, timeout=240)
    logs = [str(directory / f"worker{w}.jsonl") for w in range(count)]
    procs = [ctx.Process(target=worker, args=(uri, w, seconds, logs[w], start)) for w in range(count)]
    for p in procs:
        p.start()
    start.wait()
    for p in procs:
        p.join(timeout=seconds + 240)
    lines = []
    for path in logs:
        lines += [json.loads(line) for line in Path(path).read_text().splitlines()] if Path(path).exists() else []
    errors = [line["error"] for line in lines if "error" in line]
    assert not errors, errors[0]
    assert [p.exitcode for p in procs] == [0] * count
    return lines

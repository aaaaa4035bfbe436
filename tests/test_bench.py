"""The benchmark modules still run (on tiny data, ours only): they are how speed claims in
docs/benchmarks.md are reproduced, so they must not rot."""

from __future__ import annotations

import subprocess
import sys

import pytest

RUNS = {
    "scan": ["--rows", "20000", "--repeat", "1", "--peers", ""],
    "commit": ["--commits", "3", "--sizes", "1", "--procs", "2", "--per-proc", "2", "--table-files", "3",
               "--peers", ""],
    "delete": ["--rows", "20000", "--repeat", "1", "--files", "5", "--peers", ""],
    "throughput": ["--rows", "20000", "--repeat", "1", "--pylist-rows", "1000", "--peers", ""],
    "upsert": ["--rows", "20000", "--source", "100", "--repeat", "1", "--peers", ""],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_runs(name, tmp_path):
    result = subprocess.run([sys.executable, "-m", f"manifest_table.bench.{name}", "--workdir", str(tmp_path),
                             *RUNS[name]], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "|" in result.stdout  # printed its result table

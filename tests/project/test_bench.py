"""The benchmark modules still run (on tiny data, ours only): they are how speed claims in
docs/benchmarks.md are reproduced, so they must not rot."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

RUNS = {
    "scan": ["--rows", "20000", "--repeat", "1", "--peers", ""],
    "commit": ["--commits", "3", "--sizes", "1", "--procs", "2", "--per-proc", "2", "--table-files", "3",
               "--peers", ""],
    "delete": ["--rows", "20000", "--repeat", "1", "--files", "5", "--peers", ""],
    "throughput": ["--rows", "20000", "--repeat", "1", "--pylist-rows", "1000", "--peers", ""],
    "scale": ["--sizes", "10,50", "--repeat", "1", "--peers", ""],
    "upsert": ["--rows", "20000", "--source", "100", "--repeat", "1", "--peers", ""],
    "point_ops": ["--rows", "20000", "--repeat", "1", "--peers", ""],
    "database_cost": ["--repeat", "1", "--seconds", "0.5", "--procs", "2", "--no-s3"],
    "startup": ["--repeat", "1", "--peers", ""],
    "clustering": ["--rows", "20000", "--files", "20", "--filters", "2", "--repeat", "1", "--peers", ""],
}


def run(name: str, tmp_path, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{name}", "--workdir", str(tmp_path),
                             *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_runs(name, tmp_path):
    assert "|" in run(name, tmp_path, *RUNS[name])  # printed its result table


def test_scale_json(tmp_path):
    """``--json PATH``: one entry per size, peers at their sizes (when installed), every target judged."""
    peers = [p for p in ("deltalake", "pyiceberg") if importlib.util.find_spec(p)]
    path = tmp_path / "scale.json"
    run("scale", tmp_path / "work", "--sizes", "10,30", "--repeat", "1", "--peers", ",".join(peers),
        "--peer-sizes", "10", "--json", str(path))
    out = json.loads(path.read_text())
    assert [r["files"] for r in out["sizes"]] == [10, 30]
    for r in out["sizes"]:
        for op in ("append", "delete"):
            assert r[op]["control_bytes"] > 0 and r[op]["time"]["wall"] > 0
        assert r["append"]["data_bytes"] > 0  # the new data file, counted apart
    assert [(p["engine"], p["files"], p["files_after"]) for p in out["peers"]] == [(p, 10, 12) for p in peers]
    assert len(out["targets"]) == 11 + len(peers)  # issue 9's nine, issue 36's two, one per peer
    assert {t["met"].split()[0] for t in out["targets"]} <= {"met", "missed", "-"}

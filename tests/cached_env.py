"""Packages the suite's own venv cannot hold (an older DuckDB with extensions built for it),
installed once with ``pip --target`` into a cache directory that a subprocess puts first on
its path. Used by tests/test_mirrors_duckdb.py (DuckDB 1.4.4's iceberg and delta extensions)
and tests/benchmarks/point_ops.py (DuckDB 1.5.5 with DuckLake)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import uuid
from pathlib import Path


def cache_dir(name: str, packages: list[str]) -> Path:
    """Where ``packages`` go: ``~/.cache/manifest_table/<name>-<hash of the packages>``."""
    digest = hashlib.sha256(" ".join(packages).encode()).hexdigest()[:8]
    return Path.home() / ".cache" / "manifest_table" / f"{name}-{digest}"


def installed(env: Path, packages: list[str]) -> Path:
    """``env`` holding ``packages``, installed once: into a fresh directory renamed into
    place, so concurrent runs never see half an install."""
    marker = env / ".complete"
    if not marker.exists():
        staging = env.with_name(f"{env.name}.{uuid.uuid4().hex}")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                               str(staging), *packages], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"installing {packages} failed: {done.stderr[-2000:]}")
        (staging / ".complete").touch()
        env.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(env)
        except OSError:  # another run installed it first
            shutil.rmtree(staging, ignore_errors=True)
    return env

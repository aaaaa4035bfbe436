"""Splitting a scan's data files into Spark tasks, the way Spark splits its own file sources."""

from __future__ import annotations

from typing import Sequence

from ..format.manifest import DataFile

OPEN_COST_BYTES = 4 * 1024 * 1024
"""Like ``spark.sql.files.openCostInBytes``: what opening one more file is worth in bytes, so
many tiny files do not each become a task."""


def group_files(files: Sequence[DataFile], parallelism: int, max_bytes: int) -> list[list[DataFile]]:
    """Consecutive runs of ``files`` (plan order is kept) of about equal size: small enough
    that at least ``parallelism`` tasks get work when there is enough data, never over
    ``max_bytes`` unless one file alone is bigger."""
    costs = [f.size + OPEN_COST_BYTES for f in files]
    target = min(max_bytes, max(OPEN_COST_BYTES, sum(costs) // max(1, parallelism)))
    groups: list[list[DataFile]] = []
    size = 0
    for file, cost in zip(files, costs):
        if not groups or size + cost > target:
            groups.append([])
            size = 0
        groups[-1].append(file)
        size += cost
    return groups

"""Splitting a scan's data files into Spark tasks."""

from __future__ import annotations

from collections.abc import Sequence

from ..format.manifest import DataFile

OPEN_COST_BYTES = 4 * 1024 * 1024
"""Like ``spark.sql.files.openCostInBytes``: what opening one more file is worth in bytes, so
that many tiny files weigh like some data and get spread over the tasks too."""


def group_files(files: Sequence[DataFile], parallelism: int, max_bytes: int) -> list[list[DataFile]]:
    """Consecutive runs of ``files`` (plan order is kept) of about equal cost: at least
    ``parallelism`` of them when there are that many files, and enough that each holds
    about ``max_bytes`` at most (one file is never split)."""
    costs = [f.size + OPEN_COST_BYTES for f in files]
    total = sum(costs)
    count = min(len(files), max(parallelism, -(-total // max_bytes)))
    groups: dict[int, list[DataFile]] = {}
    done = 0
    for file, cost in zip(files, costs):
        groups.setdefault(int((done + cost / 2) * count / total), []).append(file)
        done += cost
    return list(groups.values())

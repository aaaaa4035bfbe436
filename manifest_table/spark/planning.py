"""Splitting a scan's data files (or a stream's units) into Spark tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

OPEN_COST_BYTES = 4 * 1024 * 1024
"""Like ``spark.sql.files.openCostInBytes``: what opening one more file is worth in bytes, so
that many tiny files weigh like some data and get spread over the tasks too."""


class Sized(Protocol):
    @property
    def size(self) -> int: ...


_S = TypeVar("_S", bound=Sized)


def group_files(files: Sequence[_S], parallelism: int, max_bytes: int) -> list[list[_S]]:
    """Consecutive runs of ``files`` (plan order is kept) of about equal cost: at least
    ``parallelism`` of them when there are that many files, and enough that each holds
    about ``max_bytes`` at most (one file is never split)."""
    costs = [f.size + OPEN_COST_BYTES for f in files]
    total = sum(costs)
    count = min(len(files), max(parallelism, -(-total // max_bytes)))
    groups: dict[int, list[_S]] = {}
    done = 0
    for file, cost in zip(files, costs):
        groups.setdefault(int((done + cost / 2) * count / total), []).append(file)
        done += cost
    return list(groups.values())

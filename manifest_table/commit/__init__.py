"""The commit package: the retry loop (loop.py, which knows nothing of tables), what a commit
changes (changes.py), rebasing by the conflict matrix (conflicts.py), building the next
manifest (builder.py), and a table's commit made of them (table_commit.py). ``CommitInfo``
and ``commit`` load table_commit.py when first used: a handle needs only ``CommitOptions``,
and reading a table no commit code (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .loop import CommitOptions

if TYPE_CHECKING:
    from .table_commit import CommitInfo, commit

__all__ = ["CommitInfo", "CommitOptions", "commit"]


def __getattr__(name: str) -> Any:
    if name not in ("CommitInfo", "commit"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".table_commit", __name__), name)

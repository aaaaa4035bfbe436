"""The commit package: the retry loop (loop.py, which knows nothing of tables), what a commit
changes (changes.py), rebasing by the conflict matrix (conflicts.py), building the next
manifest (builder.py), and a table's commit made of them (table_commit.py)."""

from .loop import CommitOptions
from .table_commit import CommitInfo, commit

__all__ = ["CommitInfo", "CommitOptions", "commit"]

"""The change feed: the rows each commit changed, derived from the log (docs/changes.md)."""

from .commit import CHANGE_COLUMNS, CHANGE_TYPES, ChangeReading, commit_changes
from .feed import ChangeFeed, CommitChanges, change_range, expired

__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_TYPES",
    "ChangeFeed",
    "ChangeReading",
    "CommitChanges",
    "change_range",
    "commit_changes",
    "expired",
]

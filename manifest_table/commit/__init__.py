"""The commit package: the retry loop, what a commit changes, rebasing, building the next manifest."""

from .loop import CommitInfo, CommitOptions, commit

__all__ = ["CommitInfo", "CommitOptions", "commit"]

"""A commit's deadline: the rule that keeps a slow writer from committing a reference to an
object garbage collection has deleted (docs/protocol.md, "Time"). The commit loop checks it
before each create of a version (commit/loop.py), a mirror before each create of its own
commit point (mirrors/source.py).

GC deletes an unreferenced object once the store's clock says it is older than the grace
period (the ``gc_grace`` property). A commit's staged objects were all written after it
``started`` (its snapshot, or the first object it staged if that came earlier), so a commit
that reaches its commit point less than ``grace - margin`` after that moment references
nothing GC could have deleted: the remaining ``margin`` covers the time between this check
and the create request landing. The grace is the smallest of every version the commit built
on or rebased over, so a concurrent change of the grace can never let a commit outlive the
one GC used."""

from __future__ import annotations

from datetime import timedelta

from .arguments import format_duration
from .clock import Stamp
from .errors import CommitFailedError

MAX_MARGIN = 3600.0
"""The margin is a quarter of the grace, at most an hour: four times the 15 minutes after
which S3 refuses a signed request (SigV4), so a request that stalls after it was signed
cannot land after the margin either."""


def margin(grace: float) -> float:
    """Seconds between a commit's deadline and the grace period (``gc_grace``)."""
    return min(grace / 4, MAX_MARGIN)


class Deadline:
    """The deadline of one commit, checked right before each create of its version."""

    def __init__(
        self, what: str, since: Stamp, explicit: float | None, grace: float, removes_staged: bool = True
    ) -> None:
        """``what`` names the commit in the error (``commit <id> to <location>``);
        ``removes_staged``: whether its caller removes what it staged when it gives up."""
        self._what, self._since = what, since
        self._cleanup = " and its staged objects were removed" if removes_staged else ""
        self._explicit, self._grace = explicit, grace

    def saw(self, grace: float) -> None:
        """A version the commit built on or rebased over had this grace (seconds)."""
        self._grace = min(self._grace, grace)

    @property
    def seconds(self) -> float:
        by_grace = self._grace - margin(self._grace)
        return by_grace if self._explicit is None else min(by_grace, self._explicit)

    def check(self) -> None:
        """``CommitFailedError`` once the commit may reference an object GC deleted. The
        caller removes what the commit staged first: nothing was committed."""
        elapsed, limit = self._since.elapsed(), self.seconds
        if elapsed <= limit:
            return
        grace = _shown(self._grace)
        why = (
            f"its deadline of {limit:g} s (the deadline option)"
            if self._explicit is not None and self._explicit < self._grace - margin(self._grace)
            else f"its deadline of {_shown(limit)}: the gc_grace of {grace} less a margin of "
            f"{_shown(margin(self._grace))}"
        )
        raise CommitFailedError(
            f"{self._what} gave up before its commit point: "
            f"{elapsed:.1f} s passed since it started, more than {why}. Garbage collection may "
            f"already have deleted objects it staged (unreferenced objects older than {grace} "
            f"go), so committing could break the table. Nothing was committed{self._cleanup}: "
            "retry it (or raise gc_grace with set_properties)"
        )


def _shown(seconds: float) -> str:
    return format_duration(timedelta(seconds=round(seconds, 3)))

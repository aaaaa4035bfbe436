"""The commit loop (docs/protocol.md), free of what a version holds: like SlateDB's
compare-and-swap crate, it drives any log of write-once versions behind one pointer, so a
table's manifest (table_commit.py) and a database's version commit through the same code.

1. The caller read the pointer and staged a proposal on the version it names (``base``).
2. Build the next version from the previous one, check the commit's deadline (../deadline.py:
   a commit older than the grace period less a margin gives up, so it never references an
   object GC may have deleted), and create it create-only: that create is the commit point.
3. Lost the race (the key exists)? Read it back: our own commit id means a retried PUT that
   landed (we won). Otherwise rebase onto the winner, and onto every version the pointer
   shows after it, and try the next version, with jittered backoff.
4. Advance the pointer by compare-and-swap (never backwards) and only then acknowledge. Work
   that needs only the committed version (``at_commit_point``: a table's mirrors) runs
   meanwhile, and is waited for before the acknowledgement.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ..arguments import check_int, check_seconds
from ..clock import Stamp
from ..deadline import Deadline
from ..errors import (
    CommitConflictError,
    CommitFailedError,
    ManifestTableError,
    PreconditionFailed,
    StoreError,
    SyncFailedError,
)
from ..format.pointer import Pointer


@dataclass(frozen=True)
class CommitOptions:
    max_attempts: int = 200
    free_retries: int = 3
    """Losses retried at once: each loss means another writer made progress, and the winner's
    manifest was just read, so the next attempt usually succeeds."""
    backoff_base: float = 0.002
    backoff_cap: float = 0.25
    recheck_after: float = 60.0
    """Seconds after which a commit re-reads the pointer before its create (see commit())."""
    deadline: float | None = None
    """Seconds after its snapshot past which a commit gives up (nothing committed) instead of
    creating its manifest. Every commit has a deadline derived from the table's ``gc_grace``
    (../deadline.py); this one only shortens it."""

    def __post_init__(self) -> None:
        check_int("max_attempts", self.max_attempts, minimum=1)
        check_int("free_retries", self.free_retries, minimum=0)
        for name in ("backoff_base", "backoff_cap", "recheck_after"):  # seconds, or "2m", or a timedelta
            object.__setattr__(self, name, check_seconds(name, getattr(self, name)))
        if self.deadline is not None:  # checked here: a commit compares it only after writing its files
            object.__setattr__(self, "deadline", check_seconds("deadline", self.deadline, positive=True))


class Committed(Protocol):
    """What the loop reads of a version: its number, the id of the commit that made it, and
    the grace period GC gives its unreferenced objects (seconds)."""

    @property
    def version(self) -> int: ...

    @property
    def commit_id(self) -> str: ...

    @property
    def gc_grace(self) -> float: ...


V = TypeVar("V", bound=Committed)


class VersionedLog(Protocol[V]):
    """Write-once versions behind one pointer: a table's ``VersionLog``, or a database's."""

    @property
    def location(self) -> str: ...

    def pointer(self) -> Pointer:
        """The pointer as of now (its version and etag)."""
        ...

    def find(self, version: int) -> V | None:
        """The stored version, or None if nothing is stored under it."""
        ...

    def create(self, version: V) -> V:
        """Create-only write of ``version``: ``PreconditionFailed`` if it exists. Returns it as
        the log reads it."""
        ...

    def advance_pointer(self, version: int, etag: str | None = None) -> None:
        """Move the pointer to ``version`` unless it is there or past it already (or, where
        the pointer may lag, the store refuses it for its write rate)."""
        ...


class Proposal(Protocol[V]):
    """One commit's change, as the loop drives it through its attempts."""

    def build(self, prev: V, commit_id: str) -> V:
        """The version after ``prev`` holding this change (it may write objects of its own)."""
        ...

    def rebase(self, prev: V, winner: V) -> None:
        """Make the change, built on ``prev``, apply on top of ``winner`` (prev's successor),
        or raise ``CommitConflictError`` (or ``AlreadyCommitted``)."""
        ...

    def lost(self) -> None:
        """The last attempt's version can never land: the objects it wrote for itself alone
        are referenced by nothing."""
        ...

    def discard(self) -> None:
        """Nothing was committed: remove every object this change staged."""
        ...


class AlreadyCommitted(Exception, Generic[V]):
    """``version`` already holds this commit's change (a replayed streaming batch, an upgrade
    another writer made): there is nothing left to commit."""

    def __init__(self, version: V) -> None:
        super().__init__(version.version)
        self.version = version


def _backoff(losses: int, options: CommitOptions) -> float:
    """Full-jitter exponential backoff after the free retries, to spread a thundering herd."""
    if losses <= options.free_retries:
        return 0.0
    return random.uniform(0, min(options.backoff_cap, options.backoff_base * 2 ** (losses - options.free_retries)))


def commit(
    log: VersionedLog[V],
    proposal: Proposal[V],
    base: V,
    pointer: Pointer,
    options: CommitOptions = CommitOptions(),
    started: Stamp | None = None,
    at_commit_point: Callable[[V], Callable[[], None]] | None = None,
) -> V:
    """Commit ``proposal`` staged on ``base`` (the version ``pointer`` named when it was read
    at ``started``, or earlier if the proposal staged objects before: the deadline counts from
    it; unknown means "long ago": one more pointer read, and the deadline counts from now).
    ``at_commit_point(committed)`` starts work after the commit point and returns its wait.
    Returns the committed version once the pointer is at or past it. Raises
    ``CommitConflictError`` (nothing was committed; staged objects are removed),
    ``CommitFailedError``, or ``AlreadyCommitted`` (staged objects removed, the pointer at or
    past the version that holds the change)."""
    commit_id = uuid.uuid4().hex
    prev, losses = base, 0
    what = f"commit {commit_id} to {log.location}"
    deadline = Deadline(what, started or Stamp.now(), options.deadline, base.gc_grace)
    try:
        for _ in range(options.max_attempts):
            if started is None or started.elapsed() > options.recheck_after:
                # Garbage collection may have removed versions after a snapshot this old; a
                # create-only write of a removed version would succeed and then be lost.
                prev = _rebase_to_pointer(log, proposal, prev, deadline)
                started = Stamp.now()
            attempt = proposal.build(prev, commit_id)
            try:
                deadline.check()
            except CommitFailedError:
                proposal.discard()
                raise
            stored = _create(log, attempt)
            if stored is not None and stored.commit_id == commit_id:
                break
            if stored is not None:
                proposal.lost()
                proposal.rebase(prev, stored)
                deadline.saw(stored.gc_grace)
                prev = _rebase_to_pointer(log, proposal, stored, deadline)  # cheaper than losing a race to each
            losses += 1
            time.sleep(_backoff(losses, options))
        else:
            proposal.discard()
            raise CommitFailedError(
                f"gave up after {options.max_attempts} attempts to commit to "
                f"{log.location}; it is unchanged by this commit ({commit_id})"
            )
    except AlreadyCommitted as done:
        proposal.discard()
        log.advance_pointer(done.version.version)
        raise
    except CommitFailedError:
        raise  # the outcome is unknown or the staged objects are already gone: keep them
    except ManifestTableError:
        # A conflict, or a store or corruption error before our create landed (every earlier
        # attempt was resolved: nothing was committed). The staged objects are garbage.
        proposal.discard()
        raise
    wait = at_commit_point(stored) if at_commit_point is not None else None
    try:
        _acknowledge(log, stored, pointer)
    finally:
        if wait is not None:
            wait()
    return stored


def _acknowledge(log: VersionedLog[V], committed: V, pointer: Pointer) -> None:
    """Advance the pointer past our committed version. After the commit point a failure must
    never read as "nothing committed": a retrying caller would commit the change twice."""
    try:
        # The pointer can only have moved forward since we read it, so a CAS on its old etag
        # can never move it backwards.
        log.advance_pointer(committed.version, pointer.etag)
    except ManifestTableError as exc:  # a failing store, or a pointer that no longer decodes
        raise CommitFailedError(
            f"commit {committed.commit_id} landed as version {committed.version} of {log.location} and is "
            f"committed: do not retry it. The pointer could not be advanced ({exc}), so readers see it "
            "once the next writer or gc rolls the pointer forward"
        ) from exc


def _rebase_to_pointer(log: VersionedLog[V], proposal: Proposal[V], prev: V, deadline: Deadline) -> V:
    """Rebase onto every version the pointer shows after ``prev``; returns the last."""
    for version in range(prev.version + 1, log.pointer().version + 1):
        successor = log.find(version)
        if successor is None:  # versions are contiguous: only GC makes a hole
            raise CommitConflictError(
                f"version {version} of {log.location}, committed after this commit's snapshot "
                f"(version {prev.version}), was removed by garbage collection: the commit took longer "
                "than the retention of old versions; retry it"
            )
        proposal.rebase(prev, successor)
        deadline.saw(successor.gc_grace)
        prev = successor
    return prev


def _create(log: VersionedLog[V], version: V) -> V | None:
    """Try the commit point. Returns the version now stored under that number: ours (created,
    or a retried PUT that landed though it reported failure) or a winner's; None when nothing
    landed and the same version should be tried again."""
    try:
        return log.create(version)
    except PreconditionFailed:
        pass
    except SyncFailedError:
        raise  # refused before the create: the manifest, or an object it names, was not written
    except StoreError:
        pass  # timed out or failed: it may have landed; read back to know
    try:
        return log.find(version.version)
    except StoreError as exc:
        raise CommitFailedError(
            f"commit {version.commit_id} to {log.location} version {version.version}: "
            f"outcome unknown, the store failed ({exc}); check history() for this "
            "commit id before retrying"
        ) from exc

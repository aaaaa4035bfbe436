"""The commit protocol (docs/protocol.md).

1. The caller read the pointer and built ``changes`` on that version's manifest.
2. Build manifest v(N+1) and create it with put-if-absent: that create is the commit point.
3. Lost the race (the key exists)? Read it back: our own commit id means a retried PUT that
   landed (we won). Otherwise rebase onto the winner and try v(N+2), with jittered backoff.
4. Advance the pointer by compare-and-swap (never backwards) and only then acknowledge.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .arguments import check_int, check_number
from .build import ManifestBuilder
from .changes import Changes
from .conflicts import AlreadyCommitted, check_app_transaction, rebase
from .errors import CommitConflictError, CommitFailedError, ManifestTableError, PreconditionFailed, StoreError
from .format.manifest import Manifest
from .format.pointer import Pointer
from .log import VersionLog
from .tombstones import DeletionVectors


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
    creating its manifest. GC deletes unreferenced objects older than its grace period, so a
    deadline below the grace makes "grace >= the longest commit" hold by construction."""

    def __post_init__(self) -> None:
        check_int("max_attempts", self.max_attempts, minimum=1)
        check_int("free_retries", self.free_retries, minimum=0)
        for name in ("backoff_base", "backoff_cap", "recheck_after"):
            check_number(name, getattr(self, name))
        if self.deadline is not None:  # checked here: a commit compares it only after writing its files
            check_number("deadline", self.deadline, positive=True)


def _backoff(losses: int, options: CommitOptions) -> float:
    """Full-jitter exponential backoff after the free retries, to spread a thundering herd."""
    if losses <= options.free_retries:
        return 0.0
    return random.uniform(0, min(options.backoff_cap, options.backoff_base * 2 ** (losses - options.free_retries)))


@dataclass(frozen=True)
class CommitInfo:
    """One version of the table, as ``history()`` lists it and writes return it."""

    version: int
    operation: str
    timestamp: datetime
    commit_id: str | None
    metrics: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    committed: bool = True
    """False when the write had nothing to do (or was a replay) and no version was made."""

    @classmethod
    def of(cls, manifest: Manifest, committed: bool = True) -> "CommitInfo":
        return cls(manifest.version, manifest.operation, manifest.timestamp, manifest.commit_id,
                   manifest.metrics, manifest.parameters, committed)


def commit(log: VersionLog, base: Manifest, pointer: Pointer, changes: Changes,
           options: CommitOptions = CommitOptions(), started: float = 0.0,
           dvs: DeletionVectors | None = None) -> CommitInfo:
    """Commit ``changes`` staged on ``base`` (the version ``pointer`` named, read at
    ``time.monotonic()`` ``started``; unknown means "long ago": one more pointer read).
    Returns once the pointer is at or past the new version. Raises ``CommitConflictError``
    (nothing was committed; staged objects are removed) or ``CommitFailedError``.
    ``dvs``: the caller's tombstone cache (a delete already loaded the bitmaps it unions)."""
    dvs = dvs if dvs is not None else DeletionVectors(log.store)
    builder = ManifestBuilder(log, dvs)
    try:
        check_app_transaction(changes, base)
    except AlreadyCommitted as done:  # a replayed batch: what it staged will never be committed
        _discard(log, changes, builder)
        return CommitInfo.of(done.manifest, committed=False)
    commit_id = uuid.uuid4().hex
    prev, losses = base, 0
    began = started or time.monotonic()
    try:
        for _ in range(options.max_attempts):
            if options.deadline is not None and time.monotonic() - began > options.deadline:
                _discard(log, changes, builder)
                raise CommitFailedError(
                    f"commit {commit_id} to {log.location} gave up: more than its deadline of "
                    f"{options.deadline} s passed since its snapshot; the table is unchanged by this commit")
            if time.monotonic() - started > options.recheck_after:
                # Garbage collection may have removed versions after a snapshot this old; a
                # create-only write of a removed version would succeed and then be lost.
                changes, prev = _rebase_to_pointer(log, changes, prev, dvs)
                started = time.monotonic()
            manifest = builder.build(prev, changes, commit_id)
            stored = _create(log, manifest)
            if stored is not None and stored.commit_id == commit_id:
                break
            if stored is not None:
                builder.lost()
                changes, prev = _catch_up(log, changes, prev, stored, dvs)
            losses += 1
            time.sleep(_backoff(losses, options))
        else:
            _discard(log, changes, builder)
            raise CommitFailedError(f"gave up after {options.max_attempts} attempts to commit to "
                                    f"{log.location}; the table is unchanged by this commit ({commit_id})")
    except AlreadyCommitted as done:
        _discard(log, changes, builder)
        log.advance_pointer(done.manifest.version)
        return CommitInfo.of(done.manifest, committed=False)
    except CommitFailedError:
        raise  # the outcome is unknown or the staged objects are already gone: keep them
    except ManifestTableError:
        # A conflict, or a store or corruption error before our create landed (every earlier
        # attempt was resolved: nothing was committed). The staged objects are garbage.
        _discard(log, changes, builder)
        raise
    _acknowledge(log, stored, pointer)
    return CommitInfo.of(stored)


def _acknowledge(log: VersionLog, manifest: Manifest, pointer: Pointer) -> None:
    """Advance the pointer past our committed version. After the commit point a failure must
    never read as "nothing committed": a retrying caller would commit the change twice."""
    try:
        # The pointer can only have moved forward since we read it, so a CAS on its old etag
        # can never move it backwards.
        log.advance_pointer(manifest.version, pointer.etag)
    except ManifestTableError as exc:  # a failing store, or a pointer that no longer decodes
        raise CommitFailedError(
            f"commit {manifest.commit_id} landed as version {manifest.version} of {log.location} and is "
            f"durable: do not retry it. The pointer could not be advanced ({exc}), so readers see it "
            "once the next writer or gc rolls the pointer forward") from exc


def _catch_up(log: VersionLog, changes: Changes, prev: Manifest, winner: Manifest,
              dvs: DeletionVectors) -> tuple[Changes, Manifest]:
    """Rebase onto the winner and onto every version the pointer shows after it: reading a
    few manifests is cheaper than losing a create race for each of them in turn."""
    return _rebase_to_pointer(log, rebase(changes, prev, winner, dvs), winner, dvs)


def _rebase_to_pointer(log: VersionLog, changes: Changes, prev: Manifest,
                       dvs: DeletionVectors) -> tuple[Changes, Manifest]:
    for version in range(prev.version + 1, log.pointer().version + 1):
        successor = log.find(version)
        if successor is None:  # versions are contiguous: only GC makes a hole
            raise CommitConflictError(
                f"version {version} of {log.location}, committed after this commit's snapshot "
                f"(version {prev.version}), was removed by garbage collection: the commit took longer "
                "than the table's retention; retry it")
        changes, prev = rebase(changes, prev, successor, dvs), successor
    return changes, prev


def _create(log: VersionLog, manifest: Manifest) -> Manifest | None:
    """Try the commit point. Returns the manifest now stored at that version: ours (created,
    or a retried PUT that landed though it reported failure) or a winner's; None when
    nothing landed and the same version should be tried again."""
    try:
        log.create(manifest)
        return manifest
    except PreconditionFailed:
        pass
    except StoreError:
        pass  # timed out or failed: it may have landed; read back to know
    try:
        existing = log.find(manifest.version)
    except StoreError as exc:
        raise CommitFailedError(f"commit {manifest.commit_id} to {log.location} version {manifest.version}: "
                                f"outcome unknown, the store failed ({exc}); check history() for this "
                                "commit id before retrying") from exc
    return existing


def _discard(log: VersionLog, changes: Changes, builder: ManifestBuilder) -> None:
    """Remove the objects staged by a commit that definitely did not land."""
    log.store.delete_unreferenced([f.path for f in changes.added] + builder.written)

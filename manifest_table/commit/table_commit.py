"""Committing a table's changes: the loop (loop.py) over the table's version log, with a
proposal that builds each attempt's manifest (builder.py) and rebases onto a winner by the
conflict matrix (conflicts.py). Once the commit has landed, the table's mirrors are written,
best effort (docs/mirrors.md).

``prepare`` is the one entrance to a table commit: a table's own commit (``commit``) and each
table of a database transaction (database/transaction.py) pass through it, so every check a
table's staged changes must pass before the commit loop runs is made there, once (STYLE.md,
"One entrance per mechanism"; a database transaction that rebuilt this prologue once left out
the replayed-batch check)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ..clock import Stamp
from ..data.tombstones import DeletionVectors
from ..format.keys import is_writer_key
from ..format.manifest import Manifest
from ..format.pointer import Pointer
from ..log.version import Version
from ..log.version_log import VersionLog
from ..storage import FileIO
from .builder import ManifestBuilder
from .changes import Changes
from .conflicts import check_for_app_transaction_already_committed, rebase
from .loop import AlreadyCommitted, CommitOptions
from .loop import commit as commit_loop


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
    def of(cls, manifest: Manifest, committed: bool = True) -> CommitInfo:
        return cls(
            manifest.version,
            manifest.operation,
            manifest.timestamp,
            manifest.commit_id,
            manifest.metrics,
            manifest.parameters,
            committed,
        )


class TableProposal:
    """A table's ``Changes`` as the loop's proposal: each attempt's manifest built on the
    version it lands on, the changes rebased onto each winner."""

    def __init__(self, log: VersionLog, changes: Changes, dvs: DeletionVectors) -> None:
        self.changes = changes
        self._log, self._dvs = log, dvs
        self._builder = ManifestBuilder(log, dvs)

    def build(self, prev: Version, commit_id: str) -> Version:
        return Version.of(self._builder.build(prev, self.changes, commit_id), self._log.segments)

    def rebase(self, prev: Version, winner: Version) -> None:
        self.changes = rebase(self.changes, prev, winner, self._dvs, FileIO(self._log.store))

    def lost(self) -> None:
        self._builder.lost()

    def discard(self) -> None:
        """Remove what this commit wrote: its staged data files of our writers' shapes (a file a
        caller named in ``add_files`` under its own name is theirs: docs/design/011) and the
        objects its builds wrote."""
        staged = [f.path for f in self.changes.added if is_writer_key(f.path)]
        self._log.store.delete_unreferenced(staged + self._builder.written)


@runtime_checkable
class CommitsThrough(Protocol):
    """A table log whose versions are another log's: a database's table (database/), whose
    commits are database commits. ``commit_table`` runs the loop on that log and returns the
    table's version at the committed one."""

    def commit_table(
        self, proposal: TableProposal, base: Version, pointer: Pointer, options: CommitOptions, started: Stamp | None
    ) -> Version: ...


def prepare(log: VersionLog, base: Version, changes: Changes, dvs: DeletionVectors) -> TableProposal:
    """The one entrance to a table commit: the checks ``changes``, staged on ``base``, pass
    before the commit loop runs, then the proposal the loop drives (alone, or as one table of a
    database commit). Per-table checks made before the commit point belong here:

    - ``check_for_app_transaction_already_committed``: ``base`` already holds this streaming
      batch (a replay). Raises ``AlreadyCommitted`` once what was staged is removed: it will
      never be committed.

    The same checks against each winner run in the rebase (conflicts.py)."""
    proposal = TableProposal(log, changes, dvs)
    try:
        check_for_app_transaction_already_committed(changes, base)
    except AlreadyCommitted:
        proposal.discard()
        raise
    return proposal


def commit(
    log: VersionLog,
    base: Version,
    pointer: Pointer,
    changes: Changes,
    options: CommitOptions = CommitOptions(),
    started: Stamp | None = None,
    dvs: DeletionVectors | None = None,
) -> CommitInfo:
    """Commit ``changes`` staged on ``base`` (the version ``pointer`` named, read at
    ``started``, or earlier if ``changes`` staged objects before: loop.py). Returns once the
    pointer is at or past the new version.
    Raises ``CommitConflictError`` (nothing was committed; staged objects are removed) or
    ``CommitFailedError``. ``dvs``: the caller's tombstone cache (a delete already loaded the
    bitmaps it unions)."""
    try:
        proposal = prepare(log, base, changes, dvs if dvs is not None else DeletionVectors(log.store))
    except AlreadyCommitted as done:
        return CommitInfo.of(done.version, committed=False)
    try:
        if isinstance(log, CommitsThrough):
            committed = log.commit_table(proposal, base, pointer, options, started)
            _mirrors(log)(committed)()
        else:
            committed = commit_loop(log, proposal, base, pointer, options, started, _mirrors(log))
    except AlreadyCommitted as done:  # the loop removed what was staged and advanced the pointer
        return CommitInfo.of(done.version, committed=False)
    return CommitInfo.of(committed)


def _mirrors(log: VersionLog) -> Callable[[Version], Callable[[], None]]:
    """Writing a committed version's mirrors, best effort, after the commit point (while the
    pointer advances; docs/mirrors.md). Returns the wait for them."""

    def start(committed: Version) -> Callable[[], None]:
        if not committed.mirrors:
            return lambda: None
        from ..mirrors.sync import start as start_mirrors  # (fastavro and the writers load on use)

        return start_mirrors(log, committed)

    return start

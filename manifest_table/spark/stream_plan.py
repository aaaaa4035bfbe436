"""Planning a streaming read: which rows of which commits each micro-batch reads.

A stream is a sequence of *units*: first, unless the query names where to start, the live
files of the version current when it started (its snapshot), one unit each, then, commit after
commit, what ``units_of`` takes from each commit (its version and its parent's: DESIGN.md 19,
changes derived, not written), found as the mirrors and the change feed find them
(mirrors/change.py): for the append stream, the files a commit added, one unit each; for the
change feed, the commit's change rows, one unit (``Table.changes``, read whole).
A *position* (Spark's offset) is the next unit to read: ``(version, index)``, ``snapshot``
telling a snapshot's units from a commit's. A version whose units are all read is written as
``(version + 1, 0)``, so every position has one form and Spark's comparison of offsets (their
JSON) is exact.

A query's first position must come out the same every time Spark asks for it: Spark keeps
only the *end* of each micro-batch in its checkpoint and asks for the initial offset again to
replay a first batch that did not finish. So "from the latest version" is not a version but a
marker, ``LATEST`` (its snapshot) or ``AFTER_LATEST`` (only later commits), resolved when the
first batch is planned and recovered from that batch's end when it is planned again.

Everything here is decided by immutable manifests, so planning the same ``(start, end)`` again
after a restart gives the same units: with Spark's checkpoint of offsets and an idempotent
sink, that is exactly-once. The planner does no Spark work."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..data.tombstones import DeletionVectors
from ..errors import (
    ChangeCommitError,
    InvalidArgumentError,
    ManifestTableError,
    SchemaMismatchError,
    VersionExpiredError,
    VersionNotFoundError,
)
from ..feed.plan import Rewritten
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..handle import TableHandle
from ..log.version import Version
from ..mirrors.change import version_change


@dataclass(frozen=True)
class Position:
    """The next unit a stream reads (Spark's offset)."""

    version: int
    index: int = 0
    snapshot: bool = False

    def to_offset(self) -> dict[str, int | bool]:
        return {"version": self.version, "index": self.index, "snapshot": self.snapshot}

    @classmethod
    def of_offset(cls, offset: dict[str, int | bool]) -> Position:
        return cls(int(offset["version"]), int(offset["index"]), bool(offset["snapshot"]))

    @property
    def order(self) -> tuple[int, int]:
        return (self.version, self.index)

    @property
    def marker(self) -> bool:
        """``LATEST`` or ``AFTER_LATEST``: a start resolved when first planned."""
        return self.version < 0


LATEST = Position(-1, 0, snapshot=True)
"""The start of a query that reads the latest version's snapshot first."""
AFTER_LATEST = Position(-1, 0)
"""The start of a query that reads only commits after the latest version."""


@dataclass(frozen=True)
class Unit:
    """The live rows of ``file`` as ``version`` lists it (its deletes at that version); or,
    without ``file``, the change rows of commit ``version`` (the change feed), read whole:
    ``touched`` are the data files it added, removed or deleted rows of."""

    version: int
    file: DataFile | None = None
    touched: tuple[DataFile, ...] = ()

    @property
    def files(self) -> tuple[DataFile, ...]:
        """The data files the unit reads, which rate limits count."""
        return (self.file,) if self.file is not None else self.touched

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Limit:
    """At most this many files or bytes per micro-batch; at least one unit is always read."""

    max_files: int | None = None
    max_bytes: int | None = None

    def admits(self, files: int, size: int, unit: Unit) -> bool:
        if files == 0:
            return True
        if self.max_files is not None and files + len(unit.files) > self.max_files:
            return False
        return self.max_bytes is None or size + unit.size <= self.max_bytes


@dataclass(frozen=True)
class FileChanges:
    """The files a commit added, removed, and deleted rows of (before, after)."""

    added: Sequence[DataFile]
    removed: Sequence[DataFile]
    redeleted: Sequence[tuple[DataFile, DataFile]]


UnitsOf = Callable[[Version, FileChanges], Sequence[Unit]]
"""(a commit's version, the files it changed: ``file_changes``) -> its units."""


def appended_rows(skip_change_commits: bool) -> UnitsOf:
    """The append stream: a commit's added files; a commit that deleted or replaced rows
    (dropping a file whose rows were all deleted already removes none) fails the stream, or
    with ``skip_change_commits`` is skipped whole (as Delta's option of that name does: rows
    it added are skipped too)."""

    def units_of(commit: Version, changes: FileChanges) -> Sequence[Unit]:
        changed = sum(1 for f in changes.removed if f.live_rows) + len(changes.redeleted)
        if changed and skip_change_commits:
            return ()
        if changed:
            raise ChangeCommitError(
                f"version {commit.version} ({commit.operation}) deleted or replaced rows of {changed} data "
                "file(s); a streaming read emits appended rows only: set the option skipChangeCommits to "
                "true to skip commits that delete or update rows (rows they add are skipped too), or start "
                "a new query after it with startingVersion"
            )
        return tuple(Unit(commit.version, f) for f in changes.added if f.live_rows > 0)

    return units_of


def changed_rows(commit: Version, changes: FileChanges) -> Sequence[Unit]:
    """The change feed: a commit that changed the table's files is one unit, its change rows."""
    touched = (*changes.added, *changes.removed, *(after for _, after in changes.redeleted))
    return (Unit(commit.version, touched=touched),) if touched else ()


def file_changes(parent: Version | None, commit: Version, dvs: DeletionVectors) -> FileChanges:
    """The files ``commit`` changed relative to ``parent``: all its files when the table did
    not exist before it. A rewrite's files are left out (a compaction moves rows without
    changing any, also when a delete raced it: neither stream reads them) but for the files
    a purge dropped rows of, which count as removed (the append stream fails on them or skips
    the commit, the change feed reads their deletes), as in the feed's plan."""
    if parent is None:
        return FileChanges(commit.files, (), ())
    change = version_change(parent, commit)
    rewritten = Rewritten.of(commit)
    return FileChanges(
        [f for f in change.added if f.path not in rewritten.moved],
        [f for f in change.removed if f.path not in rewritten.moved or rewritten.dropped(f, dvs)],
        change.redeleted,
    )


class StreamPlanner:
    """Positions and units of one table's stream, read under ``fields`` (the schema the
    query was started with, the schema of version ``fields_version``)."""

    def __init__(self, table: TableHandle, fields: FieldIds, fields_version: int, units_of: UnitsOf) -> None:
        self.table, self.fields, self.fields_version, self.units_of = table, fields, fields_version, units_of
        self._commits: dict[int, Sequence[Unit]] = {}

    def initial(self, starting_version: int | str | None, starting_timestamp: datetime | None) -> Position:
        """Where a new query starts: the latest version's snapshot (``LATEST``); or the commits
        from ``starting_version`` (``"latest"``: ``AFTER_LATEST``); or from the first version
        committed at or after ``starting_timestamp``, which must not be in the future (the
        answer could change as commits arrive)."""
        if starting_version is None and starting_timestamp is None:
            return LATEST
        if starting_version == "latest":
            return AFTER_LATEST
        if starting_timestamp is not None:
            if starting_timestamp > datetime.now(UTC):
                raise InvalidArgumentError(f"startingTimestamp {starting_timestamp.isoformat()} is in the future")
            return Position(self._first_at_or_after(starting_timestamp))
        version, latest = int(str(starting_version)), self.table.log.read_pointer().version
        if version > latest:
            raise VersionNotFoundError(
                f"startingVersion {version} does not exist in {self.table.uri} (latest is {latest})"
            )
        self._units(version)  # its manifest and its parent's must still exist
        return Position(version)

    def latest(self, start: Position, limit: Limit | None, last: int | None = None) -> Position:
        """The end of the next micro-batch from ``start``: everything committed up to
        ``last`` (default: the latest version), or as much as ``limit`` admits, and never past
        a version that cannot be read (a change commit, a schema change, a collected version):
        the batch ends before it, and the next one raises its error."""
        if last is None:
            last = self.table.log.read_pointer().version
        if start.marker:  # the query's first batch: the latest version is the one current now
            start = Position(last, 0, snapshot=True) if start.snapshot else Position(last + 1)
        end, files, size = start, 0, 0
        walk = self._walk(start, last)
        while True:
            try:
                after, unit = next(walk)
            except StopIteration:
                return end
            except ManifestTableError:
                if end == start:
                    raise
                return end  # a version that cannot be read ends the batch; the next one fails on it
            if unit is not None:
                if limit is not None and not limit.admits(files, size, unit):
                    return end
                files, size = files + len(unit.files), size + unit.size
            end = after

    def units(self, start: Position, end: Position) -> list[Unit]:
        """The units from ``start`` up to (not including) ``end``."""
        if start.marker:  # as planned the first time: the first batch ended in or after its snapshot
            first = end.version if end.snapshot else end.version - 1
            start = Position(first, 0, snapshot=True) if start.snapshot else end
        if end.order <= start.order:
            return []
        last = end.version if end.index else end.version - 1
        out = []
        for after, unit in self._walk(start, last):
            if after.order > end.order:
                break
            if unit is not None:
                out.append(unit)
        return out

    def forget_before(self, version: int) -> None:
        """Drop what was planned for versions before ``version`` (Spark committed them)."""
        for v in [v for v in self._commits if v < version]:
            del self._commits[v]

    def _walk(self, start: Position, last: int) -> Iterator[tuple[Position, Unit | None]]:
        """Each unit from ``start`` on, with the position after it; a version without units
        yields ``None`` with the position after the version."""
        version, index = start.version, start.index
        if start.snapshot:
            units = self._snapshot(version)
            for i in range(index, len(units)):
                yield self._after(version, i + 1, len(units), snapshot=True), units[i]
            if index >= len(units):
                yield Position(version + 1), None
            version, index = version + 1, 0
        for v in range(version, last + 1):
            units = self._units(v)
            for i in range(index if v == version else 0, len(units)):
                yield self._after(v, i + 1, len(units)), units[i]
            if not units:
                yield Position(v + 1), None

    @staticmethod
    def _after(version: int, index: int, count: int, snapshot: bool = False) -> Position:
        return Position(version + 1) if index >= count else Position(version, index, snapshot)

    def _snapshot(self, version: int) -> Sequence[Unit]:
        state = self._state(version)
        return tuple(Unit(version, f) for f in state.files if f.live_rows > 0) if state is not None else ()

    def _units(self, version: int) -> Sequence[Unit]:
        found = self._commits.get(version)
        if found is None:
            commit = self._state(version)
            if commit is None:  # a database's table before its creation
                found = ()
            else:
                if version > self.fields_version and not _same_schema(commit.fields, self.fields):
                    raise SchemaMismatchError(
                        f"the schema of {self.table.uri} changed at version {version}, after the streaming "
                        f"query started (with the schema of version {self.fields_version}); restart the "
                        "query to read on with the new schema"
                    )
                parent = self._state(version - 1, version) if version else None
                found = self.units_of(commit, file_changes(parent, commit, DeletionVectors(self.table.store)))
            self._commits[version] = found
        return found

    def _state(self, version: int, needed_by: int | None = None) -> Version | None:
        """The table at ``version`` (the parent of commit ``needed_by``, if given); None where
        it did not exist yet (a database's table has the database's versions, from before its
        creation). A version garbage collection removed fails the stream, saying what to do."""
        try:
            return self.table.log.manifest(version)
        except VersionExpiredError as exc:
            needed = version if needed_by is None else needed_by
            raise VersionExpiredError(
                f"the streaming read of {self.table.uri} needs version {needed} (and, for a commit's "
                f"changes, its parent), which garbage collection has removed ({exc}); start a new query "
                "(a new checkpoint) with startingVersion at a retained version, or retain versions "
                "longer than the query may lag"
            ) from exc
        except VersionNotFoundError:
            return None

    def _first_at_or_after(self, when: datetime) -> int:
        try:
            current = self.table.log.as_of(when)
        except VersionExpiredError:
            raise
        except VersionNotFoundError:
            return 0  # before the table existed: from its first version
        return current.version if current.timestamp_ms >= when.timestamp() * 1000 else current.version + 1


def _same_schema(a: FieldIds, b: FieldIds) -> bool:
    return a.ids == b.ids and a.schema.equals(b.schema)

"""A table's change feed: the rows changed by the commits in ``(start, end]``, in commit order,
as a scan-like object (docs/changes.md). Each commit's rows come from ``commit_changes``
(commit.py), read as the columns of the ``end`` version: a column renamed since reads under
its new name (by field id), one added since is null in earlier rows, one dropped is gone.

The version number is the cursor: a consumer that has applied the changes up to version v
asks for ``changes(v)`` next; ``end_version`` says how far a feed went."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from ..arguments import check_columns, check_time, check_version
from ..errors import InvalidArgumentError, VersionExpiredError, VersionNotFoundError
from ..expressions import Expr, to_expr
from ..log.version import Version
from ..log.version_log import PointerLog, VersionLog
from ..storage import FileIO, ObjectStore
from .commit import CHANGE_COLUMNS, ChangeReading, commit_changes


@dataclass(frozen=True)
class CommitChanges:
    """The change rows of one commit (``ChangeFeed.commits``); read when asked for."""

    version: int
    timestamp: datetime
    operation: str
    _batches: Callable[[], Iterator[pa.RecordBatch]]
    schema: pa.Schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches()

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), self.schema)


class ChangeFeed:
    """The change rows of the commits in ``(start_version, end_version]``: every commit's
    deletes, update pairs and inserts, in commit order, with ``_change_type``,
    ``_commit_version`` and ``_commit_timestamp``. Lazy and one pass per call: each
    ``to_*`` reads the commits again, streaming."""

    def __init__(
        self,
        log: VersionLog,
        io: FileIO,
        store: ObjectStore,
        start: int,
        end: int,
        columns: Sequence[str] | None = None,
        where: str | Expr | None = None,
    ) -> None:
        self._log = log
        self.start_version, self.end_version = start, end
        last = log.manifest(end)
        names = last.schema.names
        chosen = check_columns(columns, names)
        chosen = list(names) if chosen is None else chosen
        clash = [c for c in chosen if c in CHANGE_COLUMNS.names]
        if clash:
            raise InvalidArgumentError(
                f"columns {clash} have the names of the change feed's own columns; leave them out with columns="
            )
        expr = to_expr(where)
        self._reading = ChangeReading(
            io, store, last.fields, chosen, expr.bind(last.schema) if expr is not None else None
        )

    def __repr__(self) -> str:
        return f"ChangeFeed({self._log.location!r}, versions {self.start_version}..{self.end_version}]"

    @property
    def schema(self) -> pa.Schema:
        """The columns chosen, as of ``end_version``, then the change columns."""
        return self._reading.schema

    # --- per commit ----------------------------------------------------------------------
    def commits(self) -> Iterator[CommitChanges]:
        """Each commit of the range in order (those that changed no row too): what a
        consumer applies, then records ``version`` of, to resume after it."""
        prev = self._state(self.start_version)
        for version in range(self.start_version + 1, self.end_version + 1):
            cur = self._state(version)
            if cur is not None:
                yield self._commit(prev, cur)
            prev = cur

    def commit(self, version: int) -> CommitChanges:
        """The change rows of commit ``version`` alone, in this feed's schema: the unit a
        distributed or streaming reader gives each task (one partition per commit)."""
        if not self.start_version < version <= self.end_version:
            raise InvalidArgumentError(
                f"version {version} is not in this feed's range ({self.start_version}, {self.end_version}]"
            )
        cur = self._state(version)
        if cur is None:
            raise VersionNotFoundError(f"{self._log.location} did not exist yet at version {version}")
        return self._commit(self._state(version - 1), cur)

    def _commit(self, prev: Version | None, cur: Version) -> CommitChanges:
        reading = self._reading
        return CommitChanges(
            cur.version, cur.timestamp, cur.operation, lambda: commit_changes(prev, cur, reading), reading.schema
        )

    def _state(self, version: int) -> Version | None:
        """The table at ``version``; None if it did not exist yet (a database's table created later)."""
        try:
            return self._log.manifest(version)
        except VersionExpiredError:
            raise expired(self._log, version, self.end_version) from None
        except VersionNotFoundError:
            return None

    # --- as a scan -----------------------------------------------------------------------
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for commit in self.commits():
            yield from commit.to_batches()

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), self.schema)

    def to_pandas(self, **kwargs: Any) -> Any:  # -> pandas.DataFrame
        return self.to_arrow().to_pandas(**kwargs)

    def to_reader(self) -> pa.RecordBatchReader:
        """A one-pass stream of the change rows (DuckDB, Polars, ``write_dataset``)."""
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """The Arrow PyCapsule stream protocol: ``pa.table(feed)``, ``pl.DataFrame(feed)``,
        ``duckdb.sql("from feed")`` read the change rows batch by batch."""
        return self.to_reader().__arrow_c_stream__(requested_schema)


def change_range(
    log: PointerLog[Any],
    start_version: int | None,
    end_version: int | None,
    start_as_of: datetime | str | None,
    end_as_of: datetime | str | None,
) -> tuple[int, int]:
    """``(start, end)`` of a table's log or a database's from a caller's versions or times:
    the commits after ``start``, up to and including ``end`` (default: the latest). A time
    names the version current then, so ``start_as_of=t`` gives the commits made after ``t``."""
    if (start_version is None) == (start_as_of is None):
        raise InvalidArgumentError(
            "changes needs where to start: start_version (the last version already seen) or start_as_of, not both"
        )
    if end_version is not None and end_as_of is not None:
        raise InvalidArgumentError("pass end_version or end_as_of, not both")
    latest = log.pointer().version
    start = (
        check_version(start_version)
        if start_version is not None
        else _at(log, check_time(start_as_of, "start_as_of"), latest)
    )
    if start > latest:
        raise VersionNotFoundError(f"version {start} does not exist in {log.location} (latest is {latest})")
    end = latest
    if end_version is not None:
        end = check_version(end_version)
        if end > latest:
            raise VersionNotFoundError(f"version {end} does not exist in {log.location} (latest is {latest})")
    elif end_as_of is not None:
        end = _at(log, check_time(end_as_of, "end_as_of"), latest)
    if start > end:
        raise InvalidArgumentError(f"the start version {start} is after the end version {end}")
    if log.find(start) is None and not _before_creation(log, start):
        raise expired(log, start, end)
    return start, end


def _at(log: PointerLog[Any], when: datetime, latest: int) -> int:
    """The version current at ``when``: before the first version, version 0 (which holds no row)."""
    try:
        return log.as_of(when).version
    except VersionExpiredError as exc:
        raise VersionExpiredError(f"{exc}; the oldest retained version is {log.oldest(latest)}") from None
    except VersionNotFoundError:
        return 0


def _before_creation(log: PointerLog[Any], version: int) -> bool:
    """Whether ``version`` is missing because the table did not exist yet (a database's
    table, whose versions are its database's), not because it expired."""
    try:
        log.manifest(version)
    except VersionExpiredError:
        return False
    except VersionNotFoundError:
        return True
    return False


def expired(log: PointerLog[Any], version: int, existing: int) -> VersionExpiredError:
    """The error for a feed that needs ``version``, which garbage collection removed."""
    oldest = log.oldest(existing)
    return VersionExpiredError(
        f"version {version} of {log.location} has been removed by garbage collection; the oldest "
        f"retained version is {oldest}: start the changes at {oldest} or later (a consumer that had "
        f"only seen up to version {version} missed changes and must read the table again)"
    )

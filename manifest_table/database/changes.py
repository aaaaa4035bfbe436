"""A database's change feed: every table's change rows (feed/), commit by commit in
database-version order, each batch with a ``_table`` column naming its table as of that
version (docs/changes.md, "Databases").

Tables have their own columns, so the feed is a stream of record batches of several schemas:
each table's rows are read as its columns at the range's end (or, for a table dropped in the
range, at its last version). Creating, dropping and renaming a table changes no row: those
are in ``Database.history()``. Built on the database's narrow handle (handle.py) and its
tables' own logs (table.py), as a table's ``changes`` is."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from ..errors import VersionExpiredError, VersionNotFoundError
from ..feed import ChangeReading, commit_changes, expired
from ..format.database import DatabaseVersion
from ..log.version import Version
from .handle import DatabaseHandle
from .table import DatabaseTable, table_of

TABLE_COLUMN = "_table"


@dataclass(frozen=True)
class TableCommit:
    """What one database commit did to the rows of one table."""

    table: str
    version: int
    timestamp: datetime
    operation: str
    batches: Iterator[pa.RecordBatch]


class DatabaseChanges:
    """The change rows of every table in the database commits ``(start_version, end_version]``.
    Iterating yields record batches (each of one table, with ``_table``); ``commits()`` yields
    them grouped by commit and table. One pass per call; the database version is the cursor."""

    def __init__(self, db: DatabaseHandle, start: int, end: int) -> None:
        self._db = db
        self.start_version, self.end_version = start, end

    def __repr__(self) -> str:
        return f"DatabaseChanges({self._db.uri!r}, versions {self.start_version}..{self.end_version}]"

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for commit in self.commits():
            yield from commit.batches

    def commits(self) -> Iterator[TableCommit]:
        """Per database version in order, per table it changed (by name), its change rows."""
        versions = range(self.start_version + 1, self.end_version + 1)
        readings = _Readings(self._db, self._last_states(versions))
        for version in versions:
            db = self._version(version)
            for name, table_id in sorted((db.names[t], t) for t in db.changed if t in db.names):
                table = readings.table(name, table_id)
                cur = table.log.at(db)
                assert cur is not None  # db names the table
                batches = readings.batches(table, name, _parent(table, version), cur)
                yield TableCommit(name, version, db.timestamp, cur.operation, batches)

    def _version(self, version: int) -> DatabaseVersion:
        try:
            return self._db.log.manifest(version)
        except VersionExpiredError:
            raise expired(self._db.log, version, self.end_version) from None

    def _last_states(self, versions: range) -> dict[str, DatabaseVersion]:
        """Per table of ``versions``: the last database version of the range that holds it
        (the version its rows are read as). A pass over the range's versions before the rows,
        so a feed reads each database version twice (small objects; the rows dominate)."""
        last: dict[str, DatabaseVersion] = {}
        for version in reversed(versions):
            db = self._version(version)
            for table_id in db.names.keys() - last.keys():
                last[table_id] = db
        return last


class _Readings:
    """Each table's handle and the columns its rows are read as, made once per feed."""

    def __init__(self, db: DatabaseHandle, last: dict[str, DatabaseVersion]) -> None:
        self._db, self._last = db, last
        self._tables: dict[str, DatabaseTable] = {}
        self._readings: dict[str, ChangeReading] = {}

    def table(self, name: str, table_id: str) -> DatabaseTable:
        if table_id not in self._tables:
            self._tables[table_id] = table_of(self._db, name, table_id)
        return self._tables[table_id]

    def batches(self, table: DatabaseTable, name: str, prev: Version | None, cur: Version) -> Iterator[pa.RecordBatch]:
        reading = self._readings.get(table.table_id)
        if reading is None:
            state = table.log.at(self._last[table.table_id])
            assert state is not None  # the version was chosen for holding the table
            reading = ChangeReading(table.io, table.store, state.fields, state.schema.names)
            self._readings[table.table_id] = reading
        for batch in commit_changes(prev, cur, reading):
            yield batch.append_column(
                pa.field(TABLE_COLUMN, pa.string(), nullable=False), pa.repeat(name, batch.num_rows)
            )


def _parent(table: DatabaseTable, version: int) -> Version | None:
    """The table before database version ``version``; None if it did not exist yet."""
    try:
        return table.log.manifest(version - 1)
    except VersionExpiredError:
        raise
    except VersionNotFoundError:
        return None

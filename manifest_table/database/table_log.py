"""One table of a database, seen as a table's version log: its versions are the database's
versions that hold it, each built from the table's root and the database version's commit
fields (format/database.py). Every table operation reads through it unchanged; its commits
are database commits (``commit_table``, commit.py)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound, TableNotFoundError, TableRenamedError, VersionNotFoundError
from ..format.database import DatabaseVersion, at_version
from ..format.manifest import Manifest
from ..format.pointer import Pointer
from ..log.version import Version
from ..log.version_log import VersionLog
from ..storage import ObjectStore
from .log import DatabaseLog

if TYPE_CHECKING:
    from ..clock import Stamp
    from ..commit.loop import CommitOptions
    from ..commit.table_commit import TableProposal


class DatabaseTableLog(VersionLog):
    """Table ``table_id`` (named ``name`` when opened) of the database of ``database``.
    ``pinned``: a database version and its pointer that every read of the latest version
    returns (a database transaction's or snapshot's read point). ``created``: the first
    state of a table a transaction creates, which no stored version holds yet."""

    every_version_changes = False

    def __init__(
        self,
        store: ObjectStore,
        location: str,
        database: DatabaseLog,
        name: str,
        table_id: str,
        pinned: tuple[DatabaseVersion, Pointer] | None = None,
        created: Manifest | None = None,
    ) -> None:
        super().__init__(store, location)
        self.database, self.name, self.table_id = database, name, table_id
        self.pinned, self.created = pinned, created
        self._seen = pinned[0].version if pinned is not None else -1
        """The newest database version at which this log found the table."""

    # --- the pointer is the database's --------------------------------------------------
    def pointer(self) -> Pointer:
        with self._lock:
            self._opened = None
        return self.pinned[1] if self.pinned is not None else self.database.pointer()

    def probe_forward(self, version: int) -> int:
        return self.database.probe_forward(version)

    def advance_pointer(self, version: int, etag: str | None = None) -> None:
        self.database.advance_pointer(version, etag)

    def forget_before(self, version: int) -> None:
        self.database.forget_before(version)

    def stored(self, version: int) -> bool:
        return self.database.stored(version)

    # --- versions -----------------------------------------------------------------------
    def at(self, db: DatabaseVersion) -> Version | None:
        """The table at database version ``db``, or None if ``db`` does not hold it."""
        if self.created is not None:
            state = self.created
        else:
            name = db.names.get(self.table_id)
            if name is None:
                return None
            self._seen = max(self._seen, db.version)
            key = db.tables[name].root
            try:
                state = self.database.root(key)
            except NotFound:
                raise self.object_missing(db.version, key) from None
        return Version.of(at_version(state, db, self.table_id), self.segments)

    def find(self, version: int) -> Version | None:
        if self.pinned is not None and version == self.pinned[0].version:
            return self.at(self.pinned[0])
        db = self.database.find(version)
        return None if db is None else self.at(db)

    def manifest(self, version: int) -> Version:
        db = (
            self.pinned[0]
            if self.pinned is not None and version == self.pinned[0].version
            else self.database.manifest(version)
        )
        found = self.at(db)
        if found is not None:
            return found
        if version >= self._seen:
            raise TableNotFoundError(
                f"table {self.name!r} is no longer in database {self.database.location} "
                f"at version {version}: it was dropped"
            )
        raise VersionNotFoundError(
            f"table {self.name!r} did not exist yet at version {version} of database {self.database.location}"
        )

    def latest(self) -> tuple[Version, Pointer]:
        """What a write builds on: the table at the latest version, if it still has the name
        this handle was opened by (``TableRenamedError`` naming its new name if not: reads
        follow the table, writes follow the name; docs/databases.md)."""
        pointer = self.pointer()
        found = self.manifest(pointer.version)
        if self.pinned is None and self.created is None:
            db = self.database.manifest(pointer.version)
            name = db.names[self.table_id]
            if name != self.name:
                raise TableRenamedError(self._renamed(name, db))
        return found, pointer

    def _renamed(self, name: str, db: DatabaseVersion) -> str:
        location = self.database.location.rstrip("/")
        taken = f"; the name {self.name!r} now names another table" if self.name in db.tables else ""
        return (
            f"table {self.name!r} of database {location} was renamed to {name!r} (its name at version "
            f"{db.version}{taken}): a handle opened as {self.name!r} only reads it; open {location}/{name} "
            "to write to it"
        )

    def as_of(self, when: datetime) -> Version:
        return self.manifest(self.database.as_of(when).version)

    def history(self, limit: int | None = None) -> list[Version]:
        """The database versions that changed this table, newest first, back to its creation
        or the oldest retained version."""
        out: list[Version] = []
        version = self.pointer().version
        while version >= 0 and (limit is None or len(out) < limit):
            db = self.database.find(version)
            if db is None or self.table_id not in db.names:
                break
            if self.table_id in db.changed:
                out.append(self.at(db))  # type: ignore[arg-type]  # db holds the table
            version -= 1
        return out

    # --- commits ------------------------------------------------------------------------
    def commit_table(
        self, proposal: TableProposal, base: Version, pointer: Pointer, options: CommitOptions, started: Stamp | None
    ) -> Version:
        """A commit of this table alone: a database commit of one table (commit.py)."""
        from ..commit.loop import commit as commit_loop
        from .commit import DatabaseProposal, TablePart  # (the commit machinery loads on use)

        db_base = self.database.manifest(base.version)
        committed = commit_loop(
            self.database,
            DatabaseProposal(self.database, [TablePart(self, proposal, base_name=self.name)]),
            db_base,
            pointer,
            options,
            started,
        )
        found = self.at(committed)
        assert found is not None  # the commit checked that the table is there
        return found

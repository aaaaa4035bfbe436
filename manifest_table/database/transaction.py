"""A database transaction: table transactions staged on one database version, plus tables
created, dropped and renamed, committed as one database version (or not at all)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..clock import Stamp
from ..commit import CommitInfo
from ..commit.loop import AlreadyCommitted
from ..commit.loop import commit as commit_loop
from ..commit.table_commit import TableProposal
from ..errors import InvalidArgumentError, TableExistsError, TableNotFoundError
from ..format.database import DatabaseVersion, check_table_name, new_table_id
from ..format.manifest import FORMAT_VERSION, NEW_TABLE_FORMAT_VERSION, Manifest
from ..format.properties import DATABASE_TABLE
from ..operations.create import first_version
from ..transaction import CommitsOnExit, Transaction
from .commit import DatabaseProposal, TablePart
from .handle import DatabaseHandle
from .table import table_of
from .table_log import DatabaseTableLog


class TableTransaction(Transaction):
    """One table's share of a database transaction: every operation of a table transaction,
    committed only with the database transaction."""

    def commit(self) -> CommitInfo:
        raise InvalidArgumentError(
            "a table of a database transaction commits with the database transaction "
            "(leave the `with db.transaction()` block, or call its commit())"
        )

    def close(self) -> None:
        self._closed = True


class DatabaseTransaction(CommitsOnExit):
    """``with db.transaction() as tx: ...``: every table read through ``tx.table(name)`` sees
    the database at ``tx.version`` plus this transaction's own changes; a clean exit commits
    them all as one database version, an exception commits nothing."""

    def __init__(self, db: DatabaseHandle) -> None:
        self._db = db
        self.started = Stamp.now()
        self.base, self.pointer = db.log.latest()
        self._tables: dict[str, TableTransaction] = {}
        self._created: dict[str, tuple[str, Manifest]] = {}
        self._dropped: dict[str, str] = {}
        self._renamed: dict[str, tuple[str, str]] = {}
        self._closed = False

    @property
    def version(self) -> int:
        """The database version this transaction reads and builds on."""
        return self.base.version

    def table(self, name: str) -> Transaction:
        """The transaction of table ``name`` (one created in this transaction included)."""
        self._check_open()
        check_table_name(name)
        found = self._tables.get(name)
        if found is not None:
            return found
        if name in self._created:
            table_id, created = self._created[name]
        elif name in self.base.tables and name not in self._dropped and name not in self._renamed:
            table_id, created = self.base.tables[name].id, None
        else:
            raise TableNotFoundError(f"no table {name!r} in database {self._db.uri} at version {self.version}")
        handle = table_of(self._db, name, table_id, (self.base, self.pointer), created)
        found = self._tables[name] = TableTransaction(handle)
        return found

    def create_table(
        self,
        name: str,
        schema: pa.Schema,
        *,
        properties: dict[str, Any] | None = None,
        format_version: int = NEW_TABLE_FORMAT_VERSION,
        **unsupported: Any,
    ) -> Transaction:
        """Create table ``name`` in this commit; returns its transaction (to add rows)."""
        self._check_open()
        check_table_name(name)
        if unsupported:
            raise InvalidArgumentError(
                f"unknown options {sorted(unsupported)} for a database's table; known: "
                "properties, format_version (mirrors are not supported in databases yet)"
            )
        if format_version not in range(NEW_TABLE_FORMAT_VERSION, FORMAT_VERSION + 1):
            raise InvalidArgumentError(
                f"a database's tables use format version {NEW_TABLE_FORMAT_VERSION} or {FORMAT_VERSION}, "
                f"not {format_version!r}"
            )
        taken = (
            name in self._created
            or (name in self.base.tables and name not in self._dropped)
            or name in {new for _, new in self._renamed.values()}
        )
        if taken:
            raise TableExistsError(f"a table {name!r} already exists in database {self._db.uri}")
        self._created[name] = (new_table_id(), first_version(schema, format_version, properties, None, DATABASE_TABLE))
        return self.table(name)

    def drop_table(self, name: str) -> None:
        """Drop table ``name`` in this commit (its files go with gc, after retention)."""
        self._id_to_change(name)
        self._dropped[name] = self.base.tables[name].id

    def rename_table(self, old: str, new: str) -> None:
        """Rename table ``old`` to ``new`` in this commit (metadata only)."""
        self._id_to_change(old)
        check_table_name(new)
        if new in self.base.tables or new in self._created:
            raise TableExistsError(f"a table {new!r} already exists in database {self._db.uri}")
        self._renamed[old] = (self.base.tables[old].id, new)

    def _id_to_change(self, name: str) -> None:
        self._check_open()
        check_table_name(name)
        if name in self._tables or name in self._created:
            raise InvalidArgumentError(
                f"table {name!r} is written in this transaction: drop or rename it in a transaction of its own"
            )
        if name not in self.base.tables or name in self._dropped or name in self._renamed:
            raise TableNotFoundError(f"no table {name!r} in database {self._db.uri} at version {self.version}")

    # --- commit -------------------------------------------------------------------------
    def commit(self) -> CommitInfo:
        self._check_open()
        self._closed = True
        parts = []
        for name, tx in self._tables.items():
            tx.close()
            staging, created = tx.staging, self._created.get(name)
            proposal = None
            if not staging.changes.is_empty():
                staging.changes.operation = staging.operation()
                proposal = TableProposal(staging.handle.log, staging.changes, staging.dvs)
            if proposal is not None or created is not None:
                log = staging.handle.log
                assert isinstance(log, DatabaseTableLog)
                parts.append(TablePart(log, proposal, created[1] if created else None))
        if not parts and not self._dropped and not self._renamed:
            return CommitInfo(self.version, "transaction", self.base.timestamp, None, committed=False)
        change = DatabaseProposal(self._db.log, parts, self._dropped, self._renamed)
        started = self.started  # or earlier, if a table's add_files says its files are older
        for tx in self._tables.values():
            started = started.earliest(tx.staging.started)
        try:
            committed = commit_loop(self._db.log, change, self.base, self.pointer, self._db.commit_options, started)
        except AlreadyCommitted as done:
            return CommitInfo(done.version.version, "transaction", self.base.timestamp, None, committed=False)
        return database_commit_info(committed)

    def abort(self) -> None:
        """Drop everything staged; nothing was committed."""
        if not self._closed:
            self._closed = True
            for tx in self._tables.values():
                tx.abort()


def database_commit_info(db: DatabaseVersion) -> CommitInfo:
    """A database version as ``Database.history()`` lists it: ``parameters["tables"]`` maps
    each table it wrote to what it did; ``created``, ``dropped``, ``renamed`` the catalog."""
    names = db.names
    metrics: dict[str, Any] = {}
    for change in db.changed.values():
        for key, value in change.metrics.items():
            if type(value) is int:
                metrics[key] = metrics.get(key, 0) + value
    parameters = {
        "tables": {names.get(tid, tid): change.operation for tid, change in db.changed.items()},
        "created": list(db.created),
        "dropped": list(db.dropped),
        "renamed": dict(db.renamed),
    }
    return CommitInfo(db.version, db.operation, db.timestamp, db.commit_id, metrics, parameters)

"""A database transaction: table transactions staged on one database version, plus tables
created, dropped and renamed (catalog.py), committed as one database version (or not at all).
Each table's changes enter the commit through the table commit's one entrance
(``commit/table_commit.prepare``), as a table's own commit does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..clock import Stamp
from ..commit import CommitInfo
from ..commit.loop import AlreadyCommitted
from ..commit.loop import commit as commit_loop
from ..commit.table_commit import TableProposal, prepare
from ..errors import InvalidArgumentError
from ..format.database import DatabaseVersion
from ..format.manifest import FORMAT_VERSION, NEW_TABLE_FORMAT_VERSION, Manifest
from ..format.properties import DATABASE_TABLE
from ..operations.create import first_version
from ..transaction import CommitsOnExit, Transaction
from .catalog import StagedCatalog
from .commit import DatabaseProposal, TablePart
from .handle import DatabaseHandle
from .table import check_database_mirrors, table_of
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

    def is_written(self) -> bool:
        return not self.staging.changes.is_empty()

    def proposal(self) -> TableProposal | None:
        """What this table commits, through the one entrance to a table commit (None: nothing
        staged). Raises ``AlreadyCommitted`` for a replayed streaming batch."""
        self.close()
        staging = self.staging
        changes = staging.finished()
        return None if changes is None else prepare(staging.handle.log, staging.base, changes, staging.dvs)


class DatabaseTransaction(CommitsOnExit):
    """``with db.transaction() as tx: ...``: every table read through ``tx.table(name)`` sees
    the database at ``tx.version`` plus this transaction's own changes; a clean exit commits
    them all as one database version, an exception commits nothing."""

    def __init__(self, db: DatabaseHandle) -> None:
        self._db = db
        self.started = Stamp.now()
        self.base, self.pointer = db.log.latest()
        names = {name: ref.id for name, ref in self.base.tables.items()}
        self._catalog = StagedCatalog(self.base.version, names, f"database {db.uri} at version {self.base.version}")
        self._tables: dict[str, TableTransaction] = {}
        """Table id -> its transaction (a table keeps it when this transaction renames it)."""
        self._created: dict[str, Manifest] = {}
        self._closed = False

    @property
    def version(self) -> int:
        """The database version this transaction reads and builds on."""
        return self.base.version

    def table(self, name: str) -> Transaction:
        """The transaction of table ``name`` as this transaction leaves the catalog (a table
        it created or renamed included)."""
        self._check_open()
        table_id = self._catalog.id_of(name)
        found = self._tables.get(table_id)
        if found is None:
            handle = table_of(self._db, name, table_id, (self.base, self.pointer), self._created.get(table_id))
            found = self._tables[table_id] = TableTransaction(handle)
        return found

    def create_table(
        self,
        name: str,
        schema: pa.Schema,
        *,
        properties: dict[str, Any] | None = None,
        format_version: int = NEW_TABLE_FORMAT_VERSION,
        mirrors: Sequence[str] | None = None,
        **unsupported: Any,
    ) -> Transaction:
        """Create table ``name`` in this commit; returns its transaction (to add rows). A name
        this transaction dropped or renamed away is free again. ``mirrors=["iceberg"]`` mirrors
        it from its creation (docs/mirrors.md, "Databases")."""
        self._check_open()
        if unsupported:
            raise InvalidArgumentError(
                f"unknown options {sorted(unsupported)} for a database's table; known: "
                "properties, format_version, mirrors"
            )
        check_database_mirrors(mirrors)
        if format_version not in range(NEW_TABLE_FORMAT_VERSION, FORMAT_VERSION + 1):
            raise InvalidArgumentError(
                f"a database's tables use format version {NEW_TABLE_FORMAT_VERSION} or {FORMAT_VERSION}, "
                f"not {format_version!r}"
            )
        first = first_version(schema, format_version, properties, mirrors, DATABASE_TABLE)
        self._created[self._catalog.create(name)] = first
        return self.table(name)

    def drop_table(self, name: str) -> None:
        """Drop table ``name`` in this commit (its files go with gc, after retention). A table
        this transaction created or wrote to cannot be dropped in it."""
        self._check_open()
        table_id = self._catalog.id_of(name)
        tx = self._tables.get(table_id)
        if table_id in self._created or (tx is not None and tx.is_written()):
            raise InvalidArgumentError(
                f"table {name!r} is created or written in this transaction: drop it in a transaction of its own"
            )
        self._catalog.drop(name)
        if tx is not None:  # only read: nothing to commit, and no more writes through it
            del self._tables[table_id]
            tx.abort()

    def rename_table(self, old: str, new: str) -> None:
        """Rename table ``old`` to ``new`` in this commit (metadata only). Renames apply in
        order: ``a -> tmp``, ``b -> a``, ``tmp -> b`` swaps two tables."""
        self._check_open()
        self._catalog.rename(old, new)

    # --- commit -------------------------------------------------------------------------
    def commit(self) -> CommitInfo:
        self._check_open()
        self._closed = True
        catalog = self._catalog.change()
        parts: list[TablePart] = []
        try:
            for table_id, tx in self._tables.items():
                proposal, created = tx.proposal(), self._created.get(table_id)
                if proposal is not None or created is not None:
                    log = tx.staging.handle.log
                    assert isinstance(log, DatabaseTableLog)
                    parts.append(TablePart(log, proposal, created, self._catalog.base_name(table_id)))
        except AlreadyCommitted as done:  # a replayed streaming batch: the whole commit is a replay
            for part in parts:
                part.discard()
            for tx in self._tables.values():
                tx.abort()
            return CommitInfo(done.version.version, "transaction", self.base.timestamp, None, committed=False)
        if not parts and catalog.is_empty():
            return CommitInfo(self.version, "transaction", self.base.timestamp, None, committed=False)
        change = DatabaseProposal(self._db.log, parts, catalog)
        started = self.started  # or earlier, if a table's add_files says its files are older
        for tx in self._tables.values():
            started = started.earliest(tx.staging.started)
        try:
            committed = commit_loop(self._db.log, change, self.base, self.pointer, self._db.commit_options, started)
        except AlreadyCommitted as done:
            return CommitInfo(done.version.version, "transaction", self.base.timestamp, None, committed=False)
        change.write_mirrors(committed)
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

"""A database's table: a ``Table`` whose version log is the database's view of it
(table_log.py), so every table operation works on it, and whose commits are database
commits. Garbage collection belongs to the database; its mirrors are the table's own
(Iceberg only), written after each database commit that changes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import InvalidArgumentError
from ..format.database import DatabaseVersion, table_prefix
from ..format.manifest import Manifest
from ..format.mirrors import DELTA, requested
from ..format.pointer import Pointer
from ..format.properties import DATABASE_TABLE
from ..storage import ObjectStore
from ..storage.prefixed import PrefixedStore
from ..table import Table
from .handle import DatabaseHandle
from .table_log import DatabaseTableLog

if TYPE_CHECKING:
    from ..commit import CommitInfo


class DatabaseTable(Table):
    property_scope = DATABASE_TABLE

    def __init__(
        self,
        db: DatabaseHandle,
        name: str,
        table_id: str,
        store: ObjectStore,
        pinned: tuple[DatabaseVersion, Pointer] | None = None,
        created: Manifest | None = None,
    ) -> None:
        super().__init__(f"{db.uri.rstrip('/')}/{name}", store, db.write_options, db.commit_options)
        self.log: DatabaseTableLog = DatabaseTableLog(self.store, self.uri, db.log, name, table_id, pinned, created)
        self.database = db
        self.name, self.table_id = name, table_id

    def __repr__(self) -> str:
        return f"DatabaseTable({self.database.uri!r}, {self.name!r})"

    def gc(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise InvalidArgumentError(
            f"table {self.name!r} belongs to database {self.database.uri}: run gc on the "
            "database (Database.gc), which collects every table"
        )

    def set_mirrors(self, mirrors: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> CommitInfo:
        """``Table.set_mirrors``, Iceberg only (``check_database_mirrors``): the mirror lives
        in the table's folder, ``tables/<table_id>/`` of the database."""
        check_database_mirrors(mirrors)
        return super().set_mirrors(mirrors)


def check_database_mirrors(mirrors: Sequence[str] | Mapping[str, Mapping[str, Any]] | None) -> None:
    """A database's table has Iceberg mirrors only (docs/mirrors.md, "Databases")."""
    if mirrors is not None and DELTA in requested(mirrors):
        raise InvalidArgumentError(
            "a database's table has no Delta mirror: a Delta log numbers a table's commits without gaps, "
            "and a database's table changes at some of the database's versions only; the Iceberg mirror "
            'describes it (docs/mirrors.md, "Databases")'
        )


def table_of(
    db: DatabaseHandle,
    name: str,
    table_id: str,
    pinned: tuple[DatabaseVersion, Pointer] | None = None,
    created: Manifest | None = None,
    seen: DatabaseVersion | None = None,
) -> DatabaseTable:
    """The table ``table_id`` of ``db``, named ``name``, reading its own folder of the store
    (``pinned``: to one database version; ``seen``: a version already read, to decode it once)."""
    store = PrefixedStore(db.raw_store, table_prefix(table_id))
    table = DatabaseTable(db, name, table_id, store, pinned, created)
    if seen is not None:
        table.log.at(seen)
    return table

"""The database facade: create or open a database, its tables by name, its transactions,
snapshots and history (docs/databases.md, docs/design/003-databases.md). What only writes,
gc and the change feed need is imported by the method that runs it: opening a database's
table and reading its manifest loads no pyarrow (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..arguments import Duration, Size, check_int, check_time, check_version
from ..errors import DatabaseExistsError, DatabaseNotFoundError, InvalidArgumentError, TableNotFoundError
from ..format.database import DatabaseVersion, check_table_name
from ..format.manifest import NEW_TABLE_FORMAT_VERSION, manifest_key
from ..format.pointer import POINTER_KEY, Pointer
from ..format.properties import DATABASE
from ..storage import ObjectStore
from ..table import handle_args
from .handle import DatabaseHandle
from .table import DatabaseTable, table_of

if TYPE_CHECKING:
    import pyarrow as pa

    from ..commit import CommitInfo
    from ..operations.gc_report import GCReport
    from ..operations.repair import RepairReport
    from .changes import DatabaseChanges
    from .transaction import DatabaseTransaction


class Database(DatabaseHandle):
    """A handle on a database location. Like a ``Table`` it holds no snapshot: every read of
    the latest version starts from the pointer (``snapshot()`` pins one)."""

    def __repr__(self) -> str:
        return f"Database({self.uri!r})"

    # --- state --------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The latest database version (one GET of the pointer)."""
        return self.log.read_pointer().version

    def tables(self, version: int | None = None, as_of: datetime | str | None = None) -> list[str]:
        """The names of the tables at the latest version (or ``version`` / ``as_of``), sorted."""
        return sorted(self._version(version, as_of)[0].tables)

    def history(self, limit: int | None = None) -> list[CommitInfo]:
        """Retained database versions, newest first; ``parameters["tables"]`` of each maps the
        tables it wrote to what it did to them."""
        if limit is not None:
            check_int("limit", limit, minimum=0)
        from .transaction import database_commit_info

        return [database_commit_info(v) for v in self.log.history(limit)]

    def changes(
        self,
        start_version: int | None = None,
        end_version: int | None = None,
        *,
        start_as_of: datetime | str | None = None,
        end_as_of: datetime | str | None = None,
    ) -> DatabaseChanges:
        """Every table's change rows in the commits after ``start_version`` (or the version
        current at ``start_as_of``) up to ``end_version`` / ``end_as_of`` (default: the
        latest), in database-version order, each batch with a ``_table`` column (changes.py,
        docs/changes.md). The database version is the cursor."""
        from ..feed import change_range
        from .changes import DatabaseChanges

        return DatabaseChanges(self, *change_range(self.log, start_version, end_version, start_as_of, end_as_of))

    def table(self, name: str) -> DatabaseTable:
        """Table ``name`` at the latest version: a ``Table`` (every table method works)."""
        check_table_name(name)
        db = self.log.manifest(self.log.read_pointer().version)
        return self._named(db, name)

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> DatabaseSnapshot:
        """One read point over every table: the latest version, ``version``, or the version
        current at ``as_of``."""
        return DatabaseSnapshot(self, *self._version(version, as_of))

    @property
    def properties(self) -> dict[str, Any]:
        """The database's properties at the latest version, set or default (``gc_grace``)."""
        return self.log.manifest(self.log.read_pointer().version).properties.shown(DATABASE)

    def set_properties(self, properties: Mapping[str, Any]) -> CommitInfo:
        """Set database properties in one commit (``{"gc_grace": "6h"}``: how long gc leaves
        unreferenced objects of every table, and what every commit's deadline derives from;
        None restores the default). See docs/databases.md."""
        from .properties import set_database_properties

        return set_database_properties(self, properties)

    # --- writes -------------------------------------------------------------------------
    def transaction(self) -> DatabaseTransaction:
        from .transaction import DatabaseTransaction

        return DatabaseTransaction(self)

    def create_table(
        self,
        name: str,
        schema: pa.Schema,
        *,
        properties: dict[str, Any] | None = None,
        format_version: int = NEW_TABLE_FORMAT_VERSION,
        mirrors: Sequence[str] | None = None,
        **unsupported: Any,
    ) -> DatabaseTable:
        """Create table ``name`` (one commit). ``TableExistsError`` if the name is taken.
        ``mirrors=["iceberg"]``: an Iceberg mirror in the table's folder (docs/mirrors.md)."""
        with self.transaction() as tx:
            tx.create_table(
                name, schema, properties=properties, format_version=format_version, mirrors=mirrors, **unsupported
            )
            info = tx.commit()
        return self._named(self.log.manifest(info.version), name)

    def drop_table(self, name: str) -> CommitInfo:
        """Drop table ``name`` (one commit); its files go with ``gc`` once no retained
        version holds it."""
        with self.transaction() as tx:
            tx.drop_table(name)
            return tx.commit()

    def rename_table(self, old: str, new: str) -> CommitInfo:
        """Rename table ``old`` to ``new`` (one commit, metadata only)."""
        with self.transaction() as tx:
            tx.rename_table(old, new)
            return tx.commit()

    # --- maintenance --------------------------------------------------------------------
    def compact(self, target_file_size: Size | None = None, min_deleted_fraction: float = 0.2) -> dict[str, CommitInfo]:
        """``Table.compact`` of every table of the latest version (one commit per table that
        has work); a table dropped meanwhile is skipped."""
        return self._each_table(lambda table: table.compact(target_file_size, min_deleted_fraction))

    def purge(self) -> dict[str, CommitInfo]:
        """``Table.purge`` of every table of the latest version (one commit per table holding
        a deleted row), by name; then ``gc`` removes what is no longer needed
        (docs/operations.md, "Erasing data physically")."""
        return self._each_table(lambda table: table.purge())

    def _each_table(self, run: Callable[[DatabaseTable], CommitInfo]) -> dict[str, CommitInfo]:
        """``run`` on every table of the latest version, by name; one dropped meanwhile is skipped."""
        db = self.log.manifest(self.log.read_pointer().version)
        done = {}
        for name in sorted(db.tables):
            try:
                done[name] = run(self._named(db, name))
            except TableNotFoundError:
                continue
        return done

    def gc(
        self,
        retain_versions: int | None = None,
        retain_for: Duration | None = timedelta(days=7),
        grace: Duration | None = None,
        dry_run: bool = False,
        force: bool = False,
        now: datetime | None = None,
    ) -> GCReport:
        """Expire old database versions and delete what no retained version needs, over every
        table (database/garbage_collection.py; the rules of ``Table.gc``, with the database's
        ``gc_grace``). ``now``: the store's time (default: read from the store)."""
        from .garbage_collection import collect_database_garbage

        return collect_database_garbage(self, retain_versions, retain_for, grace, dry_run, force, now)

    def repair(self, dry_run: bool = False) -> dict[str, RepairReport]:
        """``Table.repair`` of every table of the latest version (one commit per damaged
        table); each table's report, by name. See docs/operations.md, "Repair"."""
        db = self.log.manifest(self.log.read_pointer().version)
        return {name: self._named(db, name).repair(dry_run) for name in sorted(db.tables)}

    # --- internals ----------------------------------------------------------------------
    def _version(self, version: int | None, as_of: datetime | str | None) -> tuple[DatabaseVersion, Pointer]:
        if version is not None and as_of is not None:
            raise InvalidArgumentError("pass version or as_of, not both")
        if version is not None:
            db = self.log.manifest(check_version(version))
        elif as_of is not None:
            db = self.log.as_of(check_time(as_of))
        else:
            db = self.log.manifest(self.log.read_pointer().version)
        return db, Pointer(db.version, "")

    def _named(self, db: DatabaseVersion, name: str, pinned: bool = False) -> DatabaseTable:
        ref = db.tables.get(name)
        if ref is None:
            raise TableNotFoundError(f"no table {name!r} in database {self.uri} at version {db.version}")
        return table_of(self, name, ref.id, (db, Pointer(db.version, "")) if pinned else None, seen=db)


class DatabaseSnapshot:
    """Every table of a database as of one version (reads only)."""

    def __init__(self, db: Database, version: DatabaseVersion, pointer: Pointer) -> None:
        self._db, self._version, self._pointer = db, version, pointer

    @property
    def version(self) -> int:
        return self._version.version

    def tables(self) -> list[str]:
        return sorted(self._version.tables)

    def table(self, name: str) -> DatabaseTable:
        """Table ``name`` as of this snapshot: its reads see this version."""
        check_table_name(name)
        return self._db._named(self._version, name, pinned=True)


def create_database(
    uri: str | os.PathLike[str],
    *,
    store: ObjectStore | None = None,
    storage_options: dict[str, str] | None = None,
    **options: Any,
) -> Database:
    """Create an empty database (version 0) in an empty location. ``DatabaseExistsError`` if
    a database, a table or anything else is there: ``DB_URI/NAME`` always means the database's
    table, so a table already in the folder would be hidden. ``options``: the write and
    commit options every table of this handle uses."""
    db = Database(*handle_args(uri, store, storage_options, options))
    exists = DatabaseExistsError(f"a database or a table already exists at {db.uri}")
    found = next(iter(db.store.list()), None)  # one LIST request (it stops at the first key)
    if found is not None and found.key not in (POINTER_KEY, manifest_key(0)):
        exists = DatabaseExistsError(
            f"{db.uri} is not empty ({found.key} is there): a database is created in an empty "
            "location, since DB_URI/NAME always means the database's table"
        )
    if found is not None:
        raise exists
    first = DatabaseVersion(
        version=0,
        parent_version=None,
        timestamp_ms=int(time.time() * 1000),  # the wall clock every commit reads
        commit_id=uuid.uuid4().hex,
        operation="create_database",
        tables={},
    )
    from ..operations.create import create_log

    create_log(db.store, db.log, first, exists)
    return db


def open_database(
    uri: str | os.PathLike[str],
    *,
    store: ObjectStore | None = None,
    storage_options: dict[str, str] | None = None,
    **options: Any,
) -> Database:
    """Open an existing database. ``DatabaseNotFoundError`` if there is none (or a table is
    there)."""
    db = Database(*handle_args(uri, store, storage_options, options))
    pointer = db.log.open()
    db.log.manifest(pointer.version)  # fail now if a table is there, not at the first read
    return db


def database_above(
    uri: str | os.PathLike[str],
    storage_options: dict[str, str] | None,
    options: dict[str, Any],
    repair: bool = False,
) -> tuple[Database, str] | None:
    """``uri`` read as ``DB_URI/NAME``: the database at its parent and the table name, or None
    when no database is there. The one place that reads ``DB_URI/NAME`` (``open_table``,
    ``create_table``, ``write_table``, the CLI, Spark and the maintenance job all ask it, before
    anything else). The name is the text after the last ``/`` as it is, never parsed as part of
    a URI, so every name a database accepts (``check_table_name``) opens as ``DB_URI/NAME`` on
    every store: ``#``, ``?``, ``%`` and surrounding blanks included. One GET when nothing is
    there; ``repair`` also finds a database whose creator died before writing its pointer (one
    HEAD more): ``create_table`` looks that hard before it makes a standalone table, an open
    need not (such a database holds no table yet). A store failure propagates."""
    text = os.fspath(uri) if isinstance(uri, str | os.PathLike) else None
    if not isinstance(text, str):
        return None
    parent, _, name = text.rstrip("/").rpartition("/")
    if not parent or not name:
        return None
    try:
        check_table_name(name)
        db = Database(*handle_args(parent, None, storage_options, options))
    except InvalidArgumentError:  # not DB_URI/NAME: the caller's own checks say what is wrong
        return None
    try:
        db.log.manifest(db.log.open(repair).version)
    except DatabaseNotFoundError:
        return None
    return db, name

"""The table facade: create or open a table, write to it, read it, inspect its history.

Each operation's module is imported by the method that runs it, so that opening a table and
reading it loads no writer, maintenance or mirror code, and opening it and reading its
manifest (``manifest-table count``) no pyarrow either (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .arguments import (
    Duration,
    Size,
    check_int,
    check_location,
    check_time,
    check_version,
    did_you_mean,
)
from .commit.loop import CommitOptions
from .data.write import WriteOptions
from .errors import InvalidArgumentError
from .format.mirrors import MIRRORS
from .handle import TableHandle
from .storage import ObjectStore, store_for_uri
from .storage.local import deferred_syncs

if TYPE_CHECKING:
    import pyarrow as pa

    from .commit import CommitInfo
    from .data.scan import Scan
    from .expressions import Expr
    from .feed import ChangeFeed
    from .log.version import Version
    from .metadata_tables import Inspector
    from .operations.gc_report import GCReport
    from .operations.repair import RepairReport
    from .operations.schema_change import SchemaUpdate
    from .transaction import Transaction


class Table(TableHandle):
    """A handle on a table location (handle.py) with the user-facing operations, each of
    which lives in ``operations/``. It holds no snapshot: every read starts from the pointer,
    so a long-lived handle always sees the latest version. (The first read of a handle from
    ``open_table`` uses the pointer ``open_table`` has just read.)"""

    def __repr__(self) -> str:
        return f"Table({self.uri!r})"

    # --- state --------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The latest version (one GET of the pointer)."""
        return self.log.read_pointer().version

    @property
    def schema(self) -> pa.Schema:
        return self._latest().schema

    def manifest(self, version: int | None = None, as_of: datetime | str | None = None) -> Version:
        """The manifest of the latest version, or of ``version``, or of the version current at
        ``as_of``: what a read of them sees (``scan``), its counts included (``live_rows``,
        ``totals``) without pyarrow."""
        if version is not None and as_of is not None:
            raise InvalidArgumentError("pass version or as_of, not both")
        if version is not None:
            return self.log.manifest(check_version(version))
        if as_of is not None:
            return self.log.as_of(check_time(as_of))
        return self._latest()

    def _latest(self) -> Version:
        return self.log.manifest(self.log.read_pointer().version)

    def history(self, limit: int | None = None) -> list[CommitInfo]:
        """Retained versions, newest first."""
        if limit is not None:
            check_int("limit", limit, minimum=0)
        from .commit import CommitInfo

        return [CommitInfo.of(m) for m in self.log.history(limit)]

    @property
    def inspect(self) -> Inspector:
        """The table's metadata as pyarrow Tables: ``inspect.history()``,
        ``inspect.files(version=None)``, ``inspect.segments(version=None)``
        (metadata_tables.py, docs/python-api.md)."""
        from .metadata_tables import Inspector

        return Inspector(self)

    # --- reads --------------------------------------------------------------------------
    def scan(
        self,
        columns: Sequence[str] | None = None,
        where: str | Expr | None = None,
        version: int | None = None,
        as_of: datetime | str | None = None,
    ) -> Scan:
        """Read the latest version, or ``version``, or the version current at ``as_of``."""
        from .data.scan import Scan, Snapshot
        from .expressions import to_expr

        manifest = self.manifest(version, as_of)
        missing = functools.partial(self.log.object_missing, manifest.version)
        snapshot = Snapshot.of(manifest, self.store, missing=missing)
        return Scan(snapshot, self.io, columns, to_expr(where))

    def to_arrow(self) -> pa.Table:
        return self.scan().to_arrow()

    def changes(
        self,
        start_version: int | None = None,
        end_version: int | None = None,
        *,
        start_as_of: datetime | str | None = None,
        end_as_of: datetime | str | None = None,
        columns: Sequence[str] | None = None,
        where: str | Expr | None = None,
    ) -> ChangeFeed:
        """The rows changed by the commits after ``start_version`` (or the version current at
        ``start_as_of``) up to ``end_version`` / ``end_as_of`` (default: the latest), in
        commit order, with ``_change_type`` (insert, delete, update_preimage,
        update_postimage), ``_commit_version`` and ``_commit_timestamp``; derived from the
        log, nothing extra written by writers. The version is the cursor: next time, start
        at ``end_version``. A start that GC removed is ``VersionExpiredError``. See
        docs/changes.md."""
        from .feed import ChangeFeed, change_range

        start, end = change_range(self.log, start_version, end_version, start_as_of, end_as_of)
        return ChangeFeed(self.log, self.io, self.store, start, end, columns, where)

    def to_duckdb(self, con: Any, name: str, *, version: int | None = None, as_of: datetime | str | None = None) -> Any:
        """Register ``name`` on the DuckDB connection ``con`` as a view of the table (or of
        ``version`` / ``as_of``) that DuckDB reads with its own Parquet reader, deleted rows
        removed; returns it as a ``duckdb.DuckDBPyRelation``. See docs/interop.md."""
        from .interop.duckdb import register_view

        return register_view(con, name, self.scan(version=version, as_of=as_of).snapshot, self.io, self.uri)

    def to_polars(self, *, version: int | None = None, as_of: datetime | str | None = None) -> Any:
        """The table (or ``version`` / ``as_of``) as a ``polars.LazyFrame`` that reads only
        the columns a query needs and filters while streaming. See docs/interop.md."""
        from .interop.polars import lazy_frame

        return lazy_frame(self.scan(version=version, as_of=as_of).snapshot, self.io)

    # --- writes -------------------------------------------------------------------------
    def transaction(self) -> Transaction:
        from .transaction import Transaction

        return Transaction(self)

    def append(self, data: Any, schema_mode: str | None = None) -> CommitInfo:
        """Add rows: a pyarrow Table / RecordBatch / RecordBatchReader, any object with
        ``__arrow_c_stream__`` (a Polars DataFrame, a DuckDB relation: streamed), a pandas
        DataFrame or a list of dicts. Nothing to add commits nothing. ``schema_mode="merge"`` adds the
        columns of ``data`` the table lacks (nullable) in the same commit; without it they
        are a ``SchemaMismatchError``."""
        with deferred_syncs(), self.transaction() as tx:
            tx.append(data, schema_mode=schema_mode)
            return tx.commit()

    def update_schema(self) -> SchemaUpdate:
        """``with table.update_schema() as s: s.add_column(...)``: the block's changes commit
        as one version on a clean exit (docs/schema-evolution.md). Format v2 only."""
        from .operations.schema_change import update_schema

        return update_schema(self)

    def delete(self, where: str | Expr) -> CommitInfo:
        """Delete the rows matching ``where`` by writing a tombstone; data is never rewritten."""
        with deferred_syncs(), self.transaction() as tx:
            tx.delete(where)
            return tx.commit()

    def overwrite(
        self,
        data: Any,
        where: str | Expr | None = None,
        schema_mode: str | None = None,
        *,
        require_match: bool = True,
    ) -> CommitInfo:
        """Atomically replace every row (or the rows matching ``where``) with ``data``
        (``schema_mode="merge"``: adding its new columns, as ``append`` does). With ``where``,
        every row of ``data`` must satisfy it, or nothing is written (``InvalidArgumentError``
        naming how many do not): a row outside it would be kept beside the rows it was meant
        to replace. ``require_match=False`` writes such rows all the same."""
        with deferred_syncs(), self.transaction() as tx:
            tx.overwrite(data, where, schema_mode, require_match=require_match)
            return tx.commit()

    def update(
        self,
        set: Mapping[str, Any] | None = None,
        where: str | Expr | None = None,
        *,
        values: Mapping[str, Any] | None = None,
    ) -> CommitInfo:
        """Assign ``set`` (column -> ``col``/arithmetic term, filter, or expression text such
        as ``"price * 1.1"``, where a string literal is quoted: ``"'DE'"``) and ``values``
        (column -> plain Python value, never parsed: ``{"status": "shipped"}``) in the live
        rows matching ``where`` (every row: None). A string in ``set`` that is no expression
        over the table's columns is an ``InvalidFilterError`` pointing at ``values``. The new
        versions go to a new file and the old positions to a tombstone, in one commit with
        ``rows_updated`` in its metrics. See docs/python-api.md."""
        with deferred_syncs(), self.transaction() as tx:
            tx.update(set, where, values=values)
            return tx.commit()

    def upsert(
        self,
        data: Any,
        on: Sequence[str],
        *,
        when_matched: str = "update",
        when_not_matched: str = "insert",
        when_not_matched_by_source: str = "ignore",
        columns: Sequence[str] | None = None,
        schema_mode: str | None = None,
    ) -> CommitInfo:
        """Merge ``data`` by the key columns ``on``. A target row with a source row's key is
        replaced by it (``when_matched``: "update"; "ignore" keeps it, "delete" deletes it); a
        source row without a match is inserted (``when_not_matched``: "insert" or "ignore");
        a target row whose key the source lacks is kept (``when_not_matched_by_source``:
        "ignore") or deleted ("delete": sync the table to a snapshot). ``columns`` names the
        columns a matched update sets; the source may then omit the others (inserted rows get
        nulls there). One commit with ``rows_updated``, ``rows_inserted`` and ``rows_removed``;
        no data file is rewritten. A key twice in ``data`` raises ``DuplicateKeyError``; a
        null key matches nothing. ``schema_mode="merge"`` first adds the source's new columns,
        as ``append`` does. See docs/python-api.md."""
        with deferred_syncs(), self.transaction() as tx:
            tx.upsert(
                data,
                on,
                when_matched=when_matched,
                when_not_matched=when_not_matched,
                when_not_matched_by_source=when_not_matched_by_source,
                columns=columns,
                schema_mode=schema_mode,
            )
            return tx.commit()

    # --- mirrors ------------------------------------------------------------------------
    @property
    def mirrors(self) -> list[str]:
        """The formats the latest version is mirrored to (docs/mirrors.md)."""
        return [name for name in MIRRORS if name in self._latest().mirrors]

    def set_mirrors(self, mirrors: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> CommitInfo:
        """Mirror the table to exactly ``mirrors`` (``["iceberg", "delta"]``; ``[]``: none)
        from now on, in one commit, and write the mirror of that version. A column a mirror
        cannot represent is a ``MirrorTypeError``. ``{"delta": {"checkpoint_interval": 10}}``
        sets a new Delta mirror's checkpoint interval, ``{"iceberg": {"max_snapshots": 20}}``
        how many snapshots a new Iceberg mirror's metadata lists. Format v2 only. See
        docs/mirrors.md."""
        from .operations.set_mirrors import set_mirrors

        return set_mirrors(self, mirrors)

    def sync_mirrors(self) -> dict[str, int | None]:
        """Bring every mirror up to the latest version (idempotent, safe to run concurrently);
        returns each mirror's version."""
        from .mirrors.sync import sync

        return sync(self.log, self._latest())

    # --- properties ---------------------------------------------------------------------
    @property
    def properties(self) -> dict[str, Any]:
        """Every property of the table at the latest version, set or default, as stored
        (``{"gc_grace": "24h", "tail_limit": 32, ...}``; docs/format.md, "Properties")."""
        return self._latest().properties.shown(self.property_scope)

    def set_properties(self, properties: Mapping[str, Any]) -> CommitInfo:
        """Set table properties in one commit (``{"gc_grace": "6h"}``; a value None restores
        the default). An unknown name or a bad value is an ``InvalidArgumentError``; a
        format-v1 table raises ``UpgradeRequiredError`` (run ``upgrade()`` first)."""
        from .operations.set_properties import set_properties

        return set_properties(self, properties)

    # --- maintenance --------------------------------------------------------------------
    def upgrade(self, properties: dict[str, Any] | None = None) -> CommitInfo:
        """Move a format-v1 table to format v2 (docs/format.md) in one commit that lists the
        same files; versions before it stay readable. A v2 table is left as it is."""
        from .operations.upgrade import upgrade

        return upgrade(self, properties)

    def repair(self, dry_run: bool = False) -> RepairReport:
        """Commit a version without the objects the latest version references that are gone
        (a table that reads as ``CorruptTableError`` "references ..., which is missing"), after
        confirming each one missing; the report names every lost file and its rows. A table
        with nothing missing is left as it is. See docs/operations.md, "Repair"."""
        from .operations.repair import repair

        return repair(self, dry_run)

    def compact(self, target_file_size: Size | None = None, min_deleted_fraction: float = 0.2) -> CommitInfo:
        """Merge small files and rewrite files with at least ``min_deleted_fraction`` of their
        rows deleted (0: any deleted row), in one commit that reads the same rows; on a table
        with the ``cluster_by`` property, cluster new data into the table's layout instead of
        merging small files (see docs/operations.md). ``target_file_size`` (bytes, or
        ``"128MiB"``) defaults to the table's. Nothing to do commits nothing."""
        from .operations.compaction import compact

        return compact(self, target_file_size, min_deleted_fraction)

    def purge(self, where: str | Expr | None = None) -> CommitInfo:
        """Delete the rows matching ``where`` (if given) and rewrite every live file that holds
        a deleted row, in one commit (operation ``purge``), so that no live file of the new
        version holds a deleted row; ``gc`` then removes the old files once no retained
        version needs them (docs/operations.md, "Erasing data physically"). The condition is
        not recorded in the table's history. Nothing to do commits nothing."""
        from .operations.purge import purge

        return purge(self, where)

    def gc(
        self,
        retain_versions: int | None = None,
        retain_for: Duration | None = timedelta(days=7),
        grace: Duration | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> GCReport:
        """Expire old versions and delete objects no retained version needs and older than
        the grace period: the table's ``gc_grace`` property (``"24h"``), or a longer
        ``grace``; a shorter one needs ``force`` (see docs/operations.md). Durations are
        timedeltas or strings such as ``"7d"``, ``"36h"``; ages are measured on the store's
        clock. ``dry_run`` only reports what would go."""
        from .operations.garbage_collection import collect_garbage

        return collect_garbage(self, retain_versions, retain_for, grace, dry_run, force)


def options_of(given: dict[str, Any], unknown: dict[str, Any]) -> dict[str, Any]:
    """The handle's options among a call's keywords (``locals()``), None (a default) left out."""
    return {k: v for k, v in given.items() if k in _OPTION_KEYS and v is not None} | unknown


_OPTION_KEYS = frozenset(WriteOptions.__dataclass_fields__) | frozenset(CommitOptions.__dataclass_fields__)


def table_at(
    uri: str | os.PathLike[str],
    store: ObjectStore | None,
    storage_options: dict[str, str] | None,
    options: dict[str, Any],
) -> Table:
    return Table(*handle_args(uri, store, storage_options, options))


def handle_args(
    uri: str | os.PathLike[str],
    store: ObjectStore | None,
    storage_options: dict[str, str] | None,
    options: dict[str, Any],
) -> tuple[str, ObjectStore, WriteOptions, CommitOptions]:
    """A table's (or a database's) location, store and options from what a caller passed."""
    unknown = set(options) - _OPTION_KEYS
    if unknown:
        known = sorted(_OPTION_KEYS)
        raise InvalidArgumentError(
            f"unknown table options {sorted(unknown)}{did_you_mean(unknown, known)}; known: {known}"
        )
    write = WriteOptions(**{k: v for k, v in options.items() if k in WriteOptions.__dataclass_fields__})
    commit = CommitOptions(**{k: v for k, v in options.items() if k in CommitOptions.__dataclass_fields__})
    text = check_location(uri)
    if store is not None and not isinstance(store, ObjectStore):
        raise InvalidArgumentError(f"store must be an ObjectStore, not {type(store).__name__}")
    if storage_options is not None and not (
        isinstance(storage_options, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in storage_options.items())
    ):
        raise InvalidArgumentError(f"storage_options must be a dict of strings, not {storage_options!r}")
    return text, store if store is not None else store_for_uri(text, storage_options), write, commit

"""The table facade: create or open a table, write to it, read it, inspect its history."""

from __future__ import annotations

import os
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

import pyarrow as pa

from .arguments import check_int, check_location, check_time, check_version
from .commit import CommitInfo, CommitOptions
from .errors import InvalidArgumentError, PreconditionFailed, StoreError, TableExistsError
from .expressions import Expr, to_expr
from .changes import Changes
from .commit import commit
from .format.keys import SEGMENT_PREFIX
from .format.manifest import FORMAT_VERSION, Manifest, manifest_key
from .format.root import FileIndex, Properties, Totals
from .format.pointer import POINTER_KEY, encode_pointer
from .format.schema import check_schema
from .listing import VersionFiles
from .log import VersionLog
from .maintenance import GCReport, collect_garbage, compact
from .scan import Scan, Snapshot
from .schema_evolution import SchemaChange, SchemaUpdate
from .storage import FileIO, ObjectStore, store_for_uri
from .storage.retry import RetryingStore
from .tombstones import TOMBSTONE_PREFIX, DeletionVectors
from .transaction import Transaction
from .write import DATA_PREFIX, WriteOptions


def retrying(store: ObjectStore) -> RetryingStore:
    """``store`` as every part of the library uses it: transient failures of the calls that
    are safe to repeat are retried (storage/retry.py), creates of uniquely named objects
    (data files, tombstones, segments) included."""
    return store if isinstance(store, RetryingStore) else RetryingStore(store, (DATA_PREFIX, TOMBSTONE_PREFIX,
                                                                                 SEGMENT_PREFIX))


class Table:
    """A handle on a table location. It holds no snapshot: every read starts from the
    pointer, so a long-lived handle always sees the latest version. (The first read of a
    handle from ``open_table`` uses the pointer ``open_table`` has just read.)"""

    def __init__(self, uri: str, store: ObjectStore, write_options: WriteOptions | None = None,
                 commit_options: CommitOptions | None = None) -> None:
        self.uri = uri
        self.store = retrying(store)
        self.io = FileIO(self.store)
        self.write_options = write_options or WriteOptions()
        self.commit_options = commit_options or CommitOptions()
        self._log = VersionLog(self.store, uri)

    def __repr__(self) -> str:
        return f"Table({self.uri!r})"

    # --- state --------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The latest version (one GET of the pointer)."""
        return self._log.read_pointer().version

    @property
    def schema(self) -> pa.Schema:
        return self._latest().schema

    def manifest(self, version: int | None = None) -> Manifest:
        """The manifest of ``version`` (default: the latest)."""
        return self._latest() if version is None else self._log.manifest(check_version(version))

    def _latest(self) -> Manifest:
        return self._log.manifest(self._log.read_pointer().version)

    def history(self, limit: int | None = None) -> list[CommitInfo]:
        """Retained versions, newest first."""
        if limit is not None:
            check_int("limit", limit, minimum=0)
        return [CommitInfo.of(m) for m in self._log.history(limit)]

    # --- reads --------------------------------------------------------------------------
    def scan(self, columns: Sequence[str] | None = None, where: str | Expr | None = None,
             version: int | None = None, as_of: datetime | str | None = None) -> Scan:
        """Read the latest version, or ``version``, or the version current at ``as_of``."""
        if version is not None and as_of is not None:
            raise InvalidArgumentError("pass version or as_of, not both")
        if version is not None:
            manifest = self._log.manifest(check_version(version))
        elif as_of is not None:
            manifest = self._log.as_of(check_time(as_of))
        else:
            manifest = self._latest()
        dvs = DeletionVectors(self.store)
        snapshot = Snapshot(manifest.version, manifest.schema, VersionFiles(manifest), dvs.of,
                            fields=manifest.fields)
        return Scan(snapshot, self.io, columns, to_expr(where))

    def to_arrow(self) -> pa.Table:
        return self.scan().to_arrow()

    def to_duckdb(self, con: Any, name: str, *, version: int | None = None,
                  as_of: datetime | str | None = None) -> Any:
        """Register ``name`` on the DuckDB connection ``con`` as a view of the table (or of
        ``version`` / ``as_of``) that DuckDB reads with its own Parquet reader, deleted rows
        removed; returns it as a ``duckdb.DuckDBPyRelation``. See docs/interop.md."""
        from .interop.duckdb import register_view

        return register_view(con, name, self.scan(version=version, as_of=as_of).snapshot, self.io)

    def to_polars(self, *, version: int | None = None, as_of: datetime | str | None = None) -> Any:
        """The table (or ``version`` / ``as_of``) as a ``polars.LazyFrame`` that reads only
        the columns a query needs and filters while streaming. See docs/interop.md."""
        from .interop.polars import lazy_frame

        return lazy_frame(self.scan(version=version, as_of=as_of).snapshot, self.io)

    # --- writes -------------------------------------------------------------------------
    def transaction(self) -> Transaction:
        return Transaction(self)

    def append(self, data: Any, schema_mode: str | None = None) -> CommitInfo:
        """Add rows: a pyarrow Table / RecordBatch / RecordBatchReader, a pandas DataFrame or a
        list of dicts. Nothing to add commits nothing. ``schema_mode="merge"`` adds the
        columns of ``data`` the table lacks (nullable) in the same commit; without it they
        are a ``SchemaMismatchError``."""
        with self.transaction() as tx:
            tx.append(data, schema_mode=schema_mode)
            return tx.commit()

    def update_schema(self) -> SchemaUpdate:
        """``with table.update_schema() as s: s.add_column(...)``: the block's changes commit
        as one version on a clean exit (docs/schema-evolution.md). Format v2 only."""
        base, pointer = self._log.latest()
        started = time.monotonic()

        def commit_change(change: SchemaChange) -> CommitInfo:
            changes = Changes(operation="update_schema", schema=change,
                              parameters={"schema_changes": list(change.steps)})
            return commit(self._log, base, pointer, changes, self.commit_options, started)
        return SchemaUpdate(base, commit_change)

    def delete(self, where: str | Expr) -> CommitInfo:
        """Delete the rows matching ``where`` by writing a tombstone; data is never rewritten."""
        with self.transaction() as tx:
            tx.delete(where)
            return tx.commit()

    def overwrite(self, data: Any, where: str | Expr | None = None) -> CommitInfo:
        """Atomically replace every row (or the rows matching ``where``) with ``data``."""
        with self.transaction() as tx:
            tx.overwrite(data, where)
            return tx.commit()

    def update(self, set: Mapping[str, Any], where: str | Expr | None = None) -> CommitInfo:
        """Assign ``set`` (column -> literal, ``col``/arithmetic term, filter, or expression
        text such as ``"price * 1.1"``; quote string literals: ``"'DE'"``) in the live rows
        matching ``where`` (every row: None). The new versions go to a new file and the old
        positions to a tombstone, in one commit with ``rows_updated`` in its metrics. See
        docs/python-api.md."""
        with self.transaction() as tx:
            tx.update(set, where)
            return tx.commit()

    def upsert(self, data: Any, on: list[str], *, when_matched: str = "update",
               when_not_matched: str = "insert") -> CommitInfo:
        """Merge ``data`` (rows of the table's schema) by the key columns ``on``: a target row
        with a source row's key is replaced by it (``when_matched="ignore"``: kept), a source
        row without a match is inserted (``when_not_matched="ignore"``: dropped). Reads only
        the key columns of files whose stats may hold the keys; one commit with
        ``rows_updated`` and ``rows_inserted``. A key twice in ``data`` raises
        ``DuplicateKeyError``; a null key matches nothing. See docs/python-api.md."""
        with self.transaction() as tx:
            tx.upsert(data, on, when_matched=when_matched, when_not_matched=when_not_matched)
            return tx.commit()

    # --- maintenance --------------------------------------------------------------------
    def upgrade(self, properties: dict[str, int] | None = None) -> CommitInfo:
        """Move a format-v1 table to format v2 (docs/format.md) in one commit that lists the
        same files; versions before it stay readable. A v2 table is left as it is."""
        props = Properties.of(properties)
        base, pointer = self._log.latest()
        if base.index is not None:
            return CommitInfo(base.version, "upgrade", base.timestamp, None, {}, committed=False)
        changes = Changes(operation="upgrade", upgrade=props, parameters={"format_version": FORMAT_VERSION})
        return commit(self._log, base, pointer, changes, self.commit_options, time.monotonic())

    def compact(self, target_file_size: int | None = None, min_deleted_fraction: float = 0.2) -> CommitInfo:
        """Merge small files and rewrite files with at least ``min_deleted_fraction`` of their
        rows deleted, in one commit that reads the same rows (see docs/operations.md).
        ``target_file_size`` defaults to the table's. Nothing to do commits nothing."""
        return compact(self, target_file_size, min_deleted_fraction)

    def gc(self, retain_versions: int | None = None, retain_for: timedelta | None = timedelta(days=7),
           grace: timedelta = timedelta(hours=24), dry_run: bool = False, force: bool = False) -> GCReport:
        """Expire old versions and delete objects no retained version needs and older than
        ``grace`` (see docs/operations.md). ``dry_run`` only reports what would go."""
        return collect_garbage(self, retain_versions, retain_for, grace, dry_run, force)


def create_table(uri: str | os.PathLike[str], schema: pa.Schema, *, store: ObjectStore | None = None,
                 storage_options: dict[str, str] | None = None, format_version: int = FORMAT_VERSION,
                 properties: dict[str, int] | None = None, **options: Any) -> Table:
    """Create an empty table (version 0). Raises ``TableExistsError`` if one is there.
    ``properties`` tune format v2's metadata layout (``format.root.Properties``);
    ``format_version=1`` makes a table that older releases can read."""
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    check_schema(schema)
    if type(format_version) is not int or format_version not in (1, FORMAT_VERSION):
        raise InvalidArgumentError(f"format_version must be 1 or {FORMAT_VERSION}, not {format_version!r}")
    if format_version == 1 and properties is not None:
        raise InvalidArgumentError("properties apply to format version 2 tables only")
    props = Properties.of(properties)
    table = _table(uri, store, storage_options, options)
    ids = tuple(range(1, len(schema) + 1))
    index = FileIndex(ids, len(ids), props, Totals(0, 0, 0, 0)) if format_version > 1 else None
    empty = Manifest(version=0, parent_version=None, timestamp_ms=int(time.time() * 1000),
                     commit_id=uuid.uuid4().hex, operation="create", schema=schema, tail=(),
                     format_version=format_version, index=index, reader=table._log.segments)
    exists = TableExistsError(f"a table already exists at {table.uri}")
    # The pointer first: once GC has expired version 0 of a table, only the pointer shows it.
    if table.store.head(POINTER_KEY) is not None:
        raise exists
    _create_first_version(table, empty, exists)
    try:
        table.store.put_if_absent(POINTER_KEY, encode_pointer(0))
    except (PreconditionFailed, StoreError):
        pass  # it exists (a reader repaired it first) or will be repaired by the next reader
    return table


def _create_first_version(table: Table, empty: Manifest, exists: TableExistsError) -> None:
    """Create manifest v0. A failed create may have landed (a lost response): read it back,
    ours if it holds our commit id; retry when nothing landed (as the commit loop does)."""
    policy = table.store.policy
    for attempt in range(policy.attempts):
        try:
            table.store.put_if_absent(manifest_key(0), empty.to_json())
            return
        except PreconditionFailed:
            raise exists from None
        except StoreError:
            found = table._log.find(0)
            if found is not None:
                if found.commit_id != empty.commit_id:
                    raise exists from None
                return
            if attempt + 1 == policy.attempts:
                raise
            policy.wait(attempt)


def open_table(uri: str | os.PathLike[str], *, store: ObjectStore | None = None,
               storage_options: dict[str, str] | None = None, **options: Any) -> Table:
    """Open an existing table. Raises ``TableNotFoundError`` if there is none."""
    table = _table(uri, store, storage_options, options)
    table._log.open()  # fail now, not at the first read
    return table


def _table(uri: str | os.PathLike[str], store: ObjectStore | None, storage_options: dict[str, str] | None,
           options: dict[str, Any]) -> Table:
    write_keys = set(WriteOptions.__dataclass_fields__)
    commit_keys = set(CommitOptions.__dataclass_fields__)
    unknown = set(options) - write_keys - commit_keys
    if unknown:
        raise InvalidArgumentError(f"unknown table options {sorted(unknown)}; known: "
                                   f"{sorted(write_keys | commit_keys)}")
    write = WriteOptions(**{k: v for k, v in options.items() if k in write_keys})
    commit = CommitOptions(**{k: v for k, v in options.items() if k in commit_keys})
    text = check_location(uri)
    if store is not None and not isinstance(store, ObjectStore):
        raise InvalidArgumentError(f"store must be an ObjectStore, not {type(store).__name__}")
    if storage_options is not None and not (isinstance(storage_options, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in storage_options.items())):
        raise InvalidArgumentError(f"storage_options must be a dict of strings, not {storage_options!r}")
    return Table(text, store if store is not None else store_for_uri(text, storage_options), write, commit)


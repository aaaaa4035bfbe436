"""A table by its location, the package's entry points: ``create_table``, ``open_table`` and
``write_table`` (create from data). Each first asks whether the location is a database's table,
``DB_URI/TABLE`` (``database_above``, docs/databases.md): that is always the database's table,
created in the database, never a standalone table in the database's folder. They sit above
``table.py`` and ``database/``, since a location may name either; what only creating or
writing needs is imported by the function that does it (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Never

from .arguments import Seconds, Size, check_choice, check_schema_mode
from .database.database import database_above
from .errors import SchemaMismatchError, StoreError, TableExistsError, TableNotFoundError
from .format.manifest import DATABASE_HINT, NEW_TABLE_FORMAT_VERSION, Manifest
from .lazy import lazy
from .storage import ObjectStore
from .table import Table, options_of, table_at

if TYPE_CHECKING:
    import pyarrow as pa

    from .commit import CommitInfo
else:
    pa = lazy("pyarrow")


def create_table(
    uri: str | os.PathLike[str],
    schema: pa.Schema,
    *,
    store: ObjectStore | None = None,
    storage_options: dict[str, str] | None = None,
    format_version: int = NEW_TABLE_FORMAT_VERSION,
    properties: dict[str, Any] | None = None,
    mirrors: Sequence[str] | None = None,
    target_file_size: Size | None = None,
    row_group_size: Size | None = None,
    compression: str | None = None,
    deadline: Seconds | None = None,
    max_attempts: int | None = None,
    free_retries: int | None = None,
    backoff_base: Seconds | None = None,
    backoff_cap: Seconds | None = None,
    recheck_after: Seconds | None = None,
    **unknown: Never,
) -> Table:
    """Create an empty table (version 0). Raises ``TableExistsError`` if one is there.
    ``properties`` (docs/format.md, "Properties"): ``gc_grace`` (``"24h"``) and format v2's
    layout limits; one that release 0.3.0 does not know makes it format version 3.
    ``format_version=1`` makes a table that older releases can read. ``mirrors``
    (``["iceberg", "delta"]``) also describes every version in those formats (docs/mirrors.md).
    The other keywords are the handle's options, as for ``open_table``. ``DB_URI/TABLE``
    creates the table in that database (``Database.create_table``)."""
    from .operations.create import create, first_version

    empty = first_version(schema, format_version, properties, mirrors)
    options = options_of(locals(), unknown)
    found = None if store is not None else database_above(uri, storage_options, options, repair=True)
    if found is not None:
        db, name = found
        extra = {"mirrors": mirrors} if mirrors else {}
        return db.create_table(name, schema, properties=properties, format_version=format_version, **extra)
    table = table_at(uri, store, storage_options, options)
    create(table, empty)
    return table


def open_table(
    uri: str | os.PathLike[str],
    *,
    store: ObjectStore | None = None,
    storage_options: dict[str, str] | None = None,
    target_file_size: Size | None = None,
    row_group_size: Size | None = None,
    compression: str | None = None,
    deadline: Seconds | None = None,
    max_attempts: int | None = None,
    free_retries: int | None = None,
    backoff_base: Seconds | None = None,
    backoff_cap: Seconds | None = None,
    recheck_after: Seconds | None = None,
    **unknown: Never,
) -> Table:
    """Open an existing table. Raises ``TableNotFoundError`` if there is none. A table of a
    database is opened as ``<database uri>/<table name>`` (docs/databases.md). The options
    (None: the default) are those of ``data.write.WriteOptions`` (``target_file_size`` and
    ``row_group_size`` in bytes or as ``"128MiB"``; ``compression``, default ``zstd``) and of
    ``commit.CommitOptions`` (``deadline``, ``recheck_after``, ``backoff_*`` in seconds, as a
    ``timedelta`` or as ``"30s"``; ``max_attempts``, ``free_retries``); see docs/writing.md.
    A database's location is ``TableNotFoundError`` naming ``open_database``."""
    options = options_of(locals(), unknown)
    unseen: StoreError | None = None
    try:
        found = None if store is not None else database_above(uri, storage_options, options)
    except StoreError as exc:  # the parent cannot be read (a role without s3:ListBucket gets
        found, unseen = None, exc  # 403 for a missing key): no database this caller could use
    if found is not None:
        db, name = found
        return db.table(name)
    table = table_at(uri, store, storage_options, options)
    try:
        pointer = table.log.open()  # fail now, not at the first read (which uses this pointer)
    except TableNotFoundError:
        if unseen is not None:
            raise unseen from None
        raise
    try:
        table.log.manifest(pointer.version)  # cached for the first read
    except TableNotFoundError:  # a database's version (format/manifest.py)
        raise TableNotFoundError(f"{table.uri} is a database, not a table: {DATABASE_HINT}") from None
    return table


WRITE_MODES = ("error", "append", "overwrite")
_CREATION_OPTIONS = ("format_version", "properties", "mirrors")


def write_table(
    uri: str | os.PathLike[str],
    data: Any,
    *,
    mode: str = "error",
    schema_mode: str | None = None,
    storage_options: dict[str, str] | None = None,
    **table_options: Any,
) -> Table:
    """Write ``data`` (anything ``append`` takes) to the table at ``uri``, creating it from the
    data's schema when there is none (version 0, then the rows as version 1; a write that
    fails leaves no table: ``create_with_rows``). ``mode``: ``"error"`` (a table already
    there is ``TableExistsError``, nothing written), ``"append"`` or ``"overwrite"`` (replace
    every row). ``schema_mode="merge"`` adds the data's new columns. ``table_options`` are
    ``create_table``'s; ``format_version``, ``properties`` and ``mirrors`` apply only when
    the table is created. Returns the table."""
    from .data.ingest import arrow_input
    from .operations.schema_change import new_columns

    check_choice("mode", mode, WRITE_MODES)
    check_schema_mode(schema_mode)
    data = arrow_input(data)  # one stream for the schema and the rows
    creation = {k: table_options.pop(k) for k in _CREATION_OPTIONS if k in table_options}
    try:
        table = open_table(uri, storage_options=storage_options, **table_options)
    except TableNotFoundError:
        schema = pa.schema(new_columns(data, pa.schema([])))
        try:
            return create_from_rows(
                uri, schema, data, storage_options, options_of(table_options, {}), creation, mode == "overwrite"
            )[0]
        except TableExistsError:  # another writer created a database's table meanwhile
            if mode == "error":
                raise
            table = open_table(uri, storage_options=storage_options, **table_options)
    if mode == "error":
        raise TableExistsError(
            f"a table already exists at {table.uri} (mode='error'; pass mode='append' "
            "or mode='overwrite' to write to it)"
        )
    if mode == "overwrite":
        table.overwrite(data, schema_mode=schema_mode)
    else:
        table.append(data, schema_mode=schema_mode)
    return table


def create_from_rows(
    uri: str | os.PathLike[str],
    schema: pa.Schema,
    data: Any,
    storage_options: dict[str, str] | None = None,
    options: dict[str, Any] | None = None,
    creation: dict[str, Any] | None = None,
    replace: bool = False,
) -> tuple[Table, CommitInfo]:
    """The table at ``uri`` created holding ``data``, or nothing at all: a table of its own
    through ``create_with_rows``, a database's (``DB_URI/TABLE``) in one database commit.
    ``creation``: ``create_table``'s ``format_version``, ``properties`` and ``mirrors``;
    ``replace``: see ``create_with_rows``."""
    creation = creation or {}
    found = database_above(uri, storage_options, options or {}, repair=True)
    if found is not None:
        db, name = found
        with db.transaction() as tx:
            tx.create_table(name, schema, **creation).append(data)
            info = tx.commit()
        return db.table(name), info
    table = table_at(uri, None, storage_options, options or {})
    return table, create_with_rows(table, _first(schema, **creation), data, replace)


def _first(
    schema: pa.Schema,
    format_version: int = NEW_TABLE_FORMAT_VERSION,
    properties: dict[str, Any] | None = None,
    mirrors: Sequence[str] | None = None,
) -> Manifest:
    from .operations.create import first_version

    return first_version(schema, format_version, properties, mirrors)


def create_with_rows(table: Table, empty: Manifest, data: Any, replace: bool = False) -> CommitInfo:
    """Create the table ``empty`` describes (``first_version``) at ``table``'s location, holding
    ``data``, or nothing at all. The rows are written first, into files no version references;
    only then is version 0 created and the files committed as version 1. So bad data (a value
    that does not fit, a stream that fails midway) leaves no table behind, only removed files,
    as Spark's writes do (spark/job_commit.py). A table created meanwhile by another writer
    takes the files if it has the same columns (``replace``: in place of its rows), else
    ``SchemaMismatchError`` and nothing is written. The commit's deadline counts from before
    the rows were written (a table created meanwhile may run GC on them: deadline.py)."""
    from .clock import utc_now
    from .format.properties import BLOOM_FILTER_COLUMNS, SORT_BY
    from .log.version import Version
    from .operations.append import write_rows
    from .operations.create import create

    fields = Version.of(empty, table.log.segments).fields
    sort_by: tuple[str, ...] = empty.properties[SORT_BY]
    blooms: tuple[str, ...] = empty.properties[BLOOM_FILTER_COLUMNS]
    began = utc_now()
    files = write_rows(table.io, data, fields, table.write_options, sort_by, blooms)
    try:
        try:
            create(table, empty)
        except TableExistsError:
            if table.manifest().fields != fields:
                raise SchemaMismatchError(
                    f"a table with other columns was created at {table.uri} meanwhile; nothing was written"
                ) from None
        with table.transaction() as tx:
            if replace:
                tx.overwrite(empty.schema.empty_table())
            tx.add_files(files, written_since=began)
            return tx.commit()
    except BaseException:
        table.store.delete_unreferenced(f.path for f in files)
        raise

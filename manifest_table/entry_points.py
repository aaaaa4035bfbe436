"""A table by its location, the package's entry points: ``create_table``, ``open_table`` and
``write_table`` (create from data). Each first asks whether the location is a database's table,
``DB_URI/TABLE`` (``database_above``, docs/databases.md): that is always the database's table,
created in the database, never a standalone table in the database's folder. They sit above
``table.py`` and ``database/``, since a location may name either."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Never

import pyarrow as pa

from .arguments import Seconds, Size, check_choice
from .data.ingest import arrow_input
from .database.database import database_above
from .errors import StoreError, TableExistsError, TableNotFoundError
from .format.manifest import FORMAT_VERSION
from .operations.create import create, first_version
from .operations.schema_change import new_columns
from .storage import ObjectStore
from .table import Table, options_of, table_at


def create_table(
    uri: str | os.PathLike[str],
    schema: pa.Schema,
    *,
    store: ObjectStore | None = None,
    storage_options: dict[str, str] | None = None,
    format_version: int = FORMAT_VERSION,
    properties: dict[str, int] | None = None,
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
    ``properties`` tune format v2's metadata layout (``format.root.Properties``);
    ``format_version=1`` makes a table that older releases can read. ``mirrors``
    (``["iceberg", "delta"]``) also describes every version in those formats (docs/mirrors.md).
    The other keywords are the handle's options, as for ``open_table``. ``DB_URI/TABLE``
    creates the table in that database (``Database.create_table``)."""
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
        raise TableNotFoundError(
            f"{table.uri} is a database, not a table: open it with open_database, and its "
            f"tables as {table.uri.rstrip('/')}/<table name>"
        ) from None
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
    data's schema when there is none (version 0, then the rows as version 1). ``mode``:
    ``"error"`` (a table already there is ``TableExistsError``, nothing written), ``"append"``
    or ``"overwrite"`` (replace every row). ``schema_mode="merge"`` adds the data's new
    columns. ``table_options`` are ``create_table``'s; ``format_version``, ``properties`` and
    ``mirrors`` apply only when the table is created. Returns the table."""
    check_choice("mode", mode, WRITE_MODES)
    data = arrow_input(data)  # one stream for the schema and the rows
    creation = {k: table_options.pop(k) for k in _CREATION_OPTIONS if k in table_options}
    try:
        table = open_table(uri, storage_options=storage_options, **table_options)
        if mode == "error":
            raise TableExistsError(
                f"a table already exists at {table.uri} (mode='error'; pass mode='append' "
                "or mode='overwrite' to write to it)"
            )
    except TableNotFoundError:
        schema = pa.schema(new_columns(data, pa.schema([])))
        try:
            table = create_table(uri, schema, storage_options=storage_options, **creation, **table_options)
        except TableExistsError:  # another writer created it meanwhile
            if mode == "error":
                raise
            table = open_table(uri, storage_options=storage_options, **table_options)
    if mode == "overwrite":
        table.overwrite(data, schema_mode=schema_mode)
    else:
        table.append(data, schema_mode=schema_mode)
    return table

"""A table by its location, the package's entry points: ``create_table``, ``open_table`` (also
a database's table, ``DB_URI/TABLE``: docs/databases.md) and ``write_table`` (create from data).
They sit above ``table.py`` and ``database/``, since opening may find either."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Never

import pyarrow as pa

from .arguments import Seconds, Size, check_choice
from .data.ingest import arrow_input
from .database.database import table_of_database
from .errors import TableExistsError, TableNotFoundError
from .format.manifest import NEW_TABLE_FORMAT_VERSION
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
    The other keywords are the handle's options, as for ``open_table``."""
    empty = first_version(schema, format_version, properties, mirrors)
    table = table_at(uri, store, storage_options, options_of(locals(), unknown))
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
    ``timedelta`` or as ``"30s"``; ``max_attempts``, ``free_retries``); see docs/writing.md."""
    options = options_of(locals(), unknown)
    table = table_at(uri, store, storage_options, options)
    try:
        table.log.open()  # fail now, not at the first read
    except TableNotFoundError:
        parent, _, name = table.uri.rstrip("/").rpartition("/")
        if store is not None or not parent or not name:
            raise
        found = table_of_database(parent, name, storage_options, options)
        if found is None:
            raise
        return found
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

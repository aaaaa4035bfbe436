"""Append: rows written into new data files and staged; nothing else of the table changes.

1. ``schema_mode="merge"`` first stages adding the columns of the data that the table lacks
   (nullable, typed by their values: ``schema_change.new_columns``), in the same commit.
2. The rows are conformed to the schema (data/ingest.py), sorted by the ``sort_by`` property's
   columns if it is set (data/sorted_batches.py; not an update's or upsert's new versions,
   whose order pairs them with the rows they replace), and written as Parquet files rolled at the
   target size (data/write.py), each carrying the columns' field ids.
3. The files are staged. An append rebases onto every concurrent commit but a schema change
   its files would not read the same under (commit/conflicts.py).
``add_files`` stages files someone else wrote into ``data/`` (Spark tasks) instead."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..arguments import check_schema_mode
from ..clock import Stamp
from ..data.ingest import arrow_input, batches_of
from ..data.sorted_batches import sorted_batches
from ..data.write import WriteOptions, write_data_files
from ..errors import InvalidArgumentError, ManifestTableError
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..format.manifest import check_new_file
from ..format.properties import BLOOM_FILTER_COLUMNS, SORT_BY
from ..storage import FileIO
from .schema_change import SchemaUpdate, new_columns
from .staging import Staging


def append(staging: Staging, data: Any, schema_mode: str | None = None, *, in_order: bool = False) -> int:
    """Stage ``data`` (see ``Table.append``); returns the number of rows staged. ``in_order``:
    keep the rows' order whatever ``sort_by`` says (an update's or upsert's new versions,
    which ``parameters.replaced`` pairs with the rows they replace by their order)."""
    data = arrow_input(data)  # one stream for the schema merge and the rows
    apply_schema_mode(staging, data, schema_mode)
    properties = staging.base.properties
    sort_by: tuple[str, ...] = () if in_order else properties[SORT_BY]
    blooms: tuple[str, ...] = properties[BLOOM_FILTER_COLUMNS]
    files = write_rows(
        staging.handle.io,
        data,
        staging.fields(),
        staging.handle.write_options,
        sort_by,
        bloom_filter_columns=blooms,
    )
    staging.stage_files(files)
    return sum(f.rows for f in files)


def write_rows(
    io: FileIO,
    data: Any,
    fields: FieldIds,
    options: WriteOptions,
    sort_by: Sequence[str] = (),
    bloom_filter_columns: Sequence[str] = (),
) -> list[DataFile]:
    """Step 2: ``data`` conformed to ``fields.schema``, sorted by ``sort_by`` (the table's
    property), and written as new data files carrying the columns' field ids and physical
    names, and bloom filters of ``bloom_filter_columns`` (the property), leaving nothing
    behind if it fails."""
    batches = batches_of(data, fields.schema)
    return write_data_files(
        io,
        sorted_batches(batches, fields.schema, sort_by) if sort_by else batches,
        fields.schema,
        options,
        field_ids=fields.ids,
        physical_names=fields.physical_names,
        bloom_filter_columns=bloom_filter_columns,
    )


def add_files(staging: Staging, files: Sequence[DataFile], written_since: datetime | None = None) -> None:
    """Stage data files already written into the table's ``data/``; only these are committed.
    ``written_since``: when the first of them was written, if before the transaction began
    (the commit's deadline counts from the earlier: deadline.py)."""
    if isinstance(files, str | bytes) or not isinstance(files, Sequence):
        raise InvalidArgumentError(f"files must be a list of DataFile, not {type(files).__name__}")
    if written_since is not None and not (isinstance(written_since, datetime) and written_since.tzinfo):
        raise InvalidArgumentError(f"written_since must be a timezone-aware datetime, not {written_since!r}")
    for f in files:
        check_new_file(f)
    clash = sorted(staging.files_named([f.path for f in files]))
    if clash:
        raise ManifestTableError(f"files are already part of the table: {clash[:5]}")
    staging.stage_files(files)
    if written_since is not None:
        staging.started = staging.started.earliest(Stamp.at(written_since))


def apply_schema_mode(staging: Staging, data: Any, schema_mode: str | None) -> None:
    """Step 1 for any write of ``data`` (an append, an upsert): with ``schema_mode="merge"``,
    stage adding the columns of ``data`` the table lacks."""
    if check_schema_mode(schema_mode) != "merge":
        return
    new = new_columns(data, staging.fields().schema)
    if not new:
        return
    update = SchemaUpdate(staging.base, staged=staging.changes.schema)
    for f in new:
        update.add_column(f.name, f.type)
    change = update.change()
    staging.changes.schema = change
    staging.changes.parameters["schema_changes"] = list(change.steps) if change else []
    staging.record("update_schema")

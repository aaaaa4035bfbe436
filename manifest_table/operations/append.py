"""Append: rows written into new data files and staged; nothing else of the table changes.

1. ``schema_mode="merge"`` first stages adding the columns of the data that the table lacks
   (nullable, typed by their values: ``schema_change.new_columns``), in the same commit.
2. The rows are conformed to the schema (data/ingest.py) and written as Parquet files rolled
   at the target size (data/write.py), each carrying the columns' field ids.
3. The files are staged. An append rebases onto every concurrent commit but a schema change
   its files would not read the same under (commit/conflicts.py).
``add_files`` stages files someone else wrote into ``data/`` (Spark tasks) instead."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..clock import Stamp
from ..data.ingest import arrow_input, batches_of
from ..data.write import write_data_files
from ..errors import InvalidArgumentError, ManifestTableError
from ..format.entries import DataFile
from ..format.manifest import check_new_file
from .schema_change import SchemaUpdate, new_columns
from .staging import Staging


def append(staging: Staging, data: Any, schema_mode: str | None = None) -> int:
    """Stage ``data`` (see ``Table.append``); returns the number of rows staged."""
    data = arrow_input(data)  # one stream for the schema merge and the rows
    if schema_mode == "merge":
        _merge_schema(staging, data)
    elif schema_mode is not None:
        raise InvalidArgumentError(f"schema_mode must be None or 'merge', not {schema_mode!r}")
    fields = staging.fields()
    files = write_data_files(
        staging.handle.io,
        batches_of(data, fields.schema),
        fields.schema,
        staging.handle.write_options,
        field_ids=fields.ids,
        physical_names=fields.physical_names,
    )
    staging.stage_files(files)
    return sum(f.rows for f in files)


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


def _merge_schema(staging: Staging, data: Any) -> None:
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

"""A manifest entry for a Parquet file that Spark wrote: row count, size and column stats
from the file's footer, under the rules of ``format/stats.py``.

The footer holds each row group's min / max / null count as Spark's Parquet writer
(parquet-mr) computed them. They are taken only where they mean what ``table_stats`` would
have computed from the rows: a float column holding NaN gets no max and keeps the min of its
numbers (parquet-mr orders NaN above every number, so its max is NaN exactly when a NaN is
present, as the SQL semantics of docs/expressions.md have it), a string min or
max longer than ``MAX_STRING_STAT`` is dropped rather than trusted, types without stats
(binary) get none, and a row group without min/max leaves the file's unknown."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..data.write import MAX_FILE_ROWS
from ..errors import CorruptTableError, SchemaMismatchError
from ..expressions import ColumnStats
from ..format.manifest import DataFile
from ..format.stats import MAX_STRING_STAT, has_stats, leaf_columns, merge_stats
from ..storage import FileIO


def data_file_from_footer(
    io: FileIO, key: str, schema: pa.Schema, as_key: str | None = None, physical_names: Sequence[str] | None = None
) -> DataFile:
    """The manifest entry of the Parquet file at ``key`` (recorded under ``as_key``, its
    final name, when given). The file must have the table's columns, under their
    ``physical_names`` (default: the schema's names; ``_check_columns``)."""
    with io.open(key) as source:
        size = source.size()
        meta = pq.ParquetFile(source).metadata
    _check_columns(key, meta, schema, physical_names or schema.names)
    if meta.num_rows > MAX_FILE_ROWS:
        raise CorruptTableError(f"{key} has {meta.num_rows} rows; a data file holds at most {MAX_FILE_ROWS}")
    stats = {}
    leaves = leaf_columns(schema)  # nested columns: unknown (the footer counts nulls per leaf)
    for field in schema:
        if field.name not in leaves:
            continue
        column: ColumnStats | None = None
        for group in range(meta.num_row_groups):
            piece = _row_group_stats(meta.row_group(group), leaves[field.name], field.type)
            if piece is None:
                column = None
                break
            column = piece if column is None else merge_stats(column, piece)
        if column is not None:
            stats[field.name] = column
    return DataFile(as_key or key, meta.num_rows, size, stats)


def _check_columns(key: str, meta: pq.FileMetaData, schema: pa.Schema, names: Sequence[str]) -> None:
    """The file's columns must be the table's, in order, of the same types. Nullability is
    the table's to decide: a NOT NULL file column fits a nullable table column (Spark's
    optimiser makes a column NOT NULL when it folds it to a literal, whatever the
    DataFrame's schema said), and a nullable one fits a NOT NULL column if its footer
    counts no nulls."""
    found = meta.schema.to_arrow_schema()
    if found.names != list(names):
        raise SchemaMismatchError(f"{key} has columns {found.names}, the table's files have {list(names)}")
    problems = [
        f"column {t.name!r} is {f.type}, the table has {t.type}"
        for f, t in zip(found, schema)
        if not f.type.equals(t.type)
    ]
    leaves = leaf_columns(schema)
    problems += [
        f"column {t.name!r} is not nullable but holds nulls"
        for f, t in zip(found, schema)
        if f.nullable and not t.nullable and not _no_nulls(meta, leaves.get(t.name))
    ]
    if problems:
        raise SchemaMismatchError(f"{key} does not fit the table: {'; '.join(problems)}")


def _no_nulls(meta: pq.FileMetaData, index: int | None) -> bool:
    """Whether the footer says leaf column ``index`` holds no null (unknown counts as a null,
    and so does a nested column: its leaves' counts do not tell its own nulls)."""
    if index is None:
        return False
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(index).statistics
        if stats is None or not stats.has_null_count or stats.null_count:
            return False
    return True


def _row_group_stats(group: pq.RowGroupMetaData, index: int, dtype: pa.DataType) -> ColumnStats | None:
    """One column's stats in one row group, or None when the footer lacks its null count."""
    footer = group.column(index).statistics
    if footer is None or not footer.has_null_count:
        return None
    lo = hi = None
    if has_stats(dtype) and footer.has_min_max:
        lo, hi = footer.min, footer.max
        if isinstance(hi, float) and math.isnan(hi):
            hi = None  # NaN is the max; the min of the numbers stands, as in table_stats
        if not (_exact(lo) and _exact(hi)):
            lo = hi = None
    return ColumnStats(lo, hi, footer.null_count, group.num_rows)


def _exact(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isnan(value)
    if isinstance(value, str):
        return len(value) <= MAX_STRING_STAT
    return True

"""Upsert of a Spark DataFrame: the join on the keys runs on the cluster, the new rows are
written by Spark, and the driver commits once (manifest_table/upsert.py has the semantics).

1. On the driver: the source is checked against the table and conformed to its schema;
   Spark finds any key held twice (``DuplicateKeyError`` before anything is written) and
   the keys, which become the key filter: ``IN`` of their values when there are at most
   ``IN_LIMIT``, else each key column's range.
2. The files whose stats may hold the keys are read natively (``live_rows``:
   key columns, file and row position, deleted rows dropped). An inner join with the source
   gives the matched target rows, with the source row that replaces each; a left anti join
   gives the source rows to insert. SQL's join never matches a null key, as the Python
   upsert does not.
3. Spark's Parquet writer writes the replacements and the inserts (``write_staged``); the
   matched (file, row) pairs, as many as rows replaced, are collected as bitmaps.
   ``when_matched="delete"`` deletes the matched pairs instead of writing replacements;
   ``when_not_matched_by_source="delete"`` reads the keys of every file and deletes the
   target rows a left anti join with the source keeps (a null key matches nothing).
4. One commit on the driver: the files added, the positions deleted, serializable against
   the key filter (every row with ``when_not_matched_by_source="delete"``,
   ``stage_replacements``). ``columns`` (a partial update) is not implemented here:
   ``NotSupportedError``, before anything is read.

Tables Spark cannot read or write natively take the Python upsert, with the source
collected to the driver (logged once)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..commit import CommitInfo
from ..data.write import WriteOptions
from ..errors import DuplicateKeyError, NotSupportedError
from ..expressions import Expr
from ..format.properties import BLOOM_FILTER_COLUMNS
from ..operations.upsert import IN_LIMIT, MergeRules, key_filter, stage_replacements
from ..transaction import Transaction
from .native_delete import by_file
from .native_location import report_fallback
from .native_read import FILE_COLUMN, ROW_COLUMN, file_name, live_rows, native_readable_snapshot
from .native_write import conform, write_staged
from .options import TableLocation
from .schema import check_write_schema, native_writable
from .to_spark import narrowing, quoted


def upsert(
    spark: Any,
    uri: str,
    source_df: DataFrame,
    on: Sequence[str],
    *,
    when_matched: str = "update",
    when_not_matched: str = "insert",
    when_not_matched_by_source: str = "ignore",
    columns: Sequence[str] | None = None,
    storage_options: dict[str, str] | None = None,
) -> CommitInfo:
    """``Table.upsert`` of ``source_df`` into the table at ``uri``, with the join and the
    writing done by Spark and one commit on the driver. Returns the commit (with
    ``committed=False`` when nothing changed). ``columns`` is ``NotSupportedError``."""
    if columns is not None:
        raise NotSupportedError(
            "Spark's upsert does not support columns= (a partial update): pass every column "
            "in the source, or use Table.upsert(..., columns=...) on the driver"
        )
    location = TableLocation.of(uri, storage_options)
    table = location.open()
    with table.transaction() as tx:
        schema = tx.scan().schema
        rules = MergeRules.of(schema, on, when_matched, when_not_matched, when_not_matched_by_source)
        check_write_schema(source_df.schema, schema, table.uri)
        snapshot = tx.scan().snapshot
        if not (native_writable(schema) and native_readable_snapshot(spark, location, snapshot)):
            report_fallback(
                location,
                "upsert",
                "Spark cannot read or write this table natively; the source "
                "is collected to the driver for the Python upsert",
            )
            tx.upsert(
                source_df.toArrow(),
                rules.keys,
                when_matched=when_matched,
                when_not_matched=when_not_matched,
                when_not_matched_by_source=when_not_matched_by_source,
            )
            return tx.commit()
        source = conform(source_df, schema).persist()
        try:
            _merge(spark, location, tx, source, rules, table.write_options)
        finally:
            source.unpersist()
        return tx.commit()


def _merge(
    spark: Any,
    location: TableLocation,
    tx: Transaction,
    source: DataFrame,
    rules: MergeRules,
    write_options: WriteOptions,
) -> None:
    """Steps 1-4 on a natively readable and writable table."""
    keys, schema, snapshot = rules.keys, tx.scan().schema, tx.scan().snapshot
    blooms: tuple[str, ...] = tx.staging.base.properties[BLOOM_FILTER_COLUMNS]
    where = _key_filter(source, keys, schema)
    scan = tx.scan(columns=keys, where=None if rules.reads_every_file else where)
    files = scan.plan_files() if where is not None or rules.reads_every_file else []
    target = live_rows(spark, location, snapshot.fields, files, snapshot.deleted, with_positions=True)
    target = target.select(*[quoted(k) for k in keys], FILE_COLUMN, ROW_COLUMN)
    narrow = narrowing(where, schema) if where is not None else None
    candidates = target.filter(narrow) if narrow is not None else target
    matched = candidates.join(source, keys, "inner")
    columns = [quoted(n) for n in schema.names]  # a join puts the keys first; files keep the table's order
    parts = []
    if rules.when_matched == "update":
        parts.append(matched.select(*columns))
    if rules.when_not_matched == "insert":
        parts.append(source.join(candidates.select(*[quoted(k) for k in keys]), keys, "left_anti").select(*columns))
    written = (
        [
            f
            for _, f in write_staged(
                functools.reduce(DataFrame.unionByName, parts),
                location,
                snapshot.fields,
                write_options,
                blooms,
            )
        ]
        if parts
        else []
    )
    tx.add_files(written)
    matched_positions = _positions(matched, files)
    removed = matched_positions if rules.when_matched == "delete" else {}
    if rules.when_matched == "ignore":
        tx.staging.stage_kept(matched_positions.items())
    if rules.reads_every_file:
        missing = _positions(target.join(source.select(*[quoted(k) for k in keys]), keys, "left_anti"), files)
        removed = {p: removed.get(p, BitMap()) | missing.get(p, BitMap()) for p in removed.keys() | missing.keys()}
    stage_replacements(
        tx.staging,
        matched_positions if rules.when_matched == "update" else {},
        removed,
        where,
        rules,
        sum(f.rows for f in written),
    )


def _key_filter(source: DataFrame, keys: list[str], schema: pa.Schema) -> Expr | None:
    """Fail on a key held twice; the keys as a bound filter, as ``upsert.key_filter`` makes
    it (None when no source row has a whole key)."""
    keyed = source.where(functools.reduce(operator.and_, [quoted(k).isNotNull() for k in keys]))
    repeated = keyed.groupBy(*[quoted(k) for k in keys]).count().where(F.col("count") > 1)
    shown = [row.asDict() for row in repeated.drop("count").limit(5).collect()]
    if shown:
        raise DuplicateKeyError(
            f"the source holds keys more than once, e.g. {shown}; each key of {keys} "
            "may appear once (nothing was written)"
        )
    few = keyed.select(*[quoted(k) for k in keys]).distinct().limit(IN_LIMIT + 1).toArrow()
    if few.num_rows <= IN_LIMIT:
        return key_filter(few, keys, schema)
    bounds = keyed.agg(
        *[F.min(quoted(k)).alias(f"lo{i}") for i, k in enumerate(keys)],
        *[F.max(quoted(k)).alias(f"hi{i}") for i, k in enumerate(keys)],
    ).toArrow()
    ends = pa.table(
        {
            k: pa.concat_arrays([bounds[f"lo{i}"].combine_chunks(), bounds[f"hi{i}"].combine_chunks()])
            for i, k in enumerate(keys)
        }
    )
    return key_filter(ends, keys, schema, in_limit=1)  # each column's range


def _positions(matched: DataFrame, files: Sequence[Any]) -> dict[str, BitMap]:
    """The matched (file, row) pairs as a bitmap per data file path."""
    paths = {file_name(f): f.path for f in files}
    found = matched.select(FILE_COLUMN, ROW_COLUMN).toArrow()
    return {paths[name]: BitMap(rows.astype(np.uint32)) for name, rows in by_file(found)}

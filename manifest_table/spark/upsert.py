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
4. One commit on the driver: the files added, the positions deleted, serializable against
   the key filter (``stage_replacements``).

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

from ..arguments import check_choice
from ..commit import CommitInfo
from ..errors import DuplicateKeyError
from ..expressions import Expr
from ..operations.upsert import IN_LIMIT, WHEN_MATCHED, WHEN_NOT_MATCHED, check_keys, key_filter, stage_replacements
from .native_delete import by_file
from .native_location import report_fallback
from .native_read import FILE_COLUMN, ROW_COLUMN, file_name, live_rows, native_readable_snapshot
from .native_write import conform, write_staged
from .options import TableLocation
from .schema import check_write_schema, native_writable
from .to_spark import narrowing, quoted


def upsert(spark: Any, uri: str, source_df: DataFrame, on: Sequence[str], *, when_matched: str = "update",
           when_not_matched: str = "insert", storage_options: dict[str, str] | None = None) -> CommitInfo:
    """``Table.upsert`` of ``source_df`` into the table at ``uri``, with the join and the
    writing done by Spark and one commit on the driver. Returns the commit (with
    ``committed=False`` when nothing changed)."""
    check_choice("when_matched", when_matched, WHEN_MATCHED)
    check_choice("when_not_matched", when_not_matched, WHEN_NOT_MATCHED)
    location = TableLocation.of(uri, storage_options)
    table = location.open()
    with table.transaction() as tx:
        schema = tx.scan().schema
        keys = check_keys(on, schema)
        check_write_schema(source_df.schema, schema, table.uri)
        snapshot = tx.scan().snapshot
        if not (native_writable(schema) and native_readable_snapshot(spark, location, snapshot)):
            report_fallback(location, "upsert", "Spark cannot read or write this table natively; the source "
                            "is collected to the driver for the Python upsert")
            tx.upsert(source_df.toArrow(), keys, when_matched=when_matched, when_not_matched=when_not_matched)
            return tx.commit()
        source = conform(source_df, schema).persist()
        try:
            where = _key_filter(source, keys, schema)
            scan = tx.scan(columns=keys, where=where)
            target = live_rows(spark, location, snapshot.fields, scan.plan_files() if where is not None else [],
                               snapshot.deleted, with_positions=True)
            target = target.select(*[quoted(k) for k in keys], FILE_COLUMN, ROW_COLUMN)
            narrow = narrowing(where, schema) if where is not None else None
            if narrow is not None:
                target = target.filter(narrow)
            matched = target.join(source, keys, "inner")
            parts = []
            if when_matched == "update":
                parts.append(matched.select(*[quoted(n) for n in schema.names]))
            if when_not_matched == "insert":
                parts.append(source.join(target.select(*[quoted(k) for k in keys]), keys, "left_anti"))
            written = [f for _, f in write_staged(functools.reduce(DataFrame.unionByName, parts), location,
                                                  snapshot.fields, table.write_options)] if parts else []
            tx.add_files(written)
            positions = _positions(matched, scan.plan_files()) if when_matched == "update" else {}
            stage_replacements(tx.staging, positions, where, keys, when_matched, when_not_matched,
                               sum(f.rows for f in written))
        finally:
            source.unpersist()
        return tx.commit()


def _key_filter(source: DataFrame, keys: list[str], schema: pa.Schema) -> Expr | None:
    """Fail on a key held twice; the keys as a bound filter, as ``upsert.key_filter`` makes
    it (None when no source row has a whole key)."""
    keyed = source.where(functools.reduce(operator.and_, [quoted(k).isNotNull() for k in keys]))
    repeated = keyed.groupBy(*[quoted(k) for k in keys]).count().where(F.col("count") > 1)
    shown = [row.asDict() for row in repeated.drop("count").limit(5).collect()]
    if shown:
        raise DuplicateKeyError(f"the source holds keys more than once, e.g. {shown}; each key of {keys} "
                                "may appear once (nothing was written)")
    few = keyed.select(*[quoted(k) for k in keys]).distinct().limit(IN_LIMIT + 1).toArrow()
    if few.num_rows <= IN_LIMIT:
        return key_filter(few, keys, schema)
    bounds = keyed.agg(*[F.min(quoted(k)).alias(f"lo{i}") for i, k in enumerate(keys)],
                       *[F.max(quoted(k)).alias(f"hi{i}") for i, k in enumerate(keys)]).toArrow()
    ends = pa.table({k: pa.concat_arrays([bounds[f"lo{i}"].combine_chunks(), bounds[f"hi{i}"].combine_chunks()])
                     for i, k in enumerate(keys)})
    return key_filter(ends, keys, schema, in_limit=1)  # each column's range


def _positions(matched: DataFrame, files: Sequence[Any]) -> dict[str, BitMap]:
    """The matched (file, row) pairs as a bitmap per data file path."""
    paths = {file_name(f): f.path for f in files}
    found = matched.select(FILE_COLUMN, ROW_COLUMN).toArrow()
    return {paths[name]: BitMap(rows.astype(np.uint32)) for name, rows in by_file(found)}

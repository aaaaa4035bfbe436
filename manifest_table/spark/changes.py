"""The change feed on Spark (docs/changes.md, docs/spark.md): ``read_changes`` is a batch read
of ``Table.changes`` with one Spark task per commit.

The driver resolves the range and the schema (the end version's columns and the change
columns); each task opens the table and streams the change rows of its commit,
``ChangeFeed.commit(version).to_batches()``, the same unit a streaming source reads per
commit. Rows are in Spark's types (microsecond UTC timestamps, no unsigned integers), as the
data source gives them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from ..expressions import Expr
from .options import TableLocation
from .schema import exchange_schema, spark_schema


def read_changes(
    spark: Any,
    uri: str,
    start_version: int,
    end_version: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    where: str | Expr | None = None,
    storage_options: dict[str, str] | None = None,
) -> DataFrame:
    """``Table.changes(start_version, end_version, columns=, where=)`` of the table at ``uri``
    as a DataFrame: the rows changed by the commits after ``start_version`` up to
    ``end_version`` (default: the latest), with ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp``. Commits are read in parallel, one task each; order the DataFrame
    by ``_commit_version`` where order matters."""
    location = TableLocation.of(uri, storage_options)
    feed = location.open().changes(start_version, end_version, columns=columns, where=where)
    schema = spark_schema(feed.schema)
    commits = feed.end_version - feed.start_version
    versions = spark.range(feed.start_version + 1, feed.end_version + 1, 1, max(1, commits))
    read = partial(
        _commit_rows,
        location,
        (feed.start_version, feed.end_version),
        list(feed.schema.names[: len(feed.schema) - 3]),
        where,
        exchange_schema(schema),
    )
    return versions.mapInArrow(read, schema)


def _commit_rows(
    location: TableLocation,
    span: tuple[int, int],
    columns: list[str],
    where: str | Expr | None,
    output: pa.Schema,
    versions: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """On an executor: the change rows of each commit of ``versions`` (Spark's ``id``)."""
    feed = location.open().changes(*span, columns=columns, where=where)
    for batch in versions:
        for version in batch.column("id").to_pylist():
            for rows in feed.commit(version).to_batches():
                yield rows.cast(output, safe=False)

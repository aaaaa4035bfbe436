"""Which live rows a filter matches, found by Spark on its own Parquet path: what a delete
removes, as one bitmap of row positions per data file, collected on the driver.

Spark reads the candidate files (planned from manifest stats) with row positions
(``_metadata.row_index``), applies the part of the filter it evaluates exactly as we do
(``spark_filter.narrowing``: it prunes row groups and most rows inside Spark), and hands
the survivors, only the filter's columns, to our own evaluator in ``mapInArrow``, which
decides: the rows a Spark delete removes are exactly those the Python API would. No
SparkContext is needed, so this runs over Spark Connect."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from ..data.scan import Snapshot
from ..expressions import Expr
from ..format.manifest import DataFile
from .native_read import FILE_COLUMN, ROW_COLUMN, file_name, live_rows
from .options import TableLocation
from .to_spark import narrowing, quoted
from .workers import check_python_workers


def matching_positions(
    spark: Any, location: TableLocation, snapshot: Snapshot, files: Sequence[DataFile], where: Expr
) -> dict[str, BitMap]:
    """Per data file of ``files`` (keyed by path), the positions of live rows matching the
    bound filter ``where``. Files with no match are left out."""
    if not files:
        return {}
    check_python_workers(spark)
    needed = sorted(where.columns())
    rows = live_rows(spark, location, snapshot.fields, files, snapshot.deleted, with_positions=True)
    rows = rows.select(*[quoted(name) for name in needed], FILE_COLUMN, ROW_COLUMN)
    narrow = narrowing(where, snapshot.schema)
    if narrow is not None:
        rows = rows.filter(narrow)
    types = pa.schema([snapshot.schema.field(name) for name in needed])
    found = rows.mapInArrow(partial(_matching, where, types), "_mt_file string, _mt_row long").toArrow()
    paths = {file_name(f): f.path for f in files}
    positions: dict[str, BitMap] = {}
    for name, group in by_file(found):
        positions[paths[name]] = BitMap(group.astype(np.uint32))
    return positions


def _matching(where: Expr, types: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the (file, row) of each row ``where`` selects. Columns arrive in
    Spark's Arrow types and are cast back to the table's first (e.g. ``uint8`` read as
    ``smallint``), so the filter sees exactly what the Python API's scan sees."""
    for batch in batches:
        columns = [batch.column(field.name).cast(field.type) for field in types]
        index = pa.array(np.arange(batch.num_rows))
        values = pa.Table.from_arrays([*columns, index], names=[*types.names, "__mt_index"])
        picked = values.filter(where.to_arrow())["__mt_index"].combine_chunks()
        yield batch.select([FILE_COLUMN, ROW_COLUMN]).take(picked)


def by_file(found: pa.Table) -> Iterator[tuple[str, np.ndarray]]:
    """(file name, its row positions) for each file of collected (file, row) pairs."""
    if not found.num_rows:
        return
    found = found.sort_by([(FILE_COLUMN, "ascending")])
    names = found[FILE_COLUMN].combine_chunks()
    rows = found[ROW_COLUMN].to_numpy()
    ends = np.flatnonzero(pc.not_equal(names[1:], names[:-1]).to_numpy(zero_copy_only=False)) + 1
    starts = np.concatenate([[0], ends])
    stops = np.concatenate([ends, [len(names)]])
    for a, b in zip(starts, stops):
        yield names[int(a)].as_py(), rows[a:b]

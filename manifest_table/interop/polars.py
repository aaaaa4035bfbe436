"""A table as a Polars LazyFrame, through a Polars IO plugin over our own scan.

Polars hands the plugin the columns a query needs, its predicate and a row limit. The
columns go into the scan (only they are read from storage); deletes are applied by the scan
by row position; the predicate runs on each batch as it streams, and reading stops once the
limit is reached. Any store works (local, S3, in memory), with the credentials the table was
opened with. See docs/interop.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from ..data.scan import Scan, Snapshot
from ..format.column_types import holds
from ..storage import FileIO

if TYPE_CHECKING:
    import polars as pl


def lazy_frame(snapshot: Snapshot, io: FileIO) -> pl.LazyFrame:
    """Every live row of ``snapshot``, lazily: nothing is read until the frame is collected."""
    import polars as pl
    from polars.io.plugins import register_io_source

    schema = cast(pl.DataFrame, pl.from_arrow(snapshot.schema.empty_table())).schema

    def source(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        left = n_rows
        for batch in Scan(snapshot, io, columns=with_columns).to_batches():
            frame = cast(pl.DataFrame, pl.from_arrow(_compacted(batch)))  # (a record batch: a frame)
            if predicate is not None:
                frame = frame.filter(predicate)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            if frame.height:
                yield frame
            if left == 0:
                return

    return register_io_source(
        source,
        schema=schema,
        explain_name="manifest_table",
        explain_detail=f"version {snapshot.version}, {len(snapshot.files)} files",
    )


def _compacted(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its columns holding a fixed-size list copied to exactly their rows:
    Polars (2.1) refuses a fixed-size list with nulls whose values run past its slice
    ("validity mask length must be equal to the number of values divided by size"), which
    Arrow allows, and the nulls of a column older files lack are sliced into batches by row
    group. Other columns are passed as they are."""
    if not any(holds(f.type, pa.types.is_fixed_size_list) for f in batch.schema):
        return batch
    columns = [pa.concat_arrays([c]) if holds(c.type, pa.types.is_fixed_size_list) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

"""Reading the rows of a data file at given positions, a few row groups at a time, as the
columns of the version the change feed presents (by field id: format/field_ids.py).

Memory stays bounded whatever the number of positions: one row group is decoded at a time,
only the rows wanted are kept, and a read returns once it has decoded ``READ_BYTES`` of row
groups (one of the default 16 MiB), so a commit that deleted 10M rows streams
(tests/benchmarks/changes_memory.py). Each read opens the file anew (its footer: one small
ranged GET), so a transient failure repeats only that read (storage/fileio.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from ..errors import CorruptTableError, NotFound, StoreError, VersionExpiredError
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..lazy import lazy
from ..storage import FileIO, ParquetSource

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
else:
    ds = lazy("pyarrow.dataset")
    pq = lazy("pyarrow.parquet")

READ_BYTES = 8 * 1024 * 1024
"""Uncompressed row-group bytes (the footer's, all columns) one read decodes at most, past
its first row group: one row group of the default 16 MiB, several small ones."""


def rows_at(
    io: FileIO, file: DataFile, positions: BitMap, fields: FieldIds, columns: Sequence[str], version: int
) -> Iterator[pa.Table]:
    """The rows of ``file`` at ``positions`` (each below its ``rows``), in ascending
    position, as tables of ``columns`` of ``fields.schema``. ``version``: the commit read
    for, named if its files are gone (garbage collection expired it meanwhile)."""
    if not columns:  # nothing to read: one placeholder column carries the row count
        for start in range(0, len(positions), 1 << 20):
            yield pa.table({"_": pa.nulls(min(1 << 20, len(positions) - start))})
        return
    done = 0
    while done < len(positions):

        def read(source: ParquetSource, after: int = done) -> tuple[pa.Table, int]:
            return _read(source.fragment, source.metadata, file, positions, after, fields, columns)

        try:
            table, done = io.read_parquet(file.path, file.size, read)
        except NotFound as exc:
            raise VersionExpiredError(
                f"{exc} is gone: garbage collection has removed the versions around {version} (or the table is damaged)"
            ) from exc
        except OSError as exc:  # pyarrow's own reads of local files
            raise StoreError(f"reading {file.path} failed: {exc}") from exc
        yield table


def _read(
    fragment: ds.ParquetFileFragment,
    meta: pq.FileMetaData,
    file: DataFile,
    positions: BitMap,
    done: int,
    fields: FieldIds,
    columns: Sequence[str],
) -> tuple[pa.Table, int]:
    """The rows at ``positions[done:]`` of the next row groups, up to ``READ_BYTES`` of them,
    and how many positions are done after them."""
    if meta.num_rows != file.rows:
        raise CorruptTableError(
            f"{file.path}: its Parquet footer has {meta.num_rows} rows, the manifest's rows field says {file.rows}"
        )
    starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    sources = fields.sources(fragment.physical_schema, columns)
    read = [sources[c] for c in columns if c in sources]
    parts: list[pa.Table] = []
    decoded, done_before = 0, done
    while done < len(positions) and (not parts or decoded < READ_BYTES):
        first = positions[done]
        group = int(np.searchsorted(starts, first, side="right")) - 1
        start, end = int(starts[group]), int(starts[group + 1])
        count = positions.range_cardinality(first, end)
        if read:  # (the file may have none of the columns: then it only counts rows)
            rows = fragment.subset(row_group_ids=[group]).to_table(columns=read)
            if count < end - start:
                wanted = np.frombuffer(positions[done : done + count].to_array(), dtype=np.uint32)
                rows = rows.take(pa.array(wanted.astype(np.int64) - start))
            parts.append(rows)
            decoded += meta.row_group(group).total_byte_size
        done += count
    table = pa.concat_tables(parts) if read else pa.table({"_": pa.nulls(done - done_before)}).select([])
    return fields.conform(table, sources, columns), done

"""Compaction's rewrite step on Spark's own Parquet path: every group of ``plan_compaction``
becomes files of about ``group.output_rows`` rows holding its sources' live rows in order,
written by Spark's writer and checked and recorded by ``rewrite_record``, as on the local
path, which is what lets ``commit_compaction`` remap a concurrent delete onto the outputs.

Each group's files are read natively with row positions (deleted rows dropped by the
anti-join of ``native_read``) and tagged with their place in the group and the output each
row goes to: the row's place among the group's live rows, estimated as the live rows of
the files before it plus its row index times its file's live fraction, divided by
``output_rows``. The estimate never decreases along the sources' order (floating-point
rounding is monotonic, and a file's rows stay below the next file's start), so each output
is a contiguous run of the group's rows and the outputs follow in order; their exact row
counts come from the files written. Each output (group and index in one number,
``_OUTPUT``) goes to one task (``repartition``) and is sorted there by (place, row index),
a key unique per row, so the order is the sources' whatever the shuffle did; the write is
partitioned by output, so each is a file of its own."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F

from ..commit.changes import Rewrite
from ..data.tombstones import DeletionVectors
from ..data.write import WriteOptions
from ..format.manifest import DataFile
from ..operations.compaction import CompactionGroup, rewrite_record
from ..storage import FileIO
from .native_read import FILE_COLUMN, ROW_COLUMN, file_name, live_rows
from .native_write import write_staged
from .options import TableLocation
from .to_spark import quoted

_OUTPUT = "_mt_output"
"""group * 2**32 + the output's index in its group: outputs of one group hold < 2**32 rows."""
_PLACE = "_mt_place"


def rewrite_groups(
    spark: Any, location: TableLocation, groups: Sequence[CompactionGroup], options: WriteOptions
) -> list[tuple[list[DataFile], Rewrite]]:
    """Each group's output files, in order (none when none of its rows is live), and its ``Rewrite``."""
    if not groups:
        return []
    schema = groups[0].schema
    files = [f for g in groups for f in g.files]
    before = [start for g in groups for start in itertools.accumulate((f.live_rows for f in g.files[:-1]), initial=0)]
    places = spark.createDataFrame(
        pa.table(
            {
                "_mt_name": [file_name(f) for f in files],
                "_mt_group": [i << 32 for i, g in enumerate(groups) for _ in g.files],
                _PLACE: [j for g in groups for j in range(len(g.files))],
                "_mt_before": pa.array(before, pa.float64()),
                "_mt_scale": [f.live_rows / f.rows if f.rows else 0.0 for f in files],
                "_mt_per_output": pa.array([g.output_rows for g in groups for _ in g.files], pa.float64()),
            }
        )
    )
    rows = live_rows(
        spark, location, groups[0].fields, files, DeletionVectors(location.store()).of, with_positions=True
    )
    tagged = rows.join(F.broadcast(places), rows[FILE_COLUMN] == places["_mt_name"])
    place_in_group = F.col("_mt_before") + F.col(ROW_COLUMN) * F.col("_mt_scale")
    output = F.col("_mt_group") + F.floor(place_in_group / F.col("_mt_per_output")).cast("long")
    outputs = sum(-(-g.live_rows // g.output_rows) for g in groups)
    ordered = (
        tagged.withColumn(_OUTPUT, output)
        .repartition(max(1, outputs), _OUTPUT)
        .sortWithinPartitions(_OUTPUT, _PLACE, ROW_COLUMN)
        .select(*[quoted(name) for name in schema.names], _OUTPUT)
    )
    written = write_staged(
        ordered, location, groups[0].fields, options, groups[0].bloom_filter_columns, partition_by=_OUTPUT
    )
    try:
        by_output = {int(directory.removeprefix(f"{_OUTPUT}=")): file for directory, file in written}
        if len(by_output) < len(written):  # two files of one output: their order would be unknown
            raise RuntimeError(f"Spark wrote {len(written)} files for {len(by_output)} compaction outputs")
        produced: dict[int, list[DataFile]] = {}
        for key in sorted(by_output):
            produced.setdefault(key >> 32, []).append(by_output[key])
        io = FileIO(location.store())
        return [rewrite_record(io, group, produced.get(i, [])) for i, group in enumerate(groups)]
    except BaseException:
        location.store().delete_unreferenced(f.path for _, f in written)
        raise

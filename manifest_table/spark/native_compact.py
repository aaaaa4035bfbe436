"""Compaction's rewrite step on Spark's own Parquet path: every group of ``plan_compaction``
becomes one file holding its sources' live rows in order, written by Spark's writer.

Each group's files are read natively with row positions (deleted rows dropped by the
anti-join of ``native_read``), tagged with their group and their place in the group, sent to
one task per group (``repartition`` on the group) and sorted there by (place, row index),
a key unique per row, so the order is the sources' order whatever the shuffle did. The
write is partitioned by group, so each group's rows land in a file of their own; the
driver checks that each group gave exactly one file with exactly its live rows, which is
what lets ``commit_compaction`` remap a concurrent delete onto the outputs."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
from pyspark.sql import functions as F

from ..changes import Rewrite, RewriteSource
from ..errors import CorruptTableError
from ..format.manifest import DataFile
from ..maintenance import CompactionGroup
from ..tombstones import DeletionVectors
from ..write import WriteOptions
from .native_read import FILE_COLUMN, ROW_COLUMN, file_name, live_rows
from .native_write import write_staged
from .options import TableLocation
from .spark_filter import quoted

_GROUP = "_mt_group"
_PLACE = "_mt_place"


def rewrite_groups(spark: Any, location: TableLocation, groups: Sequence[CompactionGroup],
                   options: WriteOptions) -> list[tuple[DataFile | None, Rewrite]]:
    """Each group's output file (None when none of its rows is live) and its ``Rewrite``."""
    if not groups:
        return []
    schema = groups[0].schema
    files = [f for g in groups for f in g.files]
    places = spark.createDataFrame(pa.table({
        "_mt_name": [file_name(f) for g in groups for f in g.files],
        _GROUP: [i for i, g in enumerate(groups) for _ in g.files],
        _PLACE: [j for g in groups for j in range(len(g.files))],
    }))
    rows = live_rows(spark, location, groups[0].fields, files, DeletionVectors(location.store()).of,
                     with_positions=True)
    tagged = rows.join(F.broadcast(places), rows[FILE_COLUMN] == places["_mt_name"])
    ordered = (tagged.repartition(len(groups), _GROUP)
               .sortWithinPartitions(_GROUP, _PLACE, ROW_COLUMN)
               .select(*[quoted(name) for name in schema.names], _GROUP))
    written = write_staged(ordered, location, schema, groups[0].fields.ids, options, partition_by=_GROUP)
    outputs: dict[int, list[DataFile]] = {}
    for directory, file in written:
        outputs.setdefault(int(directory.removeprefix(f"{_GROUP}=")), []).append(file)
    results = []
    for i, group in enumerate(groups):
        produced = outputs.get(i, [])
        if len(produced) > 1 or sum(f.rows for f in produced) != group.live_rows:
            location.store().delete_unreferenced(f.path for _, f in written)
            raise CorruptTableError(f"compacting {len(group.files)} files of version {group.version} gave "
                                    f"{sum(f.rows for f in produced)} rows in {len(produced)} files; their "
                                    f"manifest says {group.live_rows} live rows")
        output = produced[0] if produced else None
        sources = tuple(RewriteSource(f.path, f.rows, f.deletes) for f in group.files)
        results.append((output, Rewrite(output.path if output else None, sources)))
    return results

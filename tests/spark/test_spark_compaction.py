"""Spark's native compaction (``manifest_table.spark.compact``, spark/native_compact.py) at a
size where groups are cut into several outputs: the same plan, the same outputs near the
target and the same record as the local path, and a delete racing it is remapped onto the
right output. The data is tests/reads/test_realistic_sizes.py's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import manifest_table as mt
from manifest_table.format.manifest import DataFile
from manifest_table.operations.compaction import CompactionGroup, commit_compaction
from manifest_table.spark import compact
from manifest_table.spark.native_compact import rewrite_groups
from manifest_table.spark.options import TableLocation
from tests.reads.test_realistic_sizes import SCHEMA, realistic

pytest_plugins = ["tests.spark.fixtures"]


def live_bytes(files: tuple[DataFile, ...]) -> float:
    return sum(f.size * f.live_rows / f.rows for f in files)


def test_spark_cuts_groups_into_outputs_and_remaps_a_racing_delete(spark, tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    parts = [realistic(i * 50_000, 50_000, seed=20 + i) for i in range(4)]
    for part in parts:
        t.append(part)
    t.delete("v < 0.3")  # every file: rewritten alone, into 2 outputs
    rows = pa.concat_tables(parts)
    model = rows.filter(pc.greater_equal(rows["v"], 0.3))
    target = int(live_bytes(t.manifest().files) / 8)

    info = compact(spark, t.uri, target_file_size=target)
    outputs = t.manifest().files
    assert info.committed and info.metrics["files_removed"] == 4 and len(outputs) == 8
    assert all(0.5 * target <= f.size <= 1.6 * target for f in outputs)
    assert [len(rw["outputs"]) for rw in info.parameters["rewrites"]] == [2] * 4
    assert t.to_arrow().equals(model)  # each output holds the next rows, in order
    assert not compact(spark, t.uri, target_file_size=target).committed

    # Groups of several files cut into several outputs that straddle the files, staged, then
    # a delete of rows in every output commits before the compaction does.
    t.delete("k < 300")
    model = model.filter(pc.greater_equal(model["k"], 300))
    base, pointer = t.log.latest()
    half = len(base.files) // 2
    groups = [CompactionGroup(files, base.fields, base.version, int(live_bytes(files) / 3))  # 3 outputs
              for files in (base.files[:half], base.files[half:])]  # of 4 files each
    results = rewrite_groups(spark, TableLocation(t.uri), groups, t.write_options)
    live_ids, offset = t.scan(version=base.version).to_arrow()["id"], 0
    for (written, _), group in zip(results, groups):  # each group's live rows, in order, cut
        assert len(written) == 3
        ids = pa.concat_tables([pq.read_table(Path(t.uri) / f.path, columns=["id"]) for f in written])["id"]
        assert ids.equals(live_ids.slice(offset, group.live_rows))
        offset += group.live_rows
    t.delete("k = 301 OR k = 998")
    model = model.filter(pc.invert(pc.is_in(model["k"], pa.array([301, 998]))))
    assert commit_compaction(t, base, pointer, results, {}).committed
    assert t.to_arrow().equals(model)

"""Spark over an evolved schema (issue 12): the native read, the data source, the native
write (which must write field ids) and the distributed delete, over a renamed and a dropped
column. Few tests: each Spark job costs seconds."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import manifest_table as mt
from manifest_table.format.field_ids import FIELD_ID
from manifest_table.spark import compact, delete, read, write
from tests.spark.fixtures import sorted_rows

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("tag", pa.string()), ("score", pa.float32())])


def test_spark_over_renamed_and_dropped_columns(spark, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA)
    t.append(pa.table({"id": [1, 2, 3], "name": ["n1", "n2", "n3"], "tag": ["a", "b", "c"],
                       "score": pa.array([0.5, 1.0, 1.5], pa.float32())}, schema=SCHEMA))
    t.delete("id = 2")
    before = t.version
    with t.update_schema() as s:
        s.rename_column("name", "label")
        s.drop_column("tag")
        s.add_column("tag", pa.int64())
        s.widen("score", pa.float64())
    frame = spark.createDataFrame([(4, "n4", 2.0, 40)], "id long, label string, score double, tag long")
    info = write(frame, uri)
    assert info is not None and info.committed
    added = next(f for f in t.manifest().files if f.path not in {g.path for g in t.manifest(before).files})
    file_schema = pq.read_schema(Path(uri) / added.path)
    assert [int(f.metadata[FIELD_ID]) for f in file_schema] == list(t.manifest().fields.ids)
    physical = list(t.manifest().fields.physical_names)  # what Delta mirrors' readers match
    assert file_schema.names == physical and physical[1] == "name" and physical[3] != "tag"

    expected = sorted_rows(t.to_arrow())
    assert [(r["id"], r["label"], r["tag"]) for r in expected] == [(1, "n1", None), (3, "n3", None), (4, "n4", 40)]
    native = read(spark, uri)
    assert "FileScan parquet" in native._jdf.queryExecution().executedPlan().toString()
    assert sorted_rows(native) == expected
    assert sorted_rows(spark.read.format("manifest_table").load(uri)) == expected
    assert sorted_rows(read(spark, uri, version=before)) == sorted_rows(t.scan(version=before).to_arrow())
    assert read(spark, uri).filter("label = 'n3'").count() == 1

    delete(spark, uri, "label = 'n3' OR tag = 40")
    assert [r["id"] for r in sorted_rows(t.to_arrow())] == [1]
    spark.createDataFrame([(5, "n5", 2.5, 50)], "id long, label string, score double, tag long") \
        .write.format("manifest_table").mode("append").save(uri)
    t.delete("id = 5")
    compact(spark, uri, min_deleted_fraction=0.1)
    assert sorted_rows(read(spark, uri)) == sorted_rows(t.to_arrow())
    for f in t.manifest().files:  # the data source's file and the compaction's outputs
        assert pq.read_schema(Path(uri) / f.path).names == physical, f.path
    assert [(r["id"], r["label"], r["tag"]) for r in sorted_rows(t.to_arrow())] == [(1, "n1", None)]

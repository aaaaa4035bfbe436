"""Clustering and purge on Spark (issue 34): ``manifest_table.spark.compact`` on a table with
``cluster_by`` rewrites the clustering merge with our curve on an executor, and
``manifest_table.spark.purge`` finds and rewrites on Spark; both commit what the local path
commits, and ``sort_by`` sorts a Spark write."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import manifest_table as mt
from manifest_table.spark import compact, purge, write

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("user_id", pa.int64()), ("country", pa.string())])


def ids(t: mt.Table) -> Counter[int]:
    return Counter(t.scan(columns=["id"]).to_arrow()["id"].to_pylist())


def test_spark_clusters_and_purges_as_the_local_path_does(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"cluster_by": ["user_id"]}, target_file_size=6_000)
    for i in range(6):
        t.append(pa.table({"id": range(i * 1000, (i + 1) * 1000), "user_id": rng.integers(0, 10_000, 1000),
                           "country": rng.choice(["DE", "FR"], 1000)}, schema=SCHEMA))
    t.delete("id < 100")
    before = ids(t)
    info = compact(spark, t.uri, target_file_size=6_000)
    assert info.committed and info.parameters["rewrites"][0]["order"]["field_ids"] == [2]
    files = sorted(t.manifest().files, key=lambda f: f.stats["user_id"].min)
    assert ids(t) == before and len({f.cluster_run for f in files}) == 1 and len(files) >= 3
    assert all(a.stats["user_id"].max <= b.stats["user_id"].min for a, b in zip(files, files[1:]))
    assert not compact(spark, t.uri, target_file_size=6_000).committed

    t.delete("id BETWEEN 200 AND 209")
    info = purge(spark, t.uri, where="user_id < 500")
    gone = {i for i, u in zip(*(t.scan(version=info.version - 1).to_arrow()[c].to_pylist() for c in ("id", "user_id")))
            if u < 500}
    assert info.operation == "purge" and info.metrics["rows_deleted"] == len(gone) > 0
    assert ids(t) == before - Counter(range(200, 210)) - Counter(gone)
    assert not [f for f in t.manifest().files if f.deleted_rows]


def test_a_spark_write_sorts_by_sort_by(spark, tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"sort_by": ["user_id"]})
    rows = [(i, (i * 7919) % 1000, "DE") for i in range(500)]
    df = spark.createDataFrame(rows, "id long, user_id long, country string")
    write(df.repartition(2), t.uri)
    for f in t.manifest().files:
        users = pq.read_table(Path(t.uri) / f.path)["user_id"].to_pylist()
        assert users == sorted(users)

"""Spark on a database's tables (docs/databases.md, docs/spark.md): ``read``, ``write``,
``delete``, ``compact``, ``upsert`` and the data source take ``DB_URI/TABLE``; executors write
into the table's own folder and the driver commits once, through the database."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import TableNotFoundError
from manifest_table.spark import compact, delete, read, upsert, write

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def ids(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def test_spark_reads_and_writes_a_database_table(spark, tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    orders = db.create_table("orders", SCHEMA)
    other = db.create_table("other", SCHEMA)
    uri = f"{db.uri}/orders"
    write(spark.createDataFrame([(i, f"v{i}") for i in range(10)], "id long, v string").repartition(2), uri)
    assert db.history(limit=1)[0].parameters["tables"] == {"orders": "append"}  # one commit of the database
    assert ids(orders) == list(range(10)) and ids(other) == []
    assert not (Path(db.uri) / "orders").exists()  # the files are in the table's own folder
    assert sorted(r.id for r in read(spark, uri).collect()) == list(range(10))
    assert sorted(r.id for r in spark.read.format("manifest_table").load(uri).collect()) == list(range(10))

    delete(spark, uri, "id < 3")
    upsert(spark, uri, spark.createDataFrame([(5, "new"), (20, "x")], "id long, v string"), ["id"])
    assert ids(orders) == [*range(3, 10), 20]
    for start in (30, 40):
        spark.createDataFrame([(start, "a")], "id long, v string").write.format("manifest_table").mode(
            "append").save(uri)
    compact(spark, uri, 1 << 20, 0.01)
    assert orders.manifest().totals.files == 1 and ids(orders) == [*range(3, 10), 20, 30, 40]
    version = db.version
    assert sorted(r.id for r in read(spark, uri, version=version - 1).collect()) == [*range(3, 10), 20, 30, 40]
    assert ids(db.table("other")) == []


def test_a_spark_write_to_a_missing_table_of_a_database_is_refused(spark, tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    with pytest.raises(TableNotFoundError, match="create it first"):
        write(spark.createDataFrame([(1, "a")], "id long, v string"), f"{db.uri}/missing")
    assert db.tables() == [] and not (Path(db.uri) / "missing").exists()

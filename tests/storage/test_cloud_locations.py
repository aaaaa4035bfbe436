"""gs:// and az:// wherever a location is accepted: the CLI (with ``--storage-option``), DuckDB
and Polars (through Arrow and our scan), and Spark's data source. The Python API:
test_cloud_tables.py; the maintenance job: tests/maintenance/test_maintenance_job.py; Spark's native path:
tests/spark/test_spark_cloud.py."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.cli import main
from tests.conftest import store_location

SCHEMA = pa.schema([("id", pa.int64())])
KINDS = ["gcs", "azure"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_cli_creates_appends_deletes_and_reads(kind: str, request: pytest.FixtureRequest, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    uri, options = store_location(kind, request)
    given = [arg for key, value in (options or {}).items() for arg in ("--storage-option", f"{key}={value}")]
    pq.write_table(pa.table({"id": [1, 2, 3]}, schema=SCHEMA), tmp_path / "rows.parquet")
    assert main(["create", uri, "--schema", "id:int64", *given]) == 0
    assert main(["append", uri, str(tmp_path / "rows.parquet"), *given]) == 0
    assert main(["delete", uri, "id = 2", *given]) == 0
    capsys.readouterr()
    assert main(["count", uri, *given]) == 0
    assert capsys.readouterr().out == "2\n"
    assert main(["scan", uri, "--format", "csv", *given]) == 0
    assert capsys.readouterr().out.split() == ['"id"', "1", "3"]
    assert mt.open_table(uri, storage_options=options).version == 2


@pytest.mark.parametrize("kind", KINDS)
def test_duckdb_and_polars_read_through_arrow(kind: str, request: pytest.FixtureRequest,
                                              caplog: pytest.LogCaptureFixture) -> None:
    uri, options = store_location(kind, request)
    table = mt.create_table(uri, SCHEMA, storage_options=options)
    table.append(pa.table({"id": [1, 2, 3]}, schema=SCHEMA))
    table.delete("id = 2")
    with caplog.at_level(logging.INFO, logger="manifest_table.interop"):
        view = table.to_duckdb(duckdb.connect(), "t")
        assert sorted(view.fetchall()) == [(1,), (3,)]
    assert "in-memory Arrow table" in caplog.text
    assert sorted(table.to_polars().collect()["id"].to_list()) == [1, 3]


@pytest.mark.parametrize("kind", KINDS)
def test_the_spark_data_source_writes_and_reads_with_the_stores_options(kind: str,
                                                                       request: pytest.FixtureRequest) -> None:
    """The data source's writer and reader, driven as Spark drives them (options as Spark hands
    them over, a write per task, one commit), without a Spark session."""
    pytest.importorskip("pyspark")
    from manifest_table.spark.options import SourceOptions
    from manifest_table.spark.schema import spark_schema
    from manifest_table.spark.source import TableReader
    from manifest_table.spark.writer import BatchWriter

    uri, options = store_location(kind, request)
    mt.create_table(uri, SCHEMA, storage_options=options)
    parsed = SourceOptions.parse({"path": uri, **(options or {})})
    writer = BatchWriter(parsed, spark_schema(SCHEMA), overwrite=False)
    writer.commit([writer.write(iter(pa.table({"id": [1, 2, 3]}, schema=SCHEMA).to_batches()))])
    reader = TableReader(parsed, spark_schema(SCHEMA))
    got = [row for part in reader.partitions() for batch in reader.read(part) for row in batch.column(0).to_pylist()]
    assert sorted(got) == [1, 2, 3]

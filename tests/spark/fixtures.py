"""One local SparkSession for the whole test session (starting a JVM costs ~15 s), and helpers
to compare what Spark reads with what the Python API reads. Load with
``pytest_plugins = ["tests.spark.fixtures"]``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession

from manifest_table.spark import register

GCS_CONNECTOR_ON_HADOOP_3_5 = {
    "spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
    "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
    **{f"spark.hadoop.fs.gs.{key}": str(size) for key, size in (
        ("block.size", 64 << 20), ("rewrite.max.chunk.size", 512 << 20), ("outputstream.buffer.size", 8 << 20),
        ("inputstream.inplace.seek.limit", 8 << 20), ("inputstream.min.range.request.size", 2 << 20))},
}
"""Google's gcs-connector (3.1, built for Hadoop 3.4) on Spark 4's Hadoop 3.5, which maps gs://
to its own hadoop-gcp module, writes these sizes as "64m", which the connector cannot parse, and
changed the vectored-read API the connector calls when Parquet reads ranges (docs/spark.md)."""

CLOUD_JARS: list[str] = []
CLOUD_JARS_MISSING = ""
"""Why the cloud connectors could not be fetched (tests/spark/test_spark_cloud.py skips then)."""


def cloud_connector_settings() -> dict[str, str]:
    """The session settings that put Hadoop's GCS and Azure connectors on Spark's classpath,
    fetched by Maven on first use (tests/maven_jars.py); none if they cannot be fetched."""
    global CLOUD_JARS_MISSING
    from tests.maven_jars import cloud_connectors, fetch

    try:
        CLOUD_JARS[:] = [str(path) for path in fetch(cloud_connectors())]
    except Exception as error:  # no Maven, no network: every other Spark test still runs
        CLOUD_JARS_MISSING = f"Hadoop's cloud connectors could not be fetched: {error}"
        return {}
    return {"spark.jars": ",".join(CLOUD_JARS), **GCS_CONNECTOR_ON_HADOOP_3_5}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """``local[2, 4]``: two cores, and a failed task is retried up to 4 attempts (local mode
    takes ``spark.task.maxFailures`` from the master string). Hadoop's GCS and Azure
    connectors are on its classpath (when Maven could fetch them)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder
    for key, value in cloud_connector_settings().items():
        builder = builder.config(key, value)
    session = (builder.master("local[2, 4]").appName("manifest_table-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def sorted_rows(data: pa.Table | DataFrame, key: str = "id") -> list[dict[str, Any]]:
    """Rows ordered by ``key``, from a pyarrow Table or a Spark DataFrame (via Arrow, so
    timestamps stay zone-aware and compare by instant). NaN becomes "NaN" so rows compare."""
    table = data if isinstance(data, pa.Table) else data.toArrow()
    return [{name: "NaN" if value != value else value for name, value in row.items()}
            for row in table.sort_by(key).to_pylist()]


FAILING_MARKER = 1777


def failing_at_marker(df: DataFrame) -> DataFrame:
    """``df`` whose task holding id ``FAILING_MARKER`` raises "injected failure": a job that
    fails in one task while the others may have written their files."""
    from pyspark.sql.functions import col, udf

    @udf("long")
    def fail_on_marker(value: int) -> int:
        if value == FAILING_MARKER:
            raise ValueError("injected failure on the marker row")
        return value

    return df.withColumn("id", fail_on_marker(col("id")))

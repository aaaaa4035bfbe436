"""Run by tests/mirrors/test_mirror_matrix.py in a subprocess whose ``sys.path`` starts with PySpark
4.1 (tests/reader_envs.py): the reference JVM readers, Spark with ``delta-spark`` and Spark
with ``iceberg-spark-runtime``, their jars fetched from Maven Central by Spark itself
(``spark.jars.packages``) into an Ivy cache the request names. Reads each query and prints
its rows, canonical (tests/mirror_canonical.py), as JSON; a failed read gives ``"error: ..."``.

stdin: {"ivy": dir, "packages": [...], "queries": {label: {"format": "delta" | "iceberg",
"path": ..., "options": {...}}}}. One local session with both readers: the catalog is
Delta's (``spark_catalog``), Iceberg tables are read by metadata file path."""

from __future__ import annotations

import json
import os
import sys
import time

from tests.mirror_canonical import of_arrow

JVM_OPTIONS = "-Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The quick JIT only and one GC thread: a JVM that reads a few tiny tables spends its time
compiling and starting, and on a busy machine these halve the test's wall time."""


def session(ivy: str, packages: list[str]):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master("local[2]").appName("manifest_table-mirror-readers")
            .config("spark.jars.packages", ",".join(packages))
            .config("spark.jars.ivy", ivy)
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension,"
                    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1").config("spark.default.parallelism", "2")
            .config("spark.databricks.delta.snapshotPartitions", "1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
            .getOrCreate())


def _message(exc: Exception) -> str:
    """The JVM's exception where there is one (py4j's own message names only the call)."""
    java = getattr(exc, "java_exception", None)
    return str(java) if java is not None else f"{type(exc).__name__}: {exc}"


def main() -> None:
    request = json.load(sys.stdin)
    started = time.monotonic()
    spark = session(request["ivy"], request["packages"])
    spark.sparkContext.setLogLevel("ERROR")
    out: dict = {"spark": spark.version, "started": round(time.monotonic() - started, 1)}
    for label, query in request["queries"].items():
        try:
            reader = spark.read.format(query["format"])
            for key, value in query.get("options", {}).items():
                reader = reader.option(key, value)
            out[label] = of_arrow(reader.load(query["path"]).toArrow())
        except Exception as exc:  # any failed read is a finding to report, not a crash
            out[label] = f"error: {_message(exc)}"[:2000]
    out["seconds"] = round(time.monotonic() - started, 1)
    spark.stop()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The maintenance job of gc/maintain.py for platforms that schedule everything through
Spark: the same tables, options, report and exit status, but each compaction's file groups
are rewritten by Spark (``manifest_table.spark.compact``: on Spark's own Parquet path where
it can reach the table, see docs/spark.md) and committed once by the driver. Garbage collection runs on the driver, as it only lists and deletes objects.

    spark-submit --master yarn --deploy-mode client gc/maintain_spark.py ROOT_OR_TABLE_URI [options]

Options are gc/maintain.py's (``--help`` lists them). Executors need manifest_table
installed, and S3 credentials from their own environment or instance role.
"""

from __future__ import annotations

import sys

import maintain  # gc/maintain.py: Python puts this script's directory first on sys.path
from pyspark.sql import SparkSession

from manifest_table import CommitInfo, Table
from manifest_table.spark import compact


def main(argv: list[str] | None = None) -> int:
    spark = SparkSession.builder.appName("manifest_table maintenance").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # the report goes to stdout; keep stderr for problems

    def on_spark(table: Table, target_file_size: int | None, min_deleted_fraction: float) -> CommitInfo:
        return compact(spark, table.uri, target_file_size, min_deleted_fraction)

    try:
        return maintain.main(argv, compact=on_spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())

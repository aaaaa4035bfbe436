"""Spark integration: reads and writes on Spark's own Parquet path (``read``, ``write``), a
delete, an upsert, a compaction and a purge whose data work runs on Spark, the change feed
(``read_changes``), and the ``manifest_table`` Python data
source (batch reads and writes, streaming sink) for what the native path cannot reach.
Needs pyspark >= 4.1. See docs/spark.md."""

from __future__ import annotations

import warnings
from typing import Any

# pyspark 4.1 to 4.3 warn "PySpark does not yet fully support pandas >= 3.0.0" (a FutureWarning) when a
# session makes its first JVM call and again from each pandas or Arrow UDF (our deletes use mapInArrow),
# so every Spark run printed it (issue 23). What we run on Spark is tested with pandas 3: only that
# message is silenced, installed before any session exists since every Spark entry point imports this
# package (Python workers too, which unpickle our data source from it).
warnings.filterwarnings(
    "ignore", message=r"PySpark does not yet fully support pandas >= 3\.0\.0", category=FutureWarning
)

from .changes import read_changes  # noqa: E402
from .native_read import read  # noqa: E402
from .native_write import write  # noqa: E402
from .operations import compact, delete, purge  # noqa: E402
from .source import FORMAT_NAME, ManifestTableDataSource  # noqa: E402
from .upsert import upsert  # noqa: E402
from .workers import check_python_workers  # noqa: E402


def register(spark: Any) -> None:
    """Make ``format("manifest_table")`` available in ``spark`` (whose Python workers must be
    able to import this package: ``check_python_workers``)."""
    check_python_workers(spark)
    spark.dataSource.register(ManifestTableDataSource)


__all__ = [
    "FORMAT_NAME",
    "ManifestTableDataSource",
    "compact",
    "delete",
    "purge",
    "read",
    "read_changes",
    "register",
    "upsert",
    "write",
]

"""Spark integration: reads and writes on Spark's own Parquet path (``read``, ``write``), a
delete, an upsert and a compaction whose data work runs on Spark, and the ``manifest_table`` Python data
source (batch reads and writes, streaming sink) for what the native path cannot reach.
Needs pyspark >= 4.1. See docs/spark.md."""

from __future__ import annotations

from typing import Any

from .native_read import read
from .native_write import write
from .operations import compact, delete
from .source import FORMAT_NAME, ManifestTableDataSource
from .upsert import upsert


def register(spark: Any) -> None:
    """Make ``format("manifest_table")`` available in ``spark``."""
    spark.dataSource.register(ManifestTableDataSource)


__all__ = ["FORMAT_NAME", "ManifestTableDataSource", "compact", "delete", "read", "register", "upsert", "write"]

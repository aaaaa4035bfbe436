"""Spark integration: the ``manifest_table`` data source (batch reads and writes, streaming
sink) and table operations spread over executors. Needs pyspark >= 4.1. See docs/spark.md."""

from __future__ import annotations

from typing import Any

from .operations import compact, delete
from .source import FORMAT_NAME, ManifestTableDataSource


def register(spark: Any) -> None:
    """Make ``format("manifest_table")`` available in ``spark``."""
    spark.dataSource.register(ManifestTableDataSource)


__all__ = ["FORMAT_NAME", "ManifestTableDataSource", "compact", "delete", "register"]

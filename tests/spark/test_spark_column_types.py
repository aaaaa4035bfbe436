"""Spark reads every supported column type (tests/column_types.py) of a table whose files sit
in segments and have deletes, natively (``manifest_table.spark.read``) and through the data
source, with the values the Python API reads, as Spark maps them (docs/spark.md, "Types"):
unsigned integers, 64-bit dates and 32-bit times widened, nanosecond timestamps and
durations at Spark's microsecond precision."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.spark import read
from manifest_table.spark.schema import native_readable
from tests.column_types import SUPPORTED, values

pytest_plugins = ["tests.spark.fixtures"]


def at_spark_precision(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` as Spark holds it: nanosecond timestamps and durations truncated to
    microseconds (Spark's times keep nanoseconds)."""
    dtype = column.type
    if not (pa.types.is_timestamp(dtype) or pa.types.is_duration(dtype)) or dtype.unit != "ns":
        return column
    micro = pa.timestamp("us", dtype.tz) if pa.types.is_timestamp(dtype) else pa.duration("us")
    return column.cast(micro, safe=False).cast(dtype)


@pytest.mark.parametrize("path", ["native", "data source"])
def test_spark_reads_every_supported_type(spark, tmp_path: Path, path: str) -> None:
    """One table per path, a column per type (a Spark read costs seconds, a column nothing):
    for the native path the types Spark's Parquet reader reads as the data source does
    (``native_readable``; the others make ``read`` fall back to the data source), for the
    data source every supported type."""
    types = {name: t for name, t in SUPPORTED.items() if path == "data source" or native_readable(t)}
    schema = pa.schema([("id", pa.int64())] + [(name, t) for name, t in types.items()])
    table = mt.create_table(str(tmp_path / "t"), schema, properties={"tail_limit": 1})
    expected = pa.table([pa.array(range(5), pa.int64())] + [
        pa.concat_arrays([values(t, range(4)), pa.nulls(1, t)]) for t in types.values()], schema=schema)
    for start in range(0, 5, 2):
        table.append(expected.slice(start, 2))
    table.delete("id = 1")
    assert table.manifest().index.segments
    expected = expected.filter(pa.array([i != 1 for i in range(5)]))
    frame = read(spark, table.uri) if path == "native" else spark.read.format("manifest_table").load(table.uri)
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert ("FileScan parquet" in plan) == (path == "native"), plan
    got = frame.toArrow().sort_by("id")
    assert got.column("id").to_pylist() == [0, 2, 3, 4]
    wrong = {name: (got.schema.field(name).type, got.column(name).to_pylist()) for name, t in types.items()
             if not got.column(name).cast(t).equals(at_spark_precision(expected.column(name)))}
    assert not wrong, wrong

"""A Spark driver for tests/spark/test_spark_stream_kill.py, run as a process of its own so
that the test can kill it (``python -m tests.spark.stream_driver SOURCE SINK CHECKPOINT``):
a streaming query from the table at SOURCE into the table at SINK, checkpointed at CHECKPOINT,
reading one file per micro-batch until killed, printing ``started`` once the query runs. The
test catches up with the same query (``stream_query``) in its own session."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from manifest_table.spark import register


def stream_query(spark: Any, source: str, sink: str, checkpoint: str, catch_up: bool = False) -> Any:
    """The query from ``source`` into ``sink``, started: one file per micro-batch until
    stopped, or (``catch_up``) everything committed so far, then it stops."""
    stream = spark.readStream.format("manifest_table")
    if not catch_up:
        stream = stream.option("maxFilesPerTrigger", "1")
    writer = stream.load(source).writeStream.format("manifest_table").option("checkpointLocation", checkpoint)
    return writer.trigger(availableNow=True).start(sink) if catch_up else writer.start(sink)


def main(source: str, sink: str, checkpoint: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("stream driver")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    query = stream_query(spark, source, sink, checkpoint)
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""A Spark driver for tests/spark/test_spark_stream_kill.py, run as a process of its own so
that the test can kill it (``python -m tests.spark.stream_driver SOURCE SINK CHECKPOINT MODE``):
a streaming query from the table at SOURCE into the table at SINK, checkpointed at CHECKPOINT.
MODE ``run`` reads one file per micro-batch until killed, printing ``started`` once the query
runs; ``catch-up`` reads everything committed so far and exits."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from manifest_table.spark import register


def main(source: str, sink: str, checkpoint: str, mode: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("stream driver")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    stream = spark.readStream.format("manifest_table")
    if mode == "run":
        stream = stream.option("maxFilesPerTrigger", "1")
    writer = stream.load(source).writeStream.format("manifest_table").option("checkpointLocation", checkpoint)
    query = writer.trigger(availableNow=True).start(sink) if mode == "catch-up" else writer.start(sink)
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])

"""pyspark's "PySpark does not yet fully support pandas >= 3.0.0" FutureWarning, which every
Spark run printed (issue 23, item 8), is silenced by ``manifest_table.spark`` for that message
only. Checked in a fresh process: pytest restores the warning filters after collecting, so
the suite's own session cannot show what a user's program prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("pyspark")

PROGRAM = """
import os, sys, warnings
import pyarrow as pa
import manifest_table as mt
from manifest_table.spark import delete, read
from pyspark.sql import SparkSession

os.environ["PYSPARK_PYTHON"] = sys.executable
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
t = mt.create_table(sys.argv[1], pa.schema([("id", pa.int64())]))
t.append(pa.table({"id": [1, 2, 3]}))
print(len(read(spark, t.uri).toPandas()))   # a Spark read, to pandas
delete(spark, t.uri, "id = 2")              # mapInArrow: an Arrow UDF
print(t.scan().count())
warnings.warn("another", FutureWarning)     # other warnings still show
spark.stop()
"""


@pytest.mark.skipif(int(pd.__version__.split(".")[0]) < 3, reason="pyspark warns with pandas >= 3 only")
def test_a_spark_program_prints_no_pandas_version_warning(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "t")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["3", "2"]
    assert "does not yet fully support pandas" not in done.stderr
    assert "FutureWarning: another" in done.stderr

"""End-to-end exactly-once from our streaming source into our sink across drivers killed at
random points (SIGKILL to the driver's whole process group: Python, the JVM, its workers),
while a writer keeps appending to the source and compacting it. Then the test's own Spark
session catches up from the same checkpoint, and the sink holds every row of the source
exactly once.

Each kill waits for the sink to gain a version after the driver started, then a random delay
(so kills land before, inside and after batch commits). ``MT_SPARK_STREAM_KILLS`` (default 1)
sets how many drivers are killed (each costs a driver start, about 10 s on a quiet machine);
``MT_SPARK_STREAM_SEED`` the random seed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import TableNotFoundError

pytest.importorskip("pyspark")

from tests.spark.stream_driver import stream_query

pytest_plugins = ["tests.spark.fixtures"]

KILLS = int(os.environ.get("MT_SPARK_STREAM_KILLS", "1"))
SEED = int(os.environ.get("MT_SPARK_STREAM_SEED", str(random.randrange(10**6))))
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(start: int, stop: int) -> pa.Table:
    return pa.table({"id": list(range(start, stop)), "v": [f"v{i}" for i in range(start, stop)]}, schema=SCHEMA)


class Appender(threading.Thread):
    """Appends 10 rows every ~0.45 s (a compaction now and then) until stopped."""

    def __init__(self, table: mt.Table, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.table, self.rng, self.next_id = table, rng, 0
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.done.wait(self.rng.uniform(0.1, 0.8)):
                self.table.append(rows(self.next_id, self.next_id + 10))
                self.next_id += 10
                if self.rng.random() < 0.1:
                    self.table.compact()
        except BaseException as error:  # reported by the test
            self.error = error


def driver(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests.spark.stream_driver", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=log.open("ab"), text=True, start_new_session=True)


def version_of(uri: str) -> int:
    """The table's latest version; -1 before the sink's first commit creates it."""
    try:
        return mt.open_table(uri).version
    except TableNotFoundError:
        return -1


def wait_for(condition, seconds: float, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the driver exited with {process.returncode} before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)


@pytest.mark.timeout(900)
def test_exactly_once_across_killed_drivers(spark, tmp_path: Path):
    rng = random.Random(SEED)
    print(f"MT_SPARK_STREAM_SEED={SEED}")
    source = mt.create_table(str(tmp_path / "source"), SCHEMA)
    sink, checkpoint, log = tmp_path / "sink", tmp_path / "checkpoint", tmp_path / "drivers.log"
    args = [source.uri, str(sink), str(checkpoint)]
    appender = Appender(source, rng)
    appender.start()
    try:
        for _ in range(KILLS):
            before = version_of(str(sink))
            process = driver(args, log)
            try:
                assert process.stdout is not None and process.stdout.readline().strip() == "started"
                wait_for(lambda before=before: version_of(str(sink)) > before, 300,
                         "micro-batch committed", process)
                time.sleep(rng.uniform(0, 1.5))
            finally:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    finally:
        appender.done.set()
        appender.join()
    assert appender.error is None, appender.error
    stream_query(spark, *args, catch_up=True).awaitTermination(600)
    got = mt.open_table(str(sink)).to_arrow().column("id").to_pylist()
    assert sorted(got) == list(range(appender.next_id)), f"seed {SEED}"

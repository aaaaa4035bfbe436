"""Spark's Python workers must be able to import this package: the data source, a delete's
filter (``mapInArrow``) and compaction's tasks run in them. Spark starts them with the
interpreter ``PYSPARK_PYTHON`` named when the session started (default ``python3`` on the
``PATH``); one without ``manifest_table`` fails only once the job runs, with a hundred lines
ending in ``ModuleNotFoundError``. ``check_python_workers`` tries that interpreter first, on
the driver, and says what to set.

It can only look where the workers run on this machine: a local master. On a cluster the
interpreter is on the executors' machines, and over Spark Connect on the server's."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..errors import InvalidArgumentError

_checked: set[str] = set()
"""Interpreters found able to import the package, so each is tried once per process."""


def check_python_workers(spark: Any) -> None:
    """Raise ``InvalidArgumentError`` before any job starts when the workers of ``spark`` (a
    local session) would start a Python that cannot import ``manifest_table``."""
    python = _local_worker_python(spark)
    if python is None or python in _checked:
        return
    problem = _import_problem(python)
    if problem is None:
        _checked.add(python)
        return
    raise InvalidArgumentError(
        f"Spark starts its Python workers with {python!r}, which cannot import manifest_table "
        f"({problem}): set PYSPARK_PYTHON to a Python that has it installed (this one: "
        "os.environ['PYSPARK_PYTHON'] = sys.executable) before the Spark session starts, or "
        "the session's spark.pyspark.python"
    )


def _local_worker_python(spark: Any) -> str | None:
    """The interpreter a local classic session starts its workers with; None when the workers
    are elsewhere (a cluster, Spark Connect)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext on the client
        return None
    if not str(context.master).startswith("local"):
        return None
    return str(context.pythonExec)


def _import_problem(python: str) -> str | None:
    """Why ``python`` cannot import the package's Spark part, what the workers unpickle
    (None: it can), tried in this process's environment and directory, which local workers
    inherit."""
    found = shutil.which(python)
    if found is None:
        return "no such program"
    try:
        done = subprocess.run(
            [found, "-c", "import manifest_table.spark"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"it does not start: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"

"""Differential read-path test (issue 18): every read path returns the model's rows, at every
retained version of random tables built by random histories.

A case is one seed: a random schema over the types of tests/differential_types.py (nested
ones, decimals, timestamps of every unit with and without a zone, unsigned and float32
columns, awkward Unicode, nulls, NaN, -0.0, the issue-24 types), one of four table flavours
(format v1, which the history may upgrade; format v2 with tiny limits so that files sit in
segments and segments merge; format v2 with default limits; a database's table with tiny
limits, next to another table that database transactions and commits of its own also write),
small files and row groups, and
a random history (tests/differential_history.py) kept in a pyarrow model with DuckDB as the
SQL oracle (tests/differential_model.py). Then every retained version is read from fresh
handles through every path (tests/differential_reads.py): the scan's `to_arrow`,
`to_batches`, `to_reader`, `pa.table(scan)`, `to_pandas` and `count`, the `manifest-table
count` command (which answers from the manifest without pyarrow), `to_duckdb` (also with
the table under an `id=7/` directory), `to_polars` (a Polars predicate and projection pushed
down), the writer's handle, time travel by `as_of`; then random filters (tests/
filter_generator.py, with fractional and out-of-range literals) through the scan, its count
and one other path in turn. Transaction scans and the rows each delete, update and upsert
change are checked during the history. Then the change feed between retained versions is
compared with the model's row-level difference of each commit (tests/differential_changes.py,
issue 33). The Spark sample is tests/spark/test_differential_spark.py.

Seeded `random.Random`, not hypothesis: a case is a whole table, a history and about two
hundred reads (one to three seconds), and its failures are in read paths, not in a small
input to minimise. Hypothesis would replay a failure only through its example database or a
`@reproduce_failure` blob tied to its version, and its shrinking would re-run whole
histories hundreds of times; a seed replays one case exactly anywhere, and the test shrinks
what is cheap to shrink itself: the history ends at the failing step, and a failing filter
is reduced to its smallest failing part (`Checker._shrink`).

Environment (all optional):
- `MT_DIFF_CASES` (default 28: 7 of each layout): cases per run; `MT_DIFF_SECONDS`: keep running new cases
  until that many seconds have passed (a soak; at least `MT_DIFF_CASES` cases).
- `MT_DIFF_DB_CASES` (default 6): cases of the second test, on a database's table (issue 28):
  created by `mt.create_table("DB/t")`, written through its handle, `db.table`,
  `mt.open_table("DB/t")`, `mt.write_table` and database transactions that also write another
  table, between commits to other tables and catalog changes; read through every path, plus a
  snapshot of the database at each version (`db.snapshot(version=v).table("t")`).
- `MT_DIFF_SEED` (default 18, so that CI runs the same cases every time): case k of a run
  has seed `MT_DIFF_SEED + k`, so a failure's seed replays alone with
  `MT_DIFF_SEED=<seed> MT_DIFF_CASES=1`. `MT_DIFF_SEED=random` picks one (printed with the
  run's size and time, and named in every failure).
- `MT_DIFF_STEPS` (default 12) steps per history, `MT_DIFF_FILTERS` (default 3) random
  filters per version.
- `MT_DIFF_CHANGES` (default 4): ranges of versions whose change feed is compared, per case,
  besides (oldest retained, latest), one commit alone and an expired start; `all`: every
  pair of retained versions.
- `MT_DIFF_SKIP_KINDS`: comma-separated labels of tests/differential_types.py to leave out
  (`timestamp[s],timestamp[s]+tz,date64`), to look past a known bug; a replay needs the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("polars")

from tests.differential_cases import SECONDS, SEED, TIMEOUT, Outcome, run_case, run_cases
from tests.differential_history import FLAVORS
from tests.differential_reads import Checker
from tests.differential_types import KINDS, Shape

CASES = int(os.environ.get("MT_DIFF_CASES", "28"))
DB_CASES = int(os.environ.get("MT_DIFF_DB_CASES", "6"))
STEPS = int(os.environ.get("MT_DIFF_STEPS", "12"))
FILTERS = int(os.environ.get("MT_DIFF_FILTERS", "3"))
pytestmark = TIMEOUT


def test_every_read_path_returns_the_model_rows(tmp_path: Path) -> None:
    def run(seed: int, directory: Path) -> Outcome:
        return run_case(seed, directory, Shape(KINDS), STEPS,
                        lambda uri, hive, oracle, writer, rng: Checker(uri, hive, oracle, writer, rng, FILTERS),
                        changes=True, flavors=tuple(FLAVORS))
    replay = "MT_DIFF_SEED={seed} MT_DIFF_CASES=1 .venv/bin/python -m pytest -q -p no:cacheprovider " \
             "tests/reads/test_differential.py -k 'not database'"
    run_cases(SEED, CASES, SECONDS, run, tmp_path, replay, "differential")


def test_every_read_path_returns_the_model_rows_of_a_database_table(tmp_path: Path) -> None:
    """The same cases on table ``t`` of a database (issue 28)."""
    def run(seed: int, directory: Path) -> Outcome:
        return run_case(seed, directory, Shape(KINDS), STEPS,
                        lambda uri, hive, oracle, writer, rng: Checker(uri, hive, oracle, writer, rng, FILTERS),
                        changes=True, flavors=("db",))
    replay = "MT_DIFF_SEED={seed} MT_DIFF_DB_CASES=1 .venv/bin/python -m pytest -q -p no:cacheprovider " \
             "tests/reads/test_differential.py -k database"
    run_cases(SEED, DB_CASES, SECONDS, run, tmp_path, replay, "differential, database tables")

"""One case of the differential read-path test: a table made from a seed, a random history
on it, then every retained version read by a checker (tests/differential_reads.py, or the
Spark sample's). Shared by tests/reads/test_differential.py and tests/spark/test_differential_spark.py."""

from __future__ import annotations

import os
import random
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.data import point_reads
from manifest_table.format.bloom_filter import probed_type
from tests.differential_changes import check_changes
from tests.differential_history import FLAVORS, OTHER, STEPS, History, Step, run_history
from tests.differential_model import BEFORE, Oracle, State
from tests.differential_reads import Failure, shorter
from tests.differential_types import SKIPPED, Column, Shape, random_columns

TABLE_FLAVORS = ("v1", "v2-tiny", "v2")
"""The flavors of a table of its own (``FLAVORS`` adds "db", a database's table)."""
SECONDS = float(os.environ.get("MT_DIFF_SECONDS", "0"))
# A soak outlives the suite's 10-minute limit per test (pyproject.toml): it ends by its own clock.
TIMEOUT = pytest.mark.timeout(600 + int(SECONDS) * 2)
_seed = os.environ.get("MT_DIFF_SEED", "18")
SEED = random.randrange(10**9) if _seed == "random" else int(_seed)
"""The first case's seed (the rest follow it); printed with every run and failure."""


@dataclass(frozen=True)
class Case:
    seed: int
    flavor: str
    options: dict
    columns: list[Column]

    @property
    def paged(self) -> bool:
        """Odd seeds read every filtered scan in two steps (data/point_reads.py), whatever the
        size of its row groups: the filter's columns, then the others page by page at the
        matching positions. Even seeds keep the threshold, so small row groups read whole."""
        return self.seed % 2 == 1

    def describe(self) -> str:
        columns = ", ".join(f"{c.name!r} {c.type}{'' if c.nullable else ' not null'}" for c in self.columns)
        reads = ", filtered reads page by page" if self.paged else ""
        return f"{self.flavor} table, options {self.options}{reads}, columns: {columns}"


def make_case(seed: int, rng: random.Random, shape: Shape, flavors: Sequence[str] = TABLE_FLAVORS) -> Case:
    """Five kinds in turn (consecutive seeds walk the whole list) and two at random; the
    flavors in turn; on format v2, half the tables keep bloom filters of one or two columns."""
    kinds = shape.kinds
    start = seed * 5 % len(kinds)
    chosen = [kinds[(start + n) % len(kinds)] for n in range(5)] + rng.sample(kinds, 2)
    rng.shuffle(chosen)
    flavor = flavors[seed % len(flavors)]
    options = dict(FLAVORS[flavor])
    for name, sizes in (("target_file_size", [1_500, 8_000, None]), ("row_group_size", [512, 4_000, None])):
        size = rng.choice(sizes)
        if size is not None:
            options[name] = size
    columns = random_columns(rng, chosen, shape)
    probed = [c.name for c in columns if probed_type(c.type)]
    if flavor != "v1" and probed and rng.random() < 0.5:  # row groups pruned by bloom filters
        blooms = rng.sample(probed, rng.randint(1, min(2, len(probed))))
        options["properties"] = {**options.get("properties", {}), "bloom_filter_columns": blooms}
    return Case(seed, flavor, options, columns)


@dataclass
class Outcome:
    case: Case
    steps: list[str]
    versions: int
    reads: int
    failures: list[Failure] = field(default_factory=list)
    feeds: int = 0
    """Change feeds read and compared with the model."""

    def report(self, replay: str) -> str:
        """``replay``: the command that runs one case, with ``{seed}`` for its seed."""
        if SKIPPED:
            replay = f"MT_DIFF_SKIP_KINDS={','.join(sorted(SKIPPED))!r} " + replay
        lines = [f"case seed {self.case.seed}: {self.case.describe()}", "history:"]
        lines += [f"  {step}" for step in self.steps] or ["  (none)"]
        lines += ["failures:"] + [f"  - {f}" for f in self.failures]
        lines.append("replay: " + replay.format(seed=self.case.seed))
        return "\n".join(lines)


class Checker(Protocol):
    failures: list[Failure]
    reads: int

    def version(self, version: int, state: State | None, as_of: Any, damaged: bool) -> None: ...

    def close(self) -> None: ...


CheckerFactory = Callable[[str, str, Oracle, Any, random.Random], Checker]
"""(uri, uri under an id=7/ directory, oracle, the writer's handle, rng) -> a checker."""


def run_case(
    seed: int,
    directory: Path,
    shape: Shape,
    steps: int,
    checker: CheckerFactory,
    choices: Iterable[Step] = STEPS,
    changes: bool = False,
    flavors: Sequence[str] = TABLE_FLAVORS,
) -> Outcome:
    """Make the case of ``seed``, run ``steps`` history steps of ``choices``, then check every
    version (and, with ``changes``, the change feed between them: tests/differential_changes.py)."""
    rng = random.Random(seed)
    case = make_case(seed, rng, shape, flavors)
    with pytest.MonkeyPatch.context() as patch:
        if case.paged:
            patch.setattr(point_reads, "LARGE_GROUP_ROWS", 0)
        return _run_case(case, rng, directory, shape, steps, checker, choices, changes)


def _run_case(
    case: Case,
    rng: random.Random,
    directory: Path,
    shape: Shape,
    steps: int,
    checker: CheckerFactory,
    choices: Iterable[Step],
    changes: bool,
) -> Outcome:
    root = directory / "tables" / "t"
    hive = directory / "id=7" / "t"  # DuckDB must not read id=7 from the path (issue 18 item 3)
    hive.parent.mkdir(parents=True)
    oracle = Oracle()
    failures: list[Failure] = []
    empty = State.empty(case.columns, 1 if case.flavor == "v1" else 2)
    try:
        history = _history(case, root, hive, empty, oracle, shape)
    except Exception as error:
        oracle.close()
        return Outcome(case, [], 0, 0, [Failure("create_table", raised(error))])
    try:
        run_history(history, rng, steps, choices)
    except Exception as error:  # the step's error or failed check ends the history; reads still run
        failures.append(Failure(f"step {history.steps[-1] if history.steps else '?'}", raised(error)))
    failures += [Failure("history", problem) for problem in history.problems]
    hive_uri = str(hive) + history.uri[len(str(root)) :]  # (a database's table: <root>/t)
    reader = checker(history.uri, hive_uri, oracle, history.table, rng)
    feeds = 0
    try:
        committed = {info.version: info.timestamp for info in history.table.history()}
        for version, state in enumerate(history.versions):  # (a database's version 0: BEFORE the table)
            reader.version(version, state, _as_of(committed, history.versions, version), version in history.damaged)
    except Exception as error:
        failures.append(Failure("reading the history", raised(error)))
    try:
        if changes:
            found, feeds = check_changes(history, rng)
            failures += found
    except Exception as error:
        failures.append(Failure("reading the changes", raised(error)))
    finally:
        reader.close()
        oracle.close()
    return Outcome(case, history.steps, len(history.versions), reader.reads, failures + reader.failures, feeds)


def _history(case: Case, root: Path, hive: Path, empty: State, oracle: Oracle, shape: Shape) -> History:
    """A new table and the history's start: a table at ``root`` (version 0), or table "t" of a
    database there (flavor "db": the table is version 1, and version 2 creates "other").
    ``hive`` links to ``root``'s directory from under ``id=7/``."""
    schema = pa.schema([c.field for c in case.columns])
    if case.flavor != "db":
        table = mt.create_table(str(root), schema, **case.options)
        hive.symlink_to(root, target_is_directory=True)
        return History(str(root), table, oracle, [empty], shape.kinds)
    db = mt.create_database(str(root))
    table = mt.create_table(f"{db.uri}/t", schema, **case.options)  # DB_URI/TABLE: created in the database
    db.create_table("other", OTHER)
    hive.symlink_to(root, target_is_directory=True)
    return History(f"{db.uri}/t", table, oracle, [BEFORE, empty, empty], shape.kinds, database=db, first=1)


def raised(error: Exception) -> str:
    """The error and where it was raised (the library, or the test's own model)."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"raised {type(error).__name__}: {shorter(str(error))} (at {Path(frame.filename).name}:{frame.lineno})"


def _as_of(committed: dict, versions: list[State | None], version: int) -> tuple | None:
    """(the commit time of ``version``, the version current then) unless that one is expired."""
    if version not in committed:
        return None
    moment = committed[version]
    current = max(v for v, t in committed.items() if t <= moment)
    return (moment, current) if current < len(versions) and versions[current] not in (None, BEFORE) else None


def run_cases(
    first_seed: int,
    cases: int,
    seconds: float,
    run: Callable[[int, Path], Outcome],
    directory: Path,
    replay: str,
    name: str,
) -> None:
    """Cases ``first_seed``, ``first_seed + 1``, ... until ``cases`` ran and ``seconds`` have
    passed; print the size and time of the run and fail with every failing case's report."""
    started = time.process_time(), time.monotonic()
    outcomes: list[Outcome] = []
    while len(outcomes) < cases or time.monotonic() - started[1] < seconds:
        outcomes.append(run(first_seed + len(outcomes), directory / f"case{len(outcomes)}"))
    failed = [o for o in outcomes if o.failures]
    summary = (
        f"{name}: seeds {first_seed}..{first_seed + len(outcomes) - 1}, {len(outcomes)} cases "
        f"({sum(o.case.flavor == 'v1' for o in outcomes)} v1, {sum(o.case.flavor == 'db' for o in outcomes)} db), "
        f"{sum(o.versions for o in outcomes)} versions, "
        f"{sum(o.reads for o in outcomes)} reads, {sum(o.feeds for o in outcomes)} change feeds, "
        f"{len(failed)} cases failed, "
        f"{time.process_time() - started[0]:.0f} s CPU, {time.monotonic() - started[1]:.0f} s"
    )
    print(summary)
    assert not failed, summary + "\n\n" + "\n\n".join(o.report(replay) for o in failed)

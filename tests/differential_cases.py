"""One case of the differential read-path test: a table made from a seed, a random history
on it, then every retained version read by a checker (tests/differential_reads.py, or the
Spark sample's). Shared by tests/test_differential.py and tests/spark/test_differential_spark.py."""

from __future__ import annotations

import os
import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

import pyarrow as pa
import pytest

import manifest_table as mt
from tests.differential_history import FLAVORS, STEPS, History, Step, run_history
from tests.differential_model import Oracle, State
from tests.differential_reads import Failure, shorter
from tests.differential_types import SKIPPED, Column, Shape, random_columns


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

    def describe(self) -> str:
        columns = ", ".join(f"{c.name!r} {c.type}{'' if c.nullable else ' not null'}" for c in self.columns)
        return f"{self.flavor} table, options {self.options}, columns: {columns}"


def make_case(seed: int, rng: random.Random, shape: Shape) -> Case:
    """Five kinds in turn (consecutive seeds walk the whole list) and two at random."""
    kinds = shape.kinds
    start = seed * 5 % len(kinds)
    chosen = [kinds[(start + n) % len(kinds)] for n in range(5)] + rng.sample(kinds, 2)
    rng.shuffle(chosen)
    flavor = list(FLAVORS)[seed % len(FLAVORS)]
    options = dict(FLAVORS[flavor])
    for name, sizes in (("target_file_size", [1_500, 8_000, None]), ("row_group_size", [512, 4_000, None])):
        size = rng.choice(sizes)
        if size is not None:
            options[name] = size
    return Case(seed, flavor, options, random_columns(rng, chosen, shape))


@dataclass
class Outcome:
    case: Case
    steps: list[str]
    versions: int
    reads: int
    failures: list[Failure] = field(default_factory=list)

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

    def version(self, version: int, state: State | None, as_of: Any) -> None: ...

    def close(self) -> None: ...


CheckerFactory = Callable[[str, str, Oracle, Any, random.Random], Checker]
"""(uri, uri under an id=7/ directory, oracle, the writer's handle, rng) -> a checker."""


def run_case(seed: int, directory: Path, shape: Shape, steps: int, checker: CheckerFactory,
             choices: Iterable[Step] = STEPS) -> Outcome:
    """Make the case of ``seed``, run ``steps`` history steps of ``choices``, then check every
    version."""
    rng = random.Random(seed)
    case = make_case(seed, rng, shape)
    root = directory / "tables" / "t"
    hive = directory / "id=7" / "t"  # DuckDB must not read id=7 from the path (issue 18 item 3)
    hive.parent.mkdir(parents=True)
    oracle = Oracle()
    failures: list[Failure] = []
    try:
        table = mt.create_table(str(root), pa.schema([c.field for c in case.columns]), **case.options)
    except Exception as error:
        oracle.close()
        return Outcome(case, [], 0, 0, [Failure("create_table", raised(error))])
    hive.symlink_to(root, target_is_directory=True)
    history = History(str(root), table, oracle, [State.empty(case.columns, 1 if case.flavor == "v1" else 2)],
                      shape.kinds)
    try:
        run_history(history, rng, steps, choices)
    except Exception as error:  # the step's error or failed check ends the history; reads still run
        failures.append(Failure(f"step {history.steps[-1] if history.steps else '?'}", raised(error)))
    failures += [Failure("history", problem) for problem in history.problems]
    reader = checker(str(root), str(hive), oracle, table, rng)
    try:
        committed = {info.version: info.timestamp for info in table.history()}
        for version, state in enumerate(history.versions):
            reader.version(version, state, _as_of(committed, history.versions, version), version in history.damaged)
    except Exception as error:
        failures.append(Failure("reading the history", raised(error)))
    finally:
        reader.close()
        oracle.close()
    return Outcome(case, history.steps, len(history.versions), reader.reads, failures + reader.failures)


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
    return (moment, current) if current < len(versions) and versions[current] is not None else None


def run_cases(first_seed: int, cases: int, seconds: float, run: Callable[[int, Path], Outcome], directory: Path,
              replay: str, name: str) -> None:
    """Cases ``first_seed``, ``first_seed + 1``, ... until ``cases`` ran and ``seconds`` have
    passed; print the size and time of the run and fail with every failing case's report."""
    started = time.process_time(), time.monotonic()
    outcomes: list[Outcome] = []
    while len(outcomes) < cases or time.monotonic() - started[1] < seconds:
        outcomes.append(run(first_seed + len(outcomes), directory / f"case{len(outcomes)}"))
    failed = [o for o in outcomes if o.failures]
    summary = (f"{name}: seeds {first_seed}..{first_seed + len(outcomes) - 1}, {len(outcomes)} cases "
               f"({sum(o.case.flavor == 'v1' for o in outcomes)} v1), {sum(o.versions for o in outcomes)} versions, "
               f"{sum(o.reads for o in outcomes)} reads, {len(failed)} cases failed, "
               f"{time.process_time() - started[0]:.0f} s CPU, {time.monotonic() - started[1]:.0f} s")
    print(summary)
    assert not failed, summary + "\n\n" + "\n\n".join(o.report(replay) for o in failed)

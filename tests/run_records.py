"""A record of every run's failures, kept outside the checkout: CI runs the suite on a fresh
clone and deletes it afterwards, and a failure that a second run does not repeat (a timing,
a random draw) must still be readable by whoever looks next.

``$MT_RUN_RECORDS`` (default ``~/.cache/manifest_table/runs``) gets a line per run in
``runs.log`` (start, commit, outcome, counts) and, for a run with failures, a file of their
reports with what each printed; the newest ``KEEP`` such files are kept."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

KEEP = 20
ROOT = Path(os.environ.get("MT_RUN_RECORDS", Path.home() / ".cache" / "manifest_table" / "runs"))


class RunRecord:
    """The record of one run: a pytest plugin registered when the run is configured."""

    def __init__(self, checkout: Path) -> None:
        self.started = time.strftime("%Y%m%dT%H%M%S")
        self.began = time.monotonic()
        self.commit = _commit(checkout)
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._add(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._add(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._write(int(exitstatus))

    def _add(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.when == "call" or report.skipped:
            self.outcomes["xfailed" if hasattr(report, "wasxfail") else report.outcome] += 1
        elif report.failed:
            self.outcomes[f"errors in {report.when}"] += 1
        if report.failed:
            sections = "".join(f"\n--- {name}\n{text}" for name, text in report.sections)
            self.failures.append(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}{sections}\n")

    def _write(self, exitstatus: int) -> None:
        try:
            ROOT.mkdir(parents=True, exist_ok=True)
            counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items()))
            line = f"{self.started} {self.commit} exit {exitstatus} {time.monotonic() - self.began:.0f} s: {counts}"
            if self.failures:
                path = ROOT / f"failures-{self.started}-{os.getpid()}.txt"
                path.write_text(line + "\n\n" + "".join(self.failures))
                line += f" -> {path.name}"
                for old in sorted(ROOT.glob("failures-*.txt"))[:-KEEP]:
                    old.unlink(missing_ok=True)
            with (ROOT / "runs.log").open("a") as log:
                log.write(line + "\n")
        except OSError:  # a read-only home: the run's own output still says everything
            pass


def _commit(checkout: Path) -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RunRecord(Path(config.rootpath)), "run-records")

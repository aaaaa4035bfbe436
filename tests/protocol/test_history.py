"""The black-box history checker (tests/history/): writer processes run identifiable
transactions over a table and a database while faults are injected (503/412/409 storms, lost
responses of writes that landed, SIGSTOP past the grace, SIGKILL) and GC runs on a clock 10
minutes off; the checker must find no anomaly, on a local directory and on SeaweedFS,
fake-gcs-server and Azurite. And it must find each class of anomaly when there is one.

Bounded here (``MT_HISTORY_SECONDS``, default 3 s of writing per store); a soak runs
``MT_HISTORY_TRANSACTIONS`` transactions per store instead (docs/protocol.md), or
``python -m tests.history.run --transactions 100000``."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

import manifest_table as mt
from manifest_table.testing import CONFLICT, TIMEOUT, TRANSIENT, FaultStorm
from tests.conftest import store_location
from tests.history.checker import check
from tests.history.run import Settings, run
from tests.history.workload import Target

SECONDS = float(os.environ.get("MT_HISTORY_SECONDS", "3"))
TRANSACTIONS = int(os.environ.get("MT_HISTORY_TRANSACTIONS", "0")) or None
FAULTS = (TRANSIENT, TIMEOUT, CONFLICT, "SIGSTOP past the grace", "SIGKILL")
"""Every kind of fault each run injects (run.py starts with a SIGKILL and a SIGSTOP)."""


@pytest.mark.parametrize("kind", ["local", "seaweedfs", "gcs", "azure"])
def test_histories_under_faults_have_no_anomalies(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    root, options = (str(tmp_path / "history"), None) if kind == "local" else store_location(kind, request)
    report = run(root, options, tmp_path, Settings(seconds=SECONDS, transactions=TRANSACTIONS, seed=7, least=20))
    print(f"{kind}: {report}")
    assert report.transactions >= 10 and report.outcomes["ok"] >= 5, str(report)
    assert set(FAULTS) <= set(report.faults), str(report)
    assert not report.anomalies, str(report)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Target, Path]:
    """A short clean history to tamper with."""
    where = tmp_path_factory.mktemp("history")
    report = run(str(where / "h"), None, where, Settings(processes=2, seconds=3, fault_rate=0, pause_every=60, seed=3))
    assert not report.anomalies and report.outcomes["ok"] >= 8, str(report)
    return Target.under(str(where / "h"), None), where


def tampered(history: tuple[Target, Path], tmp_path: Path, change) -> tuple[Target, list[Path]]:  # type: ignore[no-untyped-def]
    """A copy of the history (logs and tables) with ``change(lines, root)`` applied."""
    target, where = history
    shutil.copytree(where / "h", tmp_path / "h")
    lines = [json.loads(line) for log in sorted(where.glob("writer-*.jsonl")) for line in log.read_text().splitlines()]
    change(lines, tmp_path / "h")
    log = tmp_path / "writer-0.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return Target.under(str(tmp_path / "h"), None), [log]


def _first(lines: list[dict], **match: object) -> dict:
    return next(line for line in lines if all(line.get(k) == v for k, v in match.items()))


ANOMALIES = ["lost acknowledged commit", "aborted read", "lost update", "dirty read", "unreadable version",
             "partial or wrong commit", "cycle", "invalid request"]


def test_the_checker_finds_each_class_of_anomaly(history: tuple[Target, Path], tmp_path: Path) -> None:
    """One of each, made in a copy of a clean history (its logs, or its tables)."""
    def change(lines: list[dict], root: Path) -> None:
        ops = {line["txn"]: line["op"] for line in lines if line.get("phase") == "begin"}
        appends = [line for line in lines if line.get("outcome") == "ok" and ops[line["txn"]] == "s.append"]
        appends[0]["version"] += 1000  # lost acknowledged commit: acknowledged at a version that holds another
        appends[1]["outcome"] = "failed"  # aborted read: a failed transaction is in a version
        intent = _first(lines, phase="intent", txn=appends[2]["txn"])
        intent["effect"]["s"]["put"][0][1] += 1  # partial or wrong commit: the version's rows are not its effect
        lines.append({"txn": "p9.1", "phase": "begin", "op": "s.increment"})  # lost update: an acknowledged
        lines.append({"txn": "p9.1", "phase": "intent", "snapshot": 0, "effect": {"s": {"increment": [0]}}})
        lines.append({"txn": "p9.1", "phase": "end", "outcome": "ok", "version": 0})  # increment no version holds
        lines.append({"txn": "p9.2", "phase": "begin", "op": "s.overwrite"})  # invalid request: the workload's mistake
        lines.append({"txn": "p9.2", "phase": "end", "outcome": "invalid", "error": "InvalidArgumentError: ..."})
        read = next(line for line in lines if "s" in line.get("observed", {}))
        read["observed"]["s"][1] = "0" * 16  # dirty read: a read saw rows its version never held
        committed = {line["txn"]: line["version"] for line in lines  # (not p9.1, added above)
                     if line.get("phase") == "end" and line.get("outcome") == "ok" and line["txn"] != "p9.1"}
        increments = sorted((line for line in lines if line.get("phase") == "intent" and line["txn"] in committed
                             and line["effect"].get("s", {}).get("increment")), key=lambda line: committed[line["txn"]])
        increments[1]["effect"]["s"] = dict(increments[0]["effect"]["s"])  # cycle: it read what another increment,
        increments[1]["snapshot"] = 0  # committed after its snapshot, wrote (two committed in that order: an
        # increment that lost a conflict, or one committed before the other, makes no cycle)
        table = mt.open_table(str(root / "s"))  # unreadable version: the newest data file, deleted
        newest = max(table.manifest().files, key=lambda f: (root / "s" / f.path).stat().st_mtime)
        (root / "s" / newest.path).unlink()
    target, logs = tampered(history, tmp_path, change)
    report = check(target, logs)
    assert set(report.by_class) == set(ANOMALIES), str(report)


def test_a_storm_takes_each_fault_in_turn_where_it_can_strike() -> None:
    """``FaultStorm``: 503s anywhere, lost responses on conditional writes, 412/409 only on the
    keys writers race for (a unique object's create meets one only after its own retry)."""
    calls = [("get", "data/a.parquet"), ("list", "data/"), ("put_if_absent", "tombstones/b.roaring"),
             ("put_if_absent", "manifest/v00000000000000000007.json"), ("put_if_match", "_latest_manifest")]
    storm = FaultStorm(rate=0.2, burst=2, seed=5)
    struck = [(kind, key, fault) for _ in range(300) for kind, key in calls if (fault := storm.enter(kind, key))]
    assert Counter(fault for _, _, fault in struck) == storm.counts
    assert set(storm.counts) == {TRANSIENT, TIMEOUT, CONFLICT}
    assert max(storm.counts.values()) - min(storm.counts.values()) < len(struck) / 2  # in turn, not at random
    assert {(kind, key) for kind, key, fault in struck if fault == TIMEOUT} == set(calls[2:])
    assert {(kind, key) for kind, key, fault in struck if fault == CONFLICT} == set(calls[3:])
    first = FaultStorm(rate=0, seed=5, first=CONFLICT)  # due at once, at the first call it can strike
    struck_first = [first.enter(kind, key) for kind, key in calls * 4]
    assert struck_first[3] == CONFLICT and struck_first.count(CONFLICT) == 3 == first.counts[CONFLICT]  # one burst

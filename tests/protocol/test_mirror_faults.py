"""The crash and fault matrix over a commit with both mirrors on (``manifest_table.testing``),
and concurrent writers and syncs: whatever store call of a mirror write fails, and however,
our table and both mirrors stay readable (by pyiceberg and deltalake), the commit stands, and
the next sync brings the mirrors up to date.

Only the calls on the mirrors' objects are failed here (our own commit's calls are
tests/protocol/test_fault_matrix.py's). By default: a delete, with crashes after a call and lost responses (about 25 s);
``MT_MIRROR_FAULTS=all`` adds an append and every fault kind (about 2 minutes)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table import Table
from manifest_table.errors import ManifestTableError
from manifest_table.storage import LocalStore, ObjectStore
from manifest_table.testing import CRASH_AFTER, FAULTS, TIMEOUT, TRANSIENT, FaultPlan, FaultyStore, WriterCrashed
from tests.mirror_readers import PROPERTIES, SCHEMA, History, check_version, delta_rows, iceberg_rows, rows

ALL = os.environ.get("MT_MIRROR_FAULTS") == "all"
MIRRORS = {"iceberg": {}, "delta": {"checkpoint_interval": 3}}


def _is_mirror_key(key: str) -> bool:
    return key.startswith(("metadata/", "_delta_log/")) or key.endswith((".puffin", ".bin"))


def _base(store: ObjectStore, uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, store=store, properties=PROPERTIES, mirrors=MIRRORS)
    history = History(t, 11, widen=False)
    for _ in range(3):
        t.append(history.batch(4))
    t.delete("id = 2 OR id = 9")


def _append(t: Table) -> Any:
    return t.append(pa.Table.from_pylist([{"id": 100}, {"id": 101}], schema=SCHEMA))


def _delete(t: Table) -> Any:
    return t.delete("id IN (1, 5, 10)")


OPERATIONS = {"delete": _delete, **({"append": _append} if ALL else {})}
CELL_FAULTS = FAULTS if ALL else (CRASH_AFTER, TIMEOUT)


def _check(store: LocalStore, uri: str, outcome: Any, plan: FaultPlan, expected: list[tuple]) -> None:
    if plan.fault in (TRANSIENT, TIMEOUT):
        assert not isinstance(outcome, BaseException), f"a mirror failure failed the commit: {outcome!r}"
    t = mt.open_table(uri, store=store)
    assert rows(t.to_arrow()) == expected  # the commit stands: every fault here is after its commit point
    states = [rows(t.scan(version=v).to_arrow()) for v in (t.version - 1, t.version)]
    assert iceberg_rows(uri) in states, "the Iceberg mirror is unreadable or describes another version"
    assert delta_rows(uri) in states, "the Delta mirror is unreadable or describes another version"
    assert t.sync_mirrors() == {"iceberg": t.version, "delta": t.version}
    check_version(t, t.version, ["iceberg", "delta"])
    assert iceberg_rows(uri) == delta_rows(uri) == expected


@pytest.mark.parametrize("fault", CELL_FAULTS)
@pytest.mark.parametrize("name", OPERATIONS)
def test_mirror_fault_matrix(name: str, fault: str, tmp_path: Path) -> None:
    """Each cell builds its table in place: Iceberg names files by absolute location, so a
    copied table's mirror would start over rather than go on."""
    def fresh(n: int) -> tuple[LocalStore, str]:
        uri = str(tmp_path / f"t{n}")
        store = LocalStore(uri)
        _base(store, uri)
        return store, uri

    store, uri = fresh(0)
    recorder = FaultyStore(store, FaultPlan(keys=_is_mirror_key))
    OPERATIONS[name](Table(uri, recorder))
    expected = rows(mt.open_table(uri, store=store).to_arrow())
    calls = sum(1 for call in recorder.plan.calls if _is_mirror_key(call.key))
    assert calls >= 6
    failures = []
    for k in range(1, calls + 1):
        store, uri = fresh(k)
        plan = FaultPlan(at=k, fault=fault, keys=_is_mirror_key)
        try:
            outcome: Any = OPERATIONS[name](Table(uri, FaultyStore(store, plan)))
        except (ManifestTableError, WriterCrashed) as exc:
            outcome = exc
        try:
            _check(store, uri, outcome, plan, expected)
        except AssertionError as exc:
            failures.append(f"k={k} {plan.injected}: {exc}")
    assert not failures, "\n".join(failures)


def test_concurrent_writers_and_syncs_with_mirrors_on(tmp_path: Path) -> None:
    """Writers committing at once, each mirroring after its commit, and syncs racing them:
    every version ends up mirrored once, and every reader sees our rows at each."""
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, properties=PROPERTIES, mirrors=MIRRORS)
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            history = History(Table(uri, LocalStore(uri)), seed, widen=False)
            history.next_id = seed * 1000
            for _ in range(4):
                history.t.append(history.batch(2))
                history.t.delete(f"id = {history.next_id - 1}")
        except BaseException as exc:
            errors.append(exc)

    def syncer() -> None:
        try:
            for _ in range(6):
                Table(uri, LocalStore(uri)).sync_mirrors()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in (1, 2, 3)] + [threading.Thread(target=syncer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert t.sync_mirrors() == {"iceberg": t.version, "delta": t.version}
    for version in range(t.version + 1):
        check_version(t, version, ["iceberg", "delta"])

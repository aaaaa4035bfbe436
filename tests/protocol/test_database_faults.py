"""The crash and fault matrix of test_fault_matrix.py, for databases: creating a database,
creating, dropping and renaming a table, a transaction over two tables, and database gc,
each x every store call it makes x the four faults x an in-process store and a local
directory (whose data files go through the faulty filesystem too).

Each cell checks, on the store as the fault left it: the database opens and every table
scans; an acknowledged commit is there exactly once; an unacknowledged one is wholly there
or wholly absent (no table shows part of a transaction); the next writer commits; gc after
the grace period leaves exactly the objects the latest version references."""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import DatabaseNotFoundError, ManifestTableError, StoreError
from manifest_table.format.database import table_prefix
from manifest_table.format.manifest import manifest_key
from manifest_table.storage import ObjectStore
from manifest_table.testing import FAULTS, TIMEOUT, TRANSIENT, FaultPlan, FaultyStore, WriterCrashed
from tests.protocol.test_fault_matrix import UNREPEATABLE, Fixture, ranged_reads  # noqa: F401  (autouse)

SCHEMA = pa.schema([("id", pa.int64())])
PROPERTIES = {"tail_limit": 1, "deletes_limit": 1, "segment_target_files": 2, "max_small_segments": 1}
"""Limits that make every commit flush, rewrite and merge segments."""
State = dict[str, Counter[int]]


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids}, schema=SCHEMA)


def _base(store: ObjectStore, uri: str) -> None:
    """Tables a and b, two files each, a delete in b, and an orphan a crashed writer left."""
    db = mt.create_database(uri, store=store)
    for name, start in (("a", 0), ("b", 10)):
        table = db.create_table(name, SCHEMA, properties=PROPERTIES)
        table.append(rows(list(range(start, start + 5))))
        table.append(rows(list(range(start + 5, start + 10))))
    db.table("b").delete("id = 13")
    a_id = db.table("a").table_id
    store.put_if_absent(f"{table_prefix(a_id)}data/{uuid.uuid4().hex}.parquet", b"an orphan")


def _transaction(db: mt.Database) -> Any:
    with db.transaction() as tx:
        tx.table("a").append(rows([100, 101]))
        tx.table("b").delete("id = 11")
        return tx.commit()


def _gc(db: mt.Database) -> Any:
    return db.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True,
                 now=datetime.now(UTC) + timedelta(hours=1))


BASE: State = {"a": Counter(range(10)), "b": Counter(i for i in range(10, 20) if i != 13)}
# operation -> (run it on an open database, the tables it leaves when it happened)
OPERATIONS: dict[str, tuple[Callable[[mt.Database], Any], State]] = {
    "create_table": (lambda db: db.create_table("c", SCHEMA, properties=PROPERTIES), {**BASE, "c": Counter()}),
    "drop_table": (lambda db: db.drop_table("b"), {"a": BASE["a"]}),
    "rename_table": (lambda db: db.rename_table("a", "z"), {"z": BASE["a"], "b": BASE["b"]}),
    "transaction": (_transaction, {"a": BASE["a"] + Counter([100, 101]), "b": BASE["b"] - Counter([11])}),
    "gc": (_gc, BASE),
}


def _run(name: str, store: ObjectStore, uri: str) -> Any:
    if name == "create_database":
        return mt.create_database(uri, store=store)
    return OPERATIONS[name][0](mt.open_database(uri, store=store))


def _state(store: ObjectStore, uri: str) -> State | None:
    try:
        db = mt.open_database(uri, store=store)
    except DatabaseNotFoundError:
        return None
    return {name: Counter(db.table(name).to_arrow().column("id").to_pylist()) for name in db.tables()}


def _needed(db: mt.Database) -> set[str]:
    """The keys the latest database version references."""
    needed = {"_latest_manifest", manifest_key(db.version)}
    latest = db.log.manifest(db.version)
    for name, ref in latest.tables.items():
        m = db.table(name).manifest()
        keys = {f.path for f in m.files} | {f.deletes.path for f in m.files if f.deletes}
        keys |= {s.path for s in m.index.segments} if m.index else set()
        for rw in m.parameters.get("rewrites", []):
            keys |= {s["deletes"]["path"] for s in rw["sources"] if s["deletes"]}
        needed |= {ref.root} | {table_prefix(ref.id) + k for k in keys}
    return needed


def _check_cell(name: str, store: ObjectStore, uri: str, outcome: Any, plan: FaultPlan) -> None:
    if plan.injected is None:  # this run made fewer calls than the recorded one
        assert not isinstance(outcome, BaseException), f"no fault, yet {outcome!r}"
        return
    before, after = (None, {}) if name == "create_database" else (BASE, OPERATIONS[name][1])
    acknowledged = not isinstance(outcome, BaseException)
    if plan.fault in (TRANSIENT, TIMEOUT):
        if plan.injected.kind in UNREPEATABLE:
            assert isinstance(outcome, StoreError), f"expected a typed StoreError, got {outcome!r}"
        else:
            assert acknowledged, f"a retried call surfaced: {outcome!r}"
    else:
        assert isinstance(outcome, WriterCrashed), f"expected the crash, got {outcome!r}"

    seen = _state(store, uri)
    assert seen == after if acknowledged else seen in (before, after), f"tables {seen}"
    if seen is None:  # create_database died before its first version
        assert not [info.key for info in store.list()], "a database that does not exist left objects"
        return
    db = mt.open_database(uri, store=store)
    if acknowledged and isinstance(outcome, mt.CommitInfo) and outcome.committed:
        assert [h.commit_id for h in db.history()].count(outcome.commit_id) == 1

    # The next writer commits (rolling a lagging pointer forward).
    db.create_table("next", SCHEMA).append(rows([999]))
    final = _state(store, uri)
    assert final is not None and final.pop("next") == Counter([999])
    assert final in ([after] if acknowledged else [before, after]), f"tables {final}"

    # gc after the grace period leaves exactly what the latest version references.
    _gc(db)
    assert {info.key for info in store.list()} == _needed(db)
    assert _state(store, uri) == {**final, "next": Counter([999])}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", ["create_database", *OPERATIONS])
@pytest.mark.parametrize("kind", ["memory", "local"])
def test_database_fault_matrix(kind: str, name: str, fault: str, tmp_path: Path) -> None:
    fixture = Fixture(kind, tmp_path, None if name == "create_database" else functools.partial(_base))
    store, uri = fixture.copy()
    recorder = FaultyStore(store)
    _run(name, recorder, uri)
    calls = len(recorder.plan.calls)
    assert calls >= 3
    failures = []
    for k in range(1, calls + 1):
        store, uri = fixture.copy()
        plan = FaultPlan(at=k, fault=fault)
        try:
            outcome: Any = _run(name, FaultyStore(store, plan), uri)
        except (ManifestTableError, WriterCrashed) as exc:
            outcome = exc
        try:
            _check_cell(name, store, uri, outcome, plan)
        except AssertionError as exc:
            failures.append(f"k={k} {plan.injected}: {exc}")
    assert not failures, "\n".join(failures)


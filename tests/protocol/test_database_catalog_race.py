"""Concurrent catalog changes across processes (issue 28): three processes create, drop,
rename and swap tables over four overlapping names while three others append tagged rows to
whatever those names name. Each process logs every commit it was acknowledged, with the
database version it landed as. Afterwards:

- every database version after the set-up was acknowledged to exactly one process (the
  serial order of the acknowledged commits is the order of the versions);
- replaying the acknowledged commits in that order on a model catalog explains every
  version: each commit was valid on the catalog before it (a rename's source existed and its
  target was free, ...) and the version's catalog is exactly what it makes;
- at every version, every table holds exactly the rows acknowledged to it by then (the
  appends acknowledged while the name named that table): no acknowledged row is lost, none
  is added, and none went to a table of another name.

``MT_CATALOG_SECONDS`` (default 4) sets how long the processes run, ``MT_CATALOG_STORES`` on
what: ``local`` (the default), or ``local,s3`` to add moto (whose serialised writes make that
run about twice as long for a tenth of the commits)."""

from __future__ import annotations

import json
import os
import random
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CommitConflictError, TableExistsError, TableNotFoundError
from tests.protocol.workers import run_workers

SECONDS = float(os.environ.get("MT_CATALOG_SECONDS", "4"))
STORES = os.environ.get("MT_CATALOG_STORES", "local").split(",")
RENAMERS, WRITERS = 3, 3
NAMES = ["a", "b", "c", "d"]
SCHEMA = pa.schema([("tag", pa.int64())])
REFUSED = (TableExistsError, TableNotFoundError, CommitConflictError)
REFUSALS: Counter[str] = Counter()
"""What a commit may meet here: the name was taken or gone when staged (a fresh handle,
``TableRenamedError`` included), or a concurrent commit changed it; nothing was committed."""


def _catalog_change(db: mt.Database, rng: random.Random) -> dict[str, Any]:
    op = rng.choice(["create", "drop", "rename", "rename", "swap"])
    a, b = rng.sample(NAMES, 2)
    if op == "create":
        with db.transaction() as tx:  # its commit says the version (Database.create_table returns the table)
            tx.create_table(a, SCHEMA)
            return {"op": op, "name": a, "version": tx.commit().version}
    if op == "drop":
        return {"op": op, "name": a, "version": db.drop_table(a).version}
    if op == "rename":
        return {"op": op, "old": a, "new": b, "version": db.rename_table(a, b).version}
    with db.transaction() as tx:  # a swap: three renames in one commit
        tx.rename_table(a, "swap")
        tx.rename_table(b, a)
        tx.rename_table("swap", b)
        return {"op": op, "a": a, "b": b, "version": tx.commit().version}


def _append(db: mt.Database, rng: random.Random, tag: int) -> dict[str, Any]:
    name = rng.choice(db.tables() or NAMES)  # it may be gone or another table by the time it commits
    if rng.random() < 0.5:
        info = db.table(name).append(pa.table({"tag": [tag]}, schema=SCHEMA))
    else:
        with db.transaction() as tx:
            tx.table(name).append(pa.table({"tag": [tag]}, schema=SCHEMA))
            info = tx.commit()
    return {"op": "append", "name": name, "tag": tag, "version": info.version}


def _worker(uri: str, worker: int, seconds: float, log_path: str, start: Any) -> None:
    rng = random.Random(worker)
    db = mt.open_database(uri)
    start.wait()
    deadline, n = time.monotonic() + seconds, 0
    with open(log_path, "w") as log:
        while time.monotonic() < deadline:
            n += 1
            try:
                if worker < RENAMERS:
                    time.sleep(rng.uniform(0, 0.02))  # leave the writers room to land between catalog changes
                    ack = _catalog_change(db, rng)
                else:
                    ack = _append(db, rng, worker * 10**6 + n)
            except REFUSED as refused:
                log.write(json.dumps({"refused": type(refused).__name__}) + "\n")
                continue
            except Exception:
                log.write(json.dumps({"error": traceback.format_exc()}) + "\n")
                raise
            log.write(json.dumps(ack) + "\n")
            log.flush()


def _run(uri: str, tmp_path: Path) -> list[dict[str, Any]]:
    lines = run_workers(_worker, uri, RENAMERS + WRITERS, SECONDS, tmp_path)
    REFUSALS.update(line["refused"] for line in lines if "refused" in line)
    return [line for line in lines if "version" in line]


def _replay(catalog: dict[str, str], ack: dict[str, Any], after: dict[str, str], seen: set[str]) -> dict[str, str]:
    """The catalog (name -> table id) that ``ack`` makes of ``catalog``; ``after`` is the
    version it landed as (a created table's id comes from there, and must be new)."""
    op, catalog = ack["op"], dict(catalog)
    if op == "create":
        assert ack["name"] not in catalog and after.get(ack["name"]) not in seen, ack
        catalog[ack["name"]] = after[ack["name"]]
    elif op == "drop":
        del catalog[ack["name"]]
    elif op == "rename":
        assert ack["new"] not in catalog, ack
        catalog[ack["new"]] = catalog.pop(ack["old"])
    elif op == "swap":
        catalog[ack["a"]], catalog[ack["b"]] = catalog[ack["b"]], catalog[ack["a"]]
    return catalog


def _check(uri: str, first: int, acks: list[dict[str, Any]]) -> int:
    """Every version against the acknowledged commits replayed in version order; returns the
    number of rows checked."""
    db = mt.open_database(uri)
    by_version = {}
    for ack in acks:
        assert ack["version"] not in by_version, f"two commits acknowledged as version {ack['version']}"
        by_version[ack["version"]] = ack
    assert sorted(by_version) == list(range(first + 1, db.version + 1)), "versions and acknowledged commits differ"
    catalog = {name: ref.id for name, ref in db.log.manifest(first).tables.items()}
    seen, tags, rows = set(catalog.values()), {table_id: set() for table_id in catalog.values()}, 0
    for version in range(first + 1, db.version + 1):
        ack = by_version[version]
        after = {name: ref.id for name, ref in db.log.manifest(version).tables.items()}
        catalog = _replay(catalog, ack, after, seen)
        assert after == catalog, f"version {version} ({ack}): catalog {after}, the replay {catalog}"
        seen |= set(after.values())
        if ack["op"] == "append":
            tags.setdefault(catalog[ack["name"]], set()).add(ack["tag"])
        snapshot = db.snapshot(version=version)
        for name, table_id in after.items():
            held = snapshot.table(name).to_arrow().column("tag").to_pylist()
            assert sorted(held) == sorted(tags.setdefault(table_id, set())), f"version {version}: table {name!r}"
            rows += len(held)
    return rows


@pytest.mark.parametrize("where", STORES)
def test_concurrent_catalog_changes_are_a_serial_order_of_the_acknowledged_commits(
        where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    uri = str(tmp_path / "db") if where == "local" else request.getfixturevalue("s3_uri")
    REFUSALS.clear()
    db = mt.create_database(uri)
    with db.transaction() as tx:
        for name in NAMES[:2]:
            tx.create_table(name, SCHEMA)
    first = db.version
    began = time.monotonic()
    acks = _run(uri, tmp_path)
    elapsed = time.monotonic() - began
    rows = _check(uri, first, acks)
    counts = {op: sum(a["op"] == op for a in acks) for op in ("create", "drop", "rename", "swap", "append")}
    assert counts["append"] and counts["create"] + counts["drop"] + counts["rename"] + counts["swap"]
    print(f"\ncatalog race {where}: {len(acks)} acknowledged commits in {elapsed:.1f} s ({counts}), refused "
          f"{dict(REFUSALS)}; {rows} rows checked over {mt.open_database(uri).version - first} versions")

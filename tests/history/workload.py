"""The transactions of the history checker (tests/history/checker.py), run by writer
processes against one standalone table ``s`` and a database with tables ``a`` and ``b``.

Every transaction's effect can be identified afterwards: each one commits as application
``<process>`` batch ``<seq>`` (``set_app_transaction``, recorded in the version it makes),
writes rows whose ids no other transaction ever writes, and logs its intent (every row it
puts, deletes or increments, and what it read) before it calls ``commit`` and its outcome
after, one JSON line each, flushed. A process killed in between leaves an intent without an
outcome: the checker then allows the transaction to be committed or not, but not half.

- ``s.append``, ``s.delete``, ``s.upsert``, ``s.overwrite``, ``s.transaction`` (append and
  delete), ``s.increment`` (``v = v + 1`` on a counter row: a read-modify-write that must
  never lose an increment), ``s.compact``, ``s.read`` (the latest version, as read);
- ``db.move`` (row X leaves ``a`` or ``b`` for the other in one database commit: an overwrite
  of X, serializable, and an append), ``db.pair`` (a row into each table at once),
  ``db.increment`` (a counter of ``a``, through the table), ``db.compact``, ``db.read`` (both
  tables at one database version)."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import manifest_table as mt
from manifest_table.errors import CommitConflictError, CommitFailedError, InvalidArgumentError, ManifestTableError
from manifest_table.storage import store_for_uri
from manifest_table.testing import CONFLICT, TIMEOUT, TRANSIENT, FaultStorm, FaultyStore, skewed_clock

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("txn", pa.string())])
COUNTERS = range(4)
"""Counter rows of ``s`` and of ``a`` (ids 0-3)."""
MOVABLE = range(100, 120)
"""Rows that move between ``a`` and ``b`` (all in ``a`` at first)."""
SETUP = "setup"
"""The application id of the commits the workload starts from."""
SKEWS = (-600.0, 0.0, 600.0)
"""How far the clocks of writers and GC are off: 10 minutes behind, right, 10 minutes ahead."""
STORM_FAULTS = (TRANSIENT, TIMEOUT, CONFLICT)
"""What each writer's store injects (testing.FaultStorm)."""
ID_SPAN = 1_000_000
"""Ids a process may use: ``[(process + 1) * ID_SPAN, ...)``."""
OPERATIONS = {
    "s.append": 6, "s.delete": 3, "s.upsert": 2, "s.overwrite": 2, "s.transaction": 2, "s.increment": 4,
    "s.compact": 1, "s.read": 2, "db.move": 4, "db.pair": 3, "db.increment": 2, "db.compact": 1, "db.read": 2,
}


@dataclass(frozen=True)
class Target:
    """Where the workload runs: the locations of ``s`` and the database, and the options that
    reach them."""

    table: str
    database: str
    options: dict[str, str] | None

    @classmethod
    def under(cls, root: str, options: dict[str, str] | None) -> Target:
        return cls(f"{root.rstrip('/')}/s", f"{root.rstrip('/')}/db", options)


def rows(pairs: list[list[int]], txn: str) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "v": [p[1] for p in pairs], "txn": [txn] * len(pairs)},
                    schema=SCHEMA)


def digest(table: pa.Table) -> str:
    """What a read saw, compactly: the sorted (id, v, txn) rows, hashed."""
    data = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "v", "txn"))))
    return hashlib.sha1(json.dumps(data).encode()).hexdigest()[:16]


def set_up(target: Target, grace: str) -> None:
    """``s`` and the database, with ``grace`` as their ``gc_grace``, counters and movable rows."""
    s = mt.create_table(target.table, SCHEMA, storage_options=target.options, properties={"gc_grace": grace})
    with s.transaction() as tx:
        tx.append(rows([[c, 0] for c in COUNTERS], SETUP))
        tx.set_app_transaction(SETUP, 1)
    db = mt.create_database(target.database, storage_options=target.options)
    db.set_properties({"gc_grace": grace})
    db.create_table("b", SCHEMA)
    with db.transaction() as dtx:
        a = dtx.create_table("a", SCHEMA)
        a.append(rows([[c, 0] for c in COUNTERS] + [[x, 0] for x in MOVABLE], SETUP))
        a.set_app_transaction(SETUP, 2)


class Worker:
    """One writer process: random transactions until ``stop`` says so, each logged."""

    def __init__(self, target: Target, process: int, log: Path, seed: int, fault_rate: float) -> None:
        self.process, self.app = process, f"p{process}"
        self.random = random.Random(seed)
        # Each writer's first burst is due at once, writers taking the kinds in turn: a short
        # run of three writers meets every kind.
        first = STORM_FAULTS[process % len(STORM_FAULTS)] if fault_rate else None
        self.storm = FaultStorm(fault_rate, STORM_FAULTS, seed=seed, first=first)
        store = FaultyStore(store_for_uri(target.table, target.options), self.storm)
        self.s = mt.open_table(target.table, store=store)
        self.db = mt.open_database(target.database, store=FaultyStore(store_for_uri(target.database, target.options),
                                                                       self.storm))
        self.log = log.open("a")
        self.seq = 0
        self.next_id = (process + 1) * ID_SPAN
        self.mine: set[int] = set()
        """Ids of ``s`` this process inserted and believes present."""

    def run(self, stop: Callable[[int], bool]) -> None:
        names, weights = zip(*OPERATIONS.items())
        while not stop(self.seq):
            self.seq += 1
            operation = self.random.choices(names, weights)[0]
            txn = f"{self.app}.{self.seq}"
            self._write({"txn": txn, "op": operation, "phase": "begin", "t": time.time()})
            try:
                outcome = getattr(self, operation.replace(".", "_"))(txn)
            except CommitConflictError as exc:
                outcome = {"outcome": "failed", "error": f"CommitConflictError: {exc}"[:300]}
            except CommitFailedError as exc:
                outcome = _failed_commit(str(exc))
            except InvalidArgumentError as exc:  # the workload's mistake: the checker reports it
                outcome = {"outcome": "invalid", "error": f"{type(exc).__name__}: {exc}"[:300]}
            except ManifestTableError as exc:
                outcome = {"outcome": "unknown" if self._committing else "failed",
                           "error": f"{type(exc).__name__}: {exc}"[:300]}
            self._committing = False
            # The faults so far (a killed writer's count stands at its last transaction).
            self._write({"txn": txn, "phase": "end", "t": time.time(), **outcome, "faults": dict(self.storm.counts)})

    # --- the standalone table ---------------------------------------------------------------
    def s_append(self, txn: str) -> dict[str, Any]:
        new = self._new(self.random.randint(1, 3))
        return self._commit_s(txn, {"put": new}, lambda tx: tx.append(rows(new, txn)), inserted=new)

    def s_delete(self, txn: str) -> dict[str, Any]:
        victim = self._victim()
        if victim is None:
            return self.s_append(txn)
        return self._commit_s(txn, {"delete": [victim]}, lambda tx: tx.delete(f"id = {victim}"), deleted=victim)

    def s_upsert(self, txn: str) -> dict[str, Any]:
        victim, new = self._victim(), self._new(1)
        put = ([[victim, self.random.randrange(1000)]] if victim is not None else []) + new
        return self._commit_s(txn, {"put": put, "read": [p[0] for p in put]},
                              lambda tx: tx.upsert(rows(put, txn), on=["id"]), inserted=new)

    def s_overwrite(self, txn: str) -> dict[str, Any]:
        victim, new = self._victim(), self._new(1)
        if victim is None:
            return self.s_append(txn)
        return self._commit_s(txn, {"delete": [victim], "put": new, "read": [victim]},
                              # the new row replaces the victim: another id, outside the condition
                              lambda tx: tx.overwrite(rows(new, txn), where=f"id = {victim}", require_match=False),
                              inserted=new, deleted=victim)

    def s_transaction(self, txn: str) -> dict[str, Any]:
        victim, new = self._victim(), self._new(2)
        effect: dict[str, Any] = {"put": new, **({"delete": [victim]} if victim is not None else {})}

        def stage(tx: mt.Transaction) -> None:
            tx.append(rows(new, txn))
            if victim is not None:
                tx.delete(f"id = {victim}")
        return self._commit_s(txn, effect, stage, inserted=new, deleted=victim)

    def s_increment(self, txn: str) -> dict[str, Any]:
        counter = self.random.choice(COUNTERS)
        return self._commit_s(txn, {"increment": [counter], "read": [counter]},
                              lambda tx: tx.update({"v": "v + 1"}, where=f"id = {counter}"))

    def s_compact(self, txn: str) -> dict[str, Any]:
        info = self.s.compact()
        return {"outcome": "compacted" if info.committed else "noop"}

    def s_read(self, txn: str) -> dict[str, Any]:
        scan = self.s.scan()
        return {"outcome": "read", "observed": {"s": [scan.version, digest(scan.to_arrow())]}}

    # --- the database ------------------------------------------------------------------------
    def db_move(self, txn: str) -> dict[str, Any]:
        x = self.random.choice(MOVABLE)
        with self.db.transaction() as tx:
            source = "a" if tx.table("a").scan(where=f"id = {x}").count() else "b"
            target = "b" if source == "a" else "a"
            found = tx.table(source).scan(where=f"id = {x}").to_arrow()
            if found.num_rows != 1:  # in neither table, or twice: what the checker must also find
                tx.abort()
                return {"outcome": "read", "anomaly": f"row {x} is {found.num_rows} times in {source} "
                                                      f"at database version {tx.version}"}
            put = [[x, found.column("v")[0].as_py()]]
            tx.table(source).overwrite(SCHEMA.empty_table(), where=f"id = {x}")
            tx.table(target).append(rows(put, txn))
            effect = {source: {"delete": [x], "read": [x]}, target: {"put": put}}
            return self._commit_db(txn, tx, effect)

    def db_pair(self, txn: str) -> dict[str, Any]:
        new = {name: self._new(1) for name in ("a", "b")}
        with self.db.transaction() as tx:
            for name, put in new.items():
                tx.table(name).append(rows(put, txn))
            return self._commit_db(txn, tx, {name: {"put": put} for name, put in new.items()})

    def db_increment(self, txn: str) -> dict[str, Any]:
        counter = self.random.choice(COUNTERS)
        a = self.db.table("a")
        with a.transaction() as tx:
            tx.update({"v": "v + 1"}, where=f"id = {counter}")
            return self._commit_db(txn, tx, {"a": {"increment": [counter], "read": [counter]}}, single=True)

    def db_compact(self, txn: str) -> dict[str, Any]:
        info = self.db.table(self.random.choice("ab")).compact()
        return {"outcome": "compacted" if info.committed else "noop"}

    def db_read(self, txn: str) -> dict[str, Any]:
        snapshot = self.db.snapshot()
        seen = {name: digest(snapshot.table(name).to_arrow()) for name in ("a", "b")}
        return {"outcome": "read", "observed": {"db": [snapshot.version, seen]}}

    # --- committing --------------------------------------------------------------------------
    _committing = False

    def _commit_s(self, txn: str, effect: dict[str, Any], stage: Callable[[mt.Transaction], Any],
                  inserted: list[list[int]] | None = None, deleted: int | None = None) -> dict[str, Any]:
        with self.s.transaction() as tx:
            stage(tx)
            tx.set_app_transaction(self.app, self.seq)
            self._write({"txn": txn, "phase": "intent", "snapshot": tx.version, "effect": {"s": effect}})
            self._committing = True
            info = tx.commit()
        if info.committed:
            self.mine.update(i for i, _ in inserted or ())
            self.mine.discard(deleted)  # type: ignore[arg-type]
        return _outcome(info)

    def _commit_db(self, txn: str, tx: Any, effect: dict[str, Any], single: bool = False) -> dict[str, Any]:
        """Commit a database transaction (or one table's, ``single``) as batch ``seq``."""
        tables = [tx] if single else [tx.table(name) for name in effect]
        for table_tx in tables:
            table_tx.set_app_transaction(self.app, self.seq)
        self._write({"txn": txn, "phase": "intent", "snapshot": tx.version, "effect": effect})
        self._committing = True
        return _outcome(tx.commit())

    def _new(self, n: int) -> list[list[int]]:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return [[i, self.random.randrange(1000)] for i in ids]

    def _victim(self) -> int | None:
        return self.random.choice(sorted(self.mine)) if self.mine else None

    def _write(self, line: dict[str, Any]) -> None:
        self.log.write(json.dumps(line) + "\n")
        self.log.flush()


def _outcome(info: mt.CommitInfo) -> dict[str, Any]:
    if not info.committed:
        return {"outcome": "noop"}
    return {"outcome": "ok", "version": info.version, "commit_id": info.commit_id}


def _failed_commit(message: str) -> dict[str, Any]:
    """What a ``CommitFailedError`` says happened: nothing, landed (committed), or unknown."""
    if "is committed: do not retry it" in message:
        version = int(message.split("landed as version ")[1].split()[0])
        return {"outcome": "ok", "version": version, "landed": True}
    if "Nothing was committed" in message or "unchanged by this commit" in message:
        return {"outcome": "failed", "error": message[:300]}
    return {"outcome": "unknown", "error": message[:300]}


def work(target: Target, process: int, log: str, seed: int, fault_rate: float, until: Any, ready: Any,
         transactions: int) -> None:
    """A writer process, on a clock up to 10 minutes off: transactions until the wall-clock time
    in the shared ``until`` (0: not set yet, so wait) or ``transactions``; ``ready`` counts the
    processes ready to start."""
    worker = Worker(target, process, Path(log), seed, fault_rate)
    with ready.get_lock():
        ready.value += 1
    while not until.value:
        time.sleep(0.02)
    with skewed_clock(random.Random(seed).choice(SKEWS)):  # until is the true time: time.time()
        worker.run(lambda n: n >= transactions or time.time() >= until.value)

"""Bank transfers across tables (issue 20): eight processes move amounts between accounts held
in two tables of one database, one database transaction per transfer, with a ledger row
written in the same transaction; some transfers stay within one table; scratch tables are
created and dropped; compaction and gc run meanwhile. Afterwards, in every retained database
version, the total over both tables equals the initial total and every balance equals its
initial value plus the ledger's transfers, and every acknowledged transfer is in the ledger
exactly once. On a local directory and on moto (whose writes tests/s3_server.py serialises).

``MT_BANK_SECONDS`` (default 4) sets how long the processes write; e.g. ``MT_BANK_SECONDS=600``
for a soak."""

from __future__ import annotations

import json
import os
import random
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CommitConflictError, CommitFailedError
from tests.protocol.workers import run_workers

PROCESSES = 8
SECONDS = float(os.environ.get("MT_BANK_SECONDS", "4"))
ACCOUNTS = 32
OPENING = 1000
TABLES = ("checking", "savings")
RETAIN = timedelta(seconds=4)
DEADLINE = 2.5
"""GC's retention and grace, and a commit deadline below them (see test_stress.py)."""
ACCOUNT = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
LEDGER = pa.schema([("transfer", pa.int64()), ("src", pa.string()), ("src_id", pa.int64()),
                    ("dst", pa.string()), ("dst_id", pa.int64()), ("amount", pa.int64())])
OPERATIONS = ["across"] * 6 + ["within"] * 3 + ["scratch", "compact", "gc"]


def _transfer(db: mt.Database, transfer: int, src: str, src_id: int, dst: str, dst_id: int, amount: int) -> Any:
    with db.transaction() as tx:
        tx.table(src).update({"balance": f"balance - {amount}"}, where=f"id = {src_id}")
        tx.table(dst).update({"balance": f"balance + {amount}"}, where=f"id = {dst_id}")
        tx.table("ledger").append([{"transfer": transfer, "src": src, "src_id": src_id, "dst": dst,
                                    "dst_id": dst_id, "amount": amount}])
        return tx.commit()


def _worker(uri: str, writer: int, seconds: float, log_path: str, start: Any) -> None:
    rng = random.Random(writer)
    db = mt.open_database(uri, recheck_after=1.0, deadline=DEADLINE)
    warm = db.transaction()  # the library loads what a call uses on first use: not on the clock
    warm.table(TABLES[0]).update({"balance": "balance + 0"}, where="id = 0")
    warm.abort()
    n = 0
    start.wait()
    deadline = time.monotonic() + seconds
    with open(log_path, "w") as log:
        while time.monotonic() < deadline:
            op = rng.choice(OPERATIONS)
            n += 1
            transfer = writer * 10**9 + n
            try:
                if op in ("across", "within"):
                    src = rng.choice(TABLES)
                    dst = src if op == "within" else next(t for t in TABLES if t != src)
                    src_id, dst_id = rng.sample(range(ACCOUNTS), 2)
                    info = _transfer(db, transfer, src, src_id, dst, dst_id, rng.randint(1, 50))
                    log.write(json.dumps({"transfer": transfer, "version": info.version}) + "\n")
                elif op == "scratch":
                    name = f"scratch-{writer}-{n}"
                    db.create_table(name, ACCOUNT).append([{"id": 0, "balance": 1}])
                    db.drop_table(name)
                elif op == "compact":
                    db.compact(1 << 20, 0.1)
                else:
                    db.gc(retain_for=RETAIN, grace=RETAIN, force=True)
            except CommitConflictError:
                pass  # two transfers touched one account (or compaction lost): nothing committed
            except CommitFailedError as exc:
                if "deadline" not in str(exc):
                    log.write(json.dumps({"error": traceback.format_exc()}) + "\n")
                    raise
            except Exception:
                log.write(json.dumps({"error": traceback.format_exc()}) + "\n")
                raise
            log.flush()


def _run(uri: str, tmp_path: Path) -> list[dict[str, Any]]:
    return run_workers(_worker, uri, PROCESSES, SECONDS, tmp_path)


def _balances(table: mt.Table) -> dict[int, int]:
    got = table.to_arrow()
    return dict(zip(got.column("id").to_pylist(), got.column("balance").to_pylist()))


def _check(uri: str, acks: list[dict[str, Any]]) -> None:
    db = mt.open_database(uri)
    latest = db.snapshot()
    ledger = latest.table("ledger").to_arrow().column("transfer").to_pylist()
    assert len(ledger) == len(set(ledger)), "a transfer is in the ledger twice"
    assert sorted(ledger) == sorted(a["transfer"] for a in acks), "acknowledged transfers and the ledger differ"
    for info in db.history():
        snap = db.snapshot(version=info.version)
        if "ledger" not in snap.tables():  # version 0, not yet expired by the writers' GC
            continue
        entries = snap.table("ledger").to_arrow().to_pylist()
        expected = {t: dict.fromkeys(range(ACCOUNTS), OPENING) for t in TABLES}
        for e in entries:
            expected[e["src"]][e["src_id"]] -= e["amount"]
            expected[e["dst"]][e["dst_id"]] += e["amount"]
        balances = {t: _balances(snap.table(t)) for t in TABLES}
        assert sum(sum(b.values()) for b in balances.values()) == len(TABLES) * ACCOUNTS * OPENING, \
            f"version {info.version}: money was made or lost"
        assert balances == expected, f"version {info.version}: balances differ from the ledger"


@pytest.mark.parametrize("where", ["local", "s3"])
def test_bank_transfers_across_tables_keep_the_total(where: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    uri = str(tmp_path / "bank") if where == "local" else request.getfixturevalue("s3_uri")
    db = mt.create_database(uri)
    with db.transaction() as tx:
        for name in TABLES:
            tx.create_table(name, ACCOUNT).append([{"id": i, "balance": OPENING} for i in range(ACCOUNTS)])
        tx.create_table("ledger", LEDGER)
    began = time.monotonic()
    acks = _run(uri, tmp_path)
    elapsed = time.monotonic() - began
    _check(uri, acks)
    assert acks, "no transfer committed"
    print(f"\nbank {where}: {len(acks)} transfers in {elapsed:.1f} s by {PROCESSES} processes; "
          f"database at version {mt.open_database(uri).version}")

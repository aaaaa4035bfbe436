"""Multi-process stress: eight processes mix appends, deletes, overwrites, updates, upserts,
transactions, compaction and GC on one table (a local directory, S3 on moto and on SeaweedFS, GCS on
fake-gcs-server, Azure on Azurite), then the final state and every retained version are checked
against a serial replay of the acknowledged history.

Each process owns the ids ``writer * 10**9 + n`` and deletes, overwrites, updates or upserts
only rows of its own that it saw acknowledged, so replaying the logged changes in version order is exact even
though deletes rebase over concurrent commits. ``MT_STRESS_SECONDS`` (default 4) sets how long
the processes write; e.g. ``MT_STRESS_SECONDS=600`` for a soak.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
import traceback
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CommitConflictError, CommitFailedError
from manifest_table.storage import store_for_uri
from tests.conftest import store_location
from tests.stores import CountingStore

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64()), ("v", pa.int64())])
PROCESSES = 8
SECONDS = float(os.environ.get("MT_STRESS_SECONDS", "4"))
RETAIN = timedelta(seconds=5)
DEADLINE = 3.0
"""GC's retention and grace, and the commits' deadline: short, so that versions expire while
the writers run, and a deadline below the grace, so that no commit can reference an object GC
collected however loaded the machine (a commit past it gives up, nothing committed)."""
OPERATIONS = (["append"] * 7 + ["delete"] * 4 + ["overwrite"] * 3 + ["update"] * 2 + ["upsert"] * 2
              + ["transaction"] * 3 + ["compact", "gc"])
ID_SPAN = 10**9


def _rows(writer: int, ids: list[int], value: int) -> pa.Table:
    return pa.table({"id": ids, "writer": [writer] * len(ids), "v": [value] * len(ids)}, schema=SCHEMA)


def _in(ids: list[int]) -> str:
    return f"id in ({', '.join(map(str, ids))})"


def _worker(uri: str, options: dict[str, str] | None, writer: int, seconds: float, log_path: str,
            start: Any) -> None:
    """Commit random operations until ``seconds`` pass; log each acknowledged commit as
    (version, commit id, rows added, ids deleted) and, at the end, the manifest creates made."""
    rng = random.Random(writer)
    counter = CountingStore(store_for_uri(uri, options))  # counts manifest creates: commits + lost races
    table = mt.open_table(uri, store=counter, recheck_after=1.0, deadline=DEADLINE)
    live: dict[int, int] = {}  # own acknowledged rows: id -> v
    next_id = writer * ID_SPAN
    commits = gave_up = 0
    start.wait()
    deadline = time.monotonic() + seconds
    with open(log_path, "w") as log:
        def ack(info: Any, added: dict[int, int], deleted: list[int]) -> None:
            nonlocal commits
            if info.committed:
                commits += 1
                log.write(json.dumps({"version": info.version, "commit_id": info.commit_id, "op": info.operation,
                                      "added": sorted(added.items()), "deleted": sorted(deleted),
                                      "seconds": time.monotonic() - began}) + "\n")
                log.flush()
            for i in deleted:
                del live[i]
            live.update(added)

        while time.monotonic() < deadline:
            op = rng.choice(OPERATIONS)
            own = sorted(live)
            victims = rng.sample(own, min(len(own), rng.randint(1, 3)))
            new = list(range(next_id, next_id + rng.randint(1, 4)))
            value = rng.randrange(1000)
            began = time.monotonic()
            try:
                if op == "append" or (not victims and op in ("delete", "overwrite", "update", "upsert", "transaction")):
                    next_id += len(new)
                    ack(table.append(_rows(writer, new, value)), dict.fromkeys(new, value), [])
                elif op == "delete":
                    info = table.delete(_in(victims))
                    assert info.metrics["rows_deleted"] == len(victims), info.metrics
                    ack(info, {}, victims)
                elif op == "overwrite":
                    next_id += len(new)
                    info = table.overwrite(_rows(writer, new, value), where=f"writer = {writer} and {_in(victims)}",
                                           require_match=False)
                    ack(info, dict.fromkeys(new, value), victims)
                elif op == "update":
                    info = table.update({"v": str(value)}, where=f"writer = {writer} and {_in(victims)}")
                    assert info.metrics["rows_updated"] == len(victims), info.metrics
                    ack(info, dict.fromkeys(victims, value), victims)
                elif op == "upsert":
                    next_id += len(new)
                    info = table.upsert(_rows(writer, victims + new, value), ["id"])
                    assert (info.metrics["rows_updated"], info.metrics["rows_inserted"]) == (len(victims), len(new))
                    ack(info, dict.fromkeys(victims + new, value), victims)
                elif op == "transaction":
                    next_id += len(new)
                    with table.transaction() as tx:
                        tx.append(_rows(writer, new, value))
                        tx.delete(_in(victims))
                        info = tx.commit()
                    ack(info, dict.fromkeys(new, value), victims)
                elif op == "compact":
                    ack(table.compact(1 << 20, 0.1), {}, [])
                else:
                    table.gc(retain_for=RETAIN, grace=RETAIN, force=True)
            except CommitConflictError:
                pass  # a true conflict (an overwrite, update, upsert or compaction lost): nothing committed
            except CommitFailedError as exc:
                if "deadline" not in str(exc):
                    raise
                gave_up += 1  # too slow for GC's grace on this machine: nothing committed
            except Exception:
                log.write(json.dumps({"error": traceback.format_exc()}) + "\n")
                raise
        creates = counter.counts[("put", "manifest")]
        log.write(json.dumps({"commits": commits, "creates": creates, "gave_up": gave_up}) + "\n")


def _run(uri: str, options: dict[str, str] | None,
         tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES + 1, timeout=240)  # everyone starts the clock together
    logs = [str(tmp_path / f"writer{w}.jsonl") for w in range(PROCESSES)]
    procs = [ctx.Process(target=_worker, args=(uri, options, w, SECONDS, logs[w], start)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    start.wait()
    began = time.monotonic()
    for p in procs:
        p.join(timeout=SECONDS + 240)
    elapsed = time.monotonic() - began
    acks, totals = [], []
    for path in logs:
        lines = [json.loads(line) for line in Path(path).read_text().splitlines()] if Path(path).exists() else []
        errors = [line["error"] for line in lines if "error" in line]
        assert not errors, errors[0]
        acks += [line for line in lines if "version" in line]
        totals += [line for line in lines if "commits" in line]
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return acks, totals, elapsed


def _check(uri: str, options: dict[str, str] | None, acks: list[dict[str, Any]]) -> None:
    table = mt.open_table(uri, storage_options=options)
    latest = table.version
    by_version = {a["version"]: a for a in acks}
    assert len(by_version) == len(acks), "two acknowledged commits share a version"
    # No process crashed, so every version after 0 is some process's acknowledged commit.
    assert sorted(by_version) == list(range(1, latest + 1))
    retained = table.history()
    assert retained and retained[0].version == latest
    wanted = {info.version for info in retained}
    state: dict[int, int] = {}  # id -> v: every id is appended once, by its owner
    states = {0: {}} if 0 in wanted else {}  # only retained versions: a soak makes many
    for version in range(1, latest + 1):
        ack = by_version[version]
        for i in ack["deleted"]:
            assert i in state, f"version {version} deletes id {i}, which is not live"
            del state[i]
        for i, v in ack["added"]:
            assert i not in state, f"version {version} adds id {i} twice"
            state[i] = v
        if version in wanted:
            states[version] = dict(state)
    for info in retained:
        assert info.commit_id == (by_version[info.version]["commit_id"] if info.version else info.commit_id)
        got = table.scan(columns=["id", "v"], version=info.version).to_arrow()
        pairs = list(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))
        assert len(pairs) == len(states[info.version]) and dict(pairs) == states[info.version], \
            f"version {info.version} differs from the replay"
    assert table.scan().count() == len(states[latest])


@pytest.mark.parametrize("where", ["local", "s3", "seaweedfs", "gcs", "azure"])
def test_eight_processes_mixing_every_operation_match_a_serial_replay(where: str, tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    uri, options = (str(tmp_path / "t"), None) if where == "local" else store_location(where, request)
    mt.create_table(uri, SCHEMA, storage_options=options)
    acks, totals, elapsed = _run(uri, options, tmp_path)
    _check(uri, options, acks)
    commits = sum(t["commits"] for t in totals)
    lost = sum(t["creates"] for t in totals) - commits
    gave_up = sum(t["gave_up"] for t in totals)
    ops = Counter(a["op"] for a in acks)
    assert commits == len(acks) and ops["append"]
    print(f"\nstress {where}: {commits} commits in {elapsed:.1f} s by {PROCESSES} processes "
          f"({commits / elapsed:.1f} commits/s), {lost / max(commits, 1):.2f} lost create races per commit, "
          f"{gave_up} gave up at the deadline; "
          f"{dict(ops)}; longest commit {max(a['seconds'] for a in acks):.2f} s")

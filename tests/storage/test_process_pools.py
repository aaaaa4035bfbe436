"""Thread pools and locks kept per process (manifest_table/process_pools.py: the sync threads
of a local store, the file readers of scans, the mirror threads and their caches' locks) in a
forked child: a Spark worker, or any user's ``multiprocessing`` with the fork start method,
forks while our threads may be busy."""

from __future__ import annotations

import os
import time

from manifest_table.process_pools import ProcessLock, ProcessPool


def _exit_status(pid: int, seconds: float = 30.0) -> int | None:
    """The child's exit status, or None if it has not exited within ``seconds`` (killed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def test_a_forked_child_gets_a_working_pool_of_its_own() -> None:
    """The parent's pool has threads the child lacks, and its lock may be held by a parent
    thread at the fork (here: held across it): the child makes a new pool and uses it."""
    pool = ProcessPool(1, "mt-test")
    parents = pool.get()
    assert parents.submit(lambda: 1).result() == 1
    with pool._lock:  # a thread of the parent inside get() when the fork happens
        pid = os.fork()
        if pid == 0:  # the child: answer by exit status only
            code = 1
            try:
                child = pool.get()
                code = 0 if child is not parents and child.submit(lambda: 2).result(timeout=10) == 2 else 1
            finally:
                os._exit(code)
    assert _exit_status(pid) == 0
    assert pool.get() is parents  # the parent keeps its own


def test_a_lock_held_by_the_parent_at_the_fork_is_free_in_the_child() -> None:
    lock = ProcessLock()
    with lock:  # a thread of the parent inside a cache update when the fork happens
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with lock:
                    code = 0
            finally:
                os._exit(code)
    assert _exit_status(pid, seconds=10) == 0
    with lock:  # the parent's, released
        pass


def test_a_forked_child_commits_to_a_mirrored_table(tmp_path) -> None:
    """The mirror threads, started by the parent's commit and idle at the fork, do not exist
    in the child: its commit must mirror on threads of its own, not wait forever for the
    parent's."""
    import pyarrow as pa

    import manifest_table as mt

    table = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), mirrors=["iceberg", "delta"])
    table.append(pa.table({"id": [1]}))  # the parent's mirror threads now exist, idle
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            mt.open_table(str(tmp_path / "t")).append(pa.table({"id": [2]}))
            code = 0
        finally:
            os._exit(code)
    assert _exit_status(pid) == 0
    assert sorted(mt.open_table(str(tmp_path / "t")).scan().to_arrow()["id"].to_pylist()) == [1, 2]

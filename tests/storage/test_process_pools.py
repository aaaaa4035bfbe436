"""Thread pools kept per process (manifest_table/process_pools.py: the sync threads of a local
store, the page decoder of point reads) in a forked child: a Spark worker, or any user's
``multiprocessing`` with the fork start method, forks while our threads may be busy."""

from __future__ import annotations

import os
import time

from manifest_table.process_pools import ProcessPool


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

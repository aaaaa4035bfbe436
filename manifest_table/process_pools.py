"""Thread pools and locks kept for the life of a process: made on first use and forgotten in a
forked child, whose copy of a pool has no threads (work given to it would wait forever) and
whose copy of a lock may have been taken by a thread of the parent at the fork (it would stay
taken forever). A Spark worker, or a user's ``multiprocessing`` with the fork start method,
forks while our threads may be busy."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor


class ProcessPool:
    """``workers`` threads named ``name``-N, made by the first ``get`` of each process."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers, self._name = workers, name
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._name)
            return self._pool


class ProcessLock:
    """A lock over module state (a cache shared by threads), made anew in a forked child."""

    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

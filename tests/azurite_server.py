"""Azurite, Microsoft's Azure Storage emulator (npm package ``azurite``), blob service only,
on 127.0.0.1, in memory.

npm packages are not on PyPI, so the README's ``pip install -e '.[dev]'`` cannot bring it:
the first test that needs it runs ``npm install azurite@<version>`` (Node 20 and npm come with
the machine) into a per-user cache, ``$MANIFEST_TABLE_TEST_CACHE`` or
``~/.cache/manifest_table``, outside the clone: CI runs in a fresh clone each time, and the
cache makes every run after the first on a machine skip the install (about 50 s).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.server_process import HOST, ServerProcess, start

VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""The emulator's published development account."""
_LISTENING = re.compile(r"listens on (http://\S+)")


def cache_dir() -> Path:
    root = os.environ.get("MANIFEST_TABLE_TEST_CACHE") or Path.home() / ".cache" / "manifest_table"
    return Path(root) / f"azurite-{VERSION}"


def install() -> Path:
    """The ``azurite-blob`` executable, installed from the npm registry on first use. A lock
    keeps two test runs from installing at once; a marker file written last tells a complete
    install from one that was interrupted."""
    target = cache_dir()
    executable, marker = target / "node_modules" / ".bin" / "azurite-blob", target / "installed"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".azurite-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            shutil.rmtree(target, ignore_errors=True)
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("the Azure tests need Node.js and npm to install Azurite")
            subprocess.run([npm, "install", "--prefix", str(target), f"azurite@{VERSION}", "--no-audit",
                            "--no-fund", "--loglevel=error"], check=True, stdin=subprocess.DEVNULL)
            marker.touch()
    return executable


def connection_string(endpoint: str) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={endpoint}/{ACCOUNT};")


def start_azurite(workdir: Path) -> tuple[str, ServerProcess]:
    """Start the blob emulator on a port it picks; return its endpoint URL and the process.
    Telemetry is off: the machine reaches no host but the package registries."""
    executable = install()
    log = workdir / "azurite.log"

    def launch() -> tuple[ServerProcess, object]:
        argv = [str(executable), "--blobHost", HOST, "--blobPort", "0", "--inMemoryPersistence",
                "--extentMemoryLimit", "1024", "--disableTelemetry", "--skipApiVersionCheck", "--silent"]
        return ServerProcess(argv, log), lambda: _LISTENING.search(log.read_text()) is not None

    server = start(launch, timeout=60, attempts=1)
    return _LISTENING.findall(log.read_text())[-1], server

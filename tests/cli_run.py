"""The ``manifest-table`` command run in the test's process, through its own code path
(``cli.main``), for tests that check its answers against the library's (the differential
reads, the old tables)."""

from __future__ import annotations

import contextlib
import io

from manifest_table.cli import main


def cli_count(uri: str, version: int | None = None, where: str | None = None) -> int:
    """``manifest-table count URI [--version V] [--where W]``: without ``--where`` it answers
    from the manifest, without pyarrow (tests/cli/test_startup.py)."""
    argv = ["count", uri, *([] if version is None else ["--version", str(version)])]
    argv += [] if where is None else [f"--where={where}"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code:
        raise RuntimeError(f"manifest-table {' '.join(argv)} exited with {code}: {err.getvalue().strip()}")
    return int(out.getvalue())

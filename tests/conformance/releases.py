"""What each earlier release does with the corpus: its own code, taken from the repository's
history, reads the latest version of every case in a subprocess and says "ok" (the rows and
columns case.json records), "WRONG" (other rows: never seen), or how it refused. This is how
docs/format.md's version history was measured; run it again after a format change:

    python -m tests.conformance.releases            # every release below
    python -m tests.conformance.releases 0.3.0

Needs the git history (not a shallow clone)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

from tests.conformance.generate import CORPUS

RELEASES = {"0.1.0": "b6d818a", "0.2.0": "3ad89b3", "0.3.0": "29bcc03"}
"""Release -> the commit its code is taken from (0.1.0 and 0.2.0: the last commit before the
next format change; 0.3.0: the commit that made it)."""
REPO = Path(__file__).resolve().parents[2]

READ_EVERY_CASE = textwrap.dedent("""
    import json, shutil, sys, tempfile
    from pathlib import Path
    import manifest_table as mt
    for case in sorted(Path(sys.argv[1]).iterdir()):
        info = json.loads((case / "case.json").read_text())
        expected = info["versions"][str(info["latest"])]
        root = Path(tempfile.mkdtemp()) / "t"
        shutil.copytree(case / "objects", root)  # a release may write (roll a pointer forward)
        try:
            if info["kind"] == "database" and not hasattr(mt, "open_database"):  # before databases
                mt.open_table(str(root)).scan().to_arrow()
                raise AssertionError("read a database as a table")
            if info["kind"] == "database":
                db = mt.open_database(str(root))
                found = {name: db.table(name).scan().to_arrow().num_rows for name in db.tables()}
                ok = found == {name: table["rows"] for name, table in expected.items()}
            else:
                rows = mt.open_table(str(root)).scan().to_arrow()
                names = [column.split(": ")[0] for column in expected["columns"]]
                ok = rows.num_rows == expected["rows"] and rows.schema.names == names
            outcome = "ok" if ok else "WRONG"
        except Exception as exc:
            outcome = f"refused: {type(exc).__name__}: {' '.join(str(exc).split())[:140]}"
        print(f"{case.name:28} {outcome}")
""")


def run(release: str) -> str:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", RELEASES[release], "manifest_table"], capture_output=True, check=True
    )
    with tempfile.TemporaryDirectory() as library:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(library, filter="data")
        done = subprocess.run(
            [sys.executable, "-c", READ_EVERY_CASE, str(CORPUS)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": library, "PATH": "/usr/bin:/bin"},
            cwd=library,
            timeout=600,
        )
    return done.stdout + done.stderr


if __name__ == "__main__":
    for name in sys.argv[1:] or list(RELEASES):
        print(f"=== release {name} (commit {RELEASES[name]})")
        print(run(name))

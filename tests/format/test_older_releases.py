"""What release 0.3.0 does with tables and databases this release writes, run as 0.3.0 itself:
its library is taken from the repository's history and run in a subprocess.

A table keeps format version 2 (and a database version 1) until it holds a property 0.3.0 does
not know; until then 0.3.0 reads and writes it. From then on its roots are format version 3
(a database's versions format 2), which 0.3.0 refuses to read or write, rather than drop the
property when writing the next root (docs/format.md, "Properties"); its versions from before
stay readable by 0.3.0."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt

RELEASE_0_3_0 = "29bcc033f435ac3f57ddd98db9aeabf0cf738dc5"
"""The commit that made version 0.3.0."""
SCHEMA = pa.schema([("id", pa.int64())])
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def release_0_3_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding 0.3.0's ``manifest_table`` package."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", RELEASE_0_3_0, "manifest_table"],
                             capture_output=True)
    if archive.returncode:
        pytest.skip(f"needs release 0.3.0 from the git history (a shallow clone?): {archive.stderr.decode()[:200]}")
    where = tmp_path_factory.mktemp("release-0.3.0")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(where, filter="data")
    return where


def as_0_3_0(library: Path, code: str) -> str:
    """Run ``code`` with 0.3.0's library; its stdout (each line ``ok ...`` or ``error <type>: ...``)."""
    prelude = textwrap.dedent("""
        import manifest_table as mt, pyarrow as pa
        assert mt.__file__.startswith(LIBRARY), mt.__file__
        def attempt(label, call):
            try:
                print("ok", label, call())
            except Exception as exc:
                print("error", label, type(exc).__name__ + ":", exc)
    """).replace("LIBRARY", repr(str(library)))
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(library)}, cwd=library, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_0_3_0_reads_and_writes_a_table_until_it_holds_a_property_it_does_not_know(release_0_3_0: Path,
                                                                                    tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append([{"id": 1}])
    out = as_0_3_0(release_0_3_0, f"""
        t = mt.open_table({t.uri!r})
        attempt("append", lambda: t.append(pa.table({{"id": [2]}})).version)
        attempt("count", lambda: t.scan().count())
    """)
    assert out.splitlines() == ["ok append 2", "ok count 2"]

    t.set_properties({"gc_grace": "6h"})  # version 3: format version 3
    files = sorted(os.listdir(tmp_path / "t" / "data"))
    out = as_0_3_0(release_0_3_0, f"""
        t = mt.open_table({t.uri!r})
        attempt("append", lambda: t.append(pa.table({{"id": [3]}})).version)
        attempt("count", lambda: t.scan().count())
        attempt("count at version 2", lambda: t.scan(version=2).count())
    """)
    refused = "CorruptTableError: manifest/v00000000000000000003.json has format version 3; this library " \
              "reads up to 2: upgrade manifest_table"
    assert out.splitlines() == [f"error append {refused}", f"error count {refused}", "ok count at version 2 2"]
    assert t.version == 3 and t.properties["gc_grace"] == "6h" and t.scan().count() == 2
    assert sorted(os.listdir(tmp_path / "t" / "data")) == files  # 0.3.0 wrote nothing


def test_0_3_0_reads_and_writes_a_purged_table(release_0_3_0: Path, tmp_path: Path) -> None:
    """A purge (issue 34) needs no property, so the table stays format 2: its rewrite record
    has the shape 0.3.0 reads, and 0.3.0 goes on deleting from the purged files."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.table({"id": list(range(10))}))
    info = t.purge(where="id < 3")
    assert info.committed and t.manifest().format_version == 2
    out = as_0_3_0(release_0_3_0, f"""
        t = mt.open_table({t.uri!r})
        attempt("count", lambda: t.scan().count())
        attempt("delete", lambda: t.delete("id = 5").metrics["rows_deleted"])
        attempt("compact", lambda: t.compact(min_deleted_fraction=0.05).committed)
    """)
    assert out.splitlines() == ["ok count 7", "ok delete 1", "ok compact True"]
    assert sorted(t.to_arrow()["id"].to_pylist()) == [3, 4, 6, 7, 8, 9]


def test_0_3_0_refuses_a_database_once_it_holds_a_property(release_0_3_0: Path, tmp_path: Path) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    db.create_table("a", SCHEMA).append([{"id": 1}])
    code = f"""
        db = mt.open_database({db.uri!r})
        attempt("append", lambda: db.table("a").append(pa.table({{"id": [2]}})).version)
        attempt("count", lambda: db.table("a").scan().count())
    """
    assert as_0_3_0(release_0_3_0, code).splitlines() == ["ok append 3", "ok count 2"]
    db.set_properties({"gc_grace": "2h"})
    out = as_0_3_0(release_0_3_0, f"""
        attempt("open", lambda: mt.open_database({db.uri!r}).version)
        attempt("append", lambda: mt.open_table({db.uri + "/a"!r}).append(pa.table({{"id": [3]}})).version)
    """)
    refused = "CorruptTableError: manifest/v00000000000000000004.json has format version 2; this library " \
              "reads up to 1: upgrade manifest_table"
    assert out.splitlines() == [f"error open {refused}", f"error append {refused}"]
    assert db.version == 4 and db.table("a").scan().count() == 2

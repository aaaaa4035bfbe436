"""The conformance corpus (tests/conformance/README.md): every case reads, at every retained
version, as its expected rows, through the independent reader (reader.py) and through
manifest_table; the committed corpus is what this release's writer produces; the corpus stays
large enough to cover the format and small enough to commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.format.column_types import parquet_form
from tests.conformance import reader
from tests.conformance.generate import CORPUS
from tests.conformance.registry import CASES
from tests.differential_reads import difference, multiset

REPO = Path(__file__).resolve().parents[2]
DIRECTORIES = sorted(p for p in CORPUS.iterdir() if p.is_dir())


def versions_of(case: Path) -> list[tuple[int, str | None, Path]]:
    """(version, table name or None, expected rows) of every retained version of ``case``."""
    found = []
    for path in sorted((case / "expected").rglob("*.parquet")):
        relative = path.relative_to(case / "expected")
        table = relative.parts[0] if len(relative.parts) > 1 else None
        found.append((int(relative.name[1 : -len(".parquet")]), table, path))
    return found


def check_rows(actual: pa.Table, expected_path: Path, described: dict) -> None:
    """``actual`` has the expected file's columns (names, types as Arrow compares them, where
    the names of list items and map entries do not count, nullability) and its rows, in any
    order. Parquet has no second-unit timestamps or times and no date64: the expected file
    holds them as milliseconds and days, cast back to the version's type here."""
    expected = pq.read_table(expected_path)
    assert actual.schema.names == expected.schema.names == [c.split(": ")[0] for c in described["columns"]]
    cast = []
    for column, field in zip(expected.columns, actual.schema):
        if not column.type.equals(field.type):
            assert column.type.equals(parquet_form(field.type)), (field, column.type)
            column = column.cast(field.type)
        cast.append(column)
    assert [f.nullable for f in actual.schema] == [f.nullable for f in expected.schema]
    assert actual.num_rows == described["rows"]
    expected = pa.Table.from_arrays(cast, schema=actual.schema)
    assert difference(multiset(actual), multiset(expected)) is None


def described(case: Path, version: int, table: str | None) -> dict:
    info = json.loads((case / "case.json").read_text())["versions"][str(version)]
    return info if table is None else info[table]


@pytest.mark.parametrize("case", DIRECTORIES, ids=lambda p: p.name)
def test_the_independent_reader_reads_every_version_as_expected(case: Path) -> None:
    for version, table, expected in versions_of(case):
        check_rows(reader.read(case / "objects", version, table), expected, described(case, version, table))


@pytest.mark.parametrize("case", DIRECTORIES, ids=lambda p: p.name)
def test_manifest_table_reads_every_version_as_expected(case: Path) -> None:
    """Formats are forever: every case stays readable by the library as it moves on."""
    root = str(case / "objects")
    kind = json.loads((case / "case.json").read_text())["kind"]
    for version, table, expected in versions_of(case):
        if kind == "database":
            rows = mt.open_database(root).snapshot(version=version).table(table).to_arrow()
        else:
            rows = mt.open_table(root).scan(version=version).to_arrow()
        check_rows(rows, expected, described(case, version, table))


def test_the_corpus_is_what_this_release_writes() -> None:
    """The generator, run again, finds nothing to change: a writer that changed what it writes
    fails here (regenerate, and freeze the old case if the format changed: README)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.conformance.generate", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_corpus_covers_the_format_and_stays_small() -> None:
    assert sorted(p.name for p in DIRECTORIES) == sorted(CASES)
    assert len(DIRECTORIES) >= 40
    exercised = {tag for p in DIRECTORIES for tag in json.loads((p / "case.json").read_text())["exercises"]}
    for tag in (
        "format v1",
        "format v2",
        "tail",
        "segments",
        "many segments",
        "deletes map",
        "rewrites output",
        "rewrites outputs",
        "add column",
        "rename column",
        "drop column",
        "widen",
        "files without field ids",
        "app transactions",
        "catalog changes",
        "dropped tables",
        "mirrors",
        "old release",
        "column types",
        "one live bitmap per file",
        "replaced",
        "upgrade",
    ):
        assert tag in exercised, tag
    released = {json.loads((p / "case.json").read_text())["written_by"] for p in DIRECTORIES}
    assert {"release 0.1.0", "release 0.2.0", "release 0.3.0"} <= released
    size = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    assert size < 5_000_000, f"the corpus holds {size} bytes: keep its tables tiny"

"""The independent reader (reader.py): it stays independent (imports, size), it refuses what
the spec says a reader refuses, as manifest_table does, and it reads random tables of the
differential test's histories (tests/differential_history.py) exactly as the model holds
them, at every retained version, in every layout and as a database's table.

`MT_CONFORMANCE_DIFF_CASES` (default 12: three per layout, v1, v2 with tiny limits, v2, a
database's table) sizes the last test; the seeds follow `MT_DIFF_SEED` (default 18)."""

from __future__ import annotations

import ast
import json
import os
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("duckdb")

import manifest_table as mt
from manifest_table.errors import CorruptTableError
from tests.conformance import reader
from tests.conformance.generate import CORPUS
from tests.differential_cases import SEED, Outcome, run_case, run_cases
from tests.differential_model import BEFORE, Oracle, State
from tests.differential_reads import Failure, difference, multiset
from tests.differential_types import KINDS, Shape

READER = Path(reader.__file__)
DIFF_CASES = int(os.environ.get("MT_CONFORMANCE_DIFF_CASES", "12"))


def test_the_reader_imports_only_pyarrow_pyroaring_and_the_standard_library() -> None:
    allowed = {"pyarrow", "pyroaring", "__future__"} | set(sys.stdlib_module_names)
    imported = set()
    for node in ast.walk(ast.parse(READER.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "a relative import"
            imported.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Name)
            and node.id == "__import__"
            or isinstance(node, ast.Attribute)
            and (node.attr == "import_module")
        ):
            raise AssertionError("imports by name are not allowed")
    assert imported <= allowed, imported - allowed
    assert "importlib" not in imported


def test_the_reader_is_at_most_400_lines() -> None:
    assert len(READER.read_text().splitlines()) <= 400


# --- what a reader refuses -------------------------------------------------------------------
def edit_json(key: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        doc = json.loads((root / key).read_text())
        change(doc)
        (root / key).write_text(json.dumps(doc))

    return edit


def first_entry(doc: dict[str, Any]) -> dict[str, Any]:
    return (doc.get("files") or doc["tail"])[0]


def in_file(key: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        (root / key).write_bytes(change((root / key).read_bytes()))

    return edit


def entry_file(root: Path, version: int, field: str) -> Path:
    doc = json.loads((root / f"manifest/v{version:020d}.json").read_text())
    entry = first_entry(doc)
    return root / (entry[field] if field == "path" else entry["deletes"]["path"])


V1 = "v1-deletes-accumulate"  # version 5: two files with deletes
V2 = "v2-deletes-in-tail"  # version 4: two tail files, the first with deletes
DB = "db-two-tables"
M = "manifest/v{:020d}.json"
HOSTILE: dict[str, tuple[str, int | None, Callable[[Path], None]]] = {
    # name: (case, version read, the damage)
    "version field unlike the name": (V1, 5, edit_json(M.format(5), lambda d: d.update(version=4))),
    "parent_version not version - 1": (V1, 5, edit_json(M.format(5), lambda d: d.update(parent_version=3))),
    "a newer table format": (V1, 5, edit_json(M.format(5), lambda d: d.update(format_version=9))),
    "a newer pointer format": (V1, None, edit_json("_latest_manifest", lambda d: d.update(format_version=2))),
    "a file listed twice": (V1, 5, edit_json(M.format(5), lambda d: d["files"].append(d["files"][0]))),
    "a key leaving the root": (
        V1,
        5,
        edit_json(M.format(5), lambda d: first_entry(d).update(path="data/../../x.parquet")),
    ),
    "a data key under another prefix": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d).update(path="tombstones/x.parquet")),
    ),
    "rows unlike the Parquet footer": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d).update(rows=first_entry(d)["rows"] + 1)),
    ),
    "cardinality unlike the bitmap": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d)["deletes"].update(cardinality=1)),
    ),
    "cardinality above rows": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d)["deletes"].update(cardinality=99)),
    ),
    "a bitmap past its object": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d)["deletes"].update(offset=10_000)),
    ),
    "a tombstone without its magic": (
        V2,
        4,
        lambda root: in_file(str(entry_file(root, 4, "deletes").relative_to(root)), lambda b: b"XXXXXXXX" + b[8:])(
            root
        ),
    ),
    "totals that are not the sums": (V2, 4, edit_json(M.format(4), lambda d: d["totals"].update(rows=1))),
    "a column without a field id": (
        V2,
        4,
        edit_json(
            M.format(4),
            lambda d: d.update(schema=json.loads((CORPUS / V1 / "objects" / M.format(0)).read_text())["schema"]),
        ),
    ),
    # (a file of at most 1 MiB is read whole, so its size is checked on a local directory too)
    "a size unlike the object": (
        V2,
        4,
        edit_json(M.format(4), lambda d: first_entry(d).update(size=first_entry(d)["size"] + 1)),
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_reader_refuses_what_the_spec_says_a_reader_refuses(name: str, tmp_path: Path) -> None:
    case, version, damage = HOSTILE[name]
    root = tmp_path / "t"
    shutil.copytree(CORPUS / case / "objects", root)
    damage(root)
    with pytest.raises(reader.Corrupt):
        reader.read(root, version)
    with pytest.raises(CorruptTableError):
        mt.open_table(str(root)).scan(version=version).to_arrow()


def test_a_database_table_root_must_be_where_the_version_says(tmp_path: Path) -> None:
    root = tmp_path / "db"
    shutil.copytree(CORPUS / DB / "objects", root)
    key = root / M.format(reader.latest(root))
    doc = json.loads(key.read_text())
    ref = doc["tables"]["orders"]
    ref["root"] = ref["root"].replace(f"tables/{ref['id']}/", "tables/" + "0" * 32 + "/")
    key.write_text(json.dumps(doc))
    with pytest.raises(reader.Corrupt):
        reader.read(root, table="orders")
    with pytest.raises(CorruptTableError):
        mt.open_database(str(root)).table("orders").to_arrow()


# --- random tables ------------------------------------------------------------------------------
class IndependentReads:
    """A checker of the differential test that reads each version with reader.py only."""

    def __init__(self, uri: str, hive: str, oracle: Oracle, writer: Any, rng: random.Random) -> None:
        path = Path(uri)
        database = (
            (path.parent / "_latest_manifest").exists()
            and path.name == "t"
            and not (path / "_latest_manifest").exists()
        )
        self.root, self.table = (path.parent, "t") if database else (path, None)
        self.failures: list[Failure] = []
        self.reads = 0

    def version(self, version: int, state: State | None, as_of: Any, damaged: bool) -> None:
        if state is None and damaged:  # a file it lists was deleted by hand (the repair step)
            self.reads += 1
            try:
                reader.read(self.root, version, self.table)
            except Exception:  # any refusal: the reader names no error classes for a missing object
                return
            self.failures.append(Failure(f"reader.read(version={version})", "read a version whose file is gone"))
            return
        if state is None:  # expired by gc
            return
        self.reads += 1
        what = f"reader.read(version={version})"
        try:
            rows = reader.read(self.root, version, self.table)
        except KeyError:
            if state is not BEFORE:
                self.failures.append(Failure(what, "no table t at this database version"))
            return
        except Exception as error:
            self.failures.append(Failure(what, f"raised {type(error).__name__}: {error}"))
            return
        if state is BEFORE:
            self.failures.append(Failure(what, "read a table before it was created"))
        elif not rows.schema.equals(state.schema):
            self.failures.append(Failure(what, f"schema {rows.schema} is not {state.schema}"))
        elif (found := difference(multiset(rows), multiset(state.data))) is not None:
            self.failures.append(Failure(what, found))

    def close(self) -> None:
        pass


def test_the_reader_reads_the_tables_of_random_histories(tmp_path: Path) -> None:
    def run(seed: int, directory: Path) -> Outcome:
        return run_case(seed, directory, Shape(KINDS), 12, IndependentReads, flavors=("v1", "v2-tiny", "v2", "db"))

    replay = (
        "MT_DIFF_SEED={seed} MT_CONFORMANCE_DIFF_CASES=1 .venv/bin/python -m pytest -q "
        "-p no:cacheprovider tests/conformance/test_reader.py -k random"
    )
    run_cases(SEED, DIFF_CASES, 0, run, tmp_path, replay, "independent reader")

"""Generates the conformance corpus (tests/conformance/README.md) and checks it.

    python -m tests.conformance.generate            # rewrite the cases whose content changed
    python -m tests.conformance.generate --check    # list differences, write nothing (CI)
    python -m tests.conformance.generate NAME ...   # only these cases

Every case is built in a fresh in-memory store with the public API, under one hook that
makes the writer deterministic: its only source of names and commit ids is ``uuid.uuid4``
and its only wall clock ``time.time``, which ``deterministic`` seeds (by the case's name) and
freezes. Commit timestamps are then the frozen instant plus one millisecond per version
(writers take ``max(now, parent + 1)``). Python's string hashing orders a few sets the
writer iterates (a tombstone's bitmaps, the root's ``deletes`` map), so the generator runs
with ``PYTHONHASHSEED=0`` (it restarts itself with it).

A case is rewritten only when its content changed, compared as compare.py says: JSON
objects as JSON, Parquet as its schema and rows, sizes left out (a pyarrow release may
encode the same rows in other bytes), mirror objects by their keys."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import sys
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conformance import cases_databases, cases_layout, cases_releases, cases_schema, cases_types  # noqa: F401
from tests.conformance.compare import Built, differences, load
from tests.conformance.registry import CASES, Case, Site

CORPUS = Path(__file__).parent / "corpus"
FROZEN_CLOCK = 1767225600.0
"""2026-01-01T00:00:00Z: every case's version 0 is committed at this instant."""


@contextlib.contextmanager
def deterministic(name: str) -> Iterator[None]:
    """Names from a random generator seeded by ``name``, and a frozen wall clock."""
    rng = random.Random(zlib.crc32(name.encode()))
    with (
        mock.patch("uuid.uuid4", lambda: uuid.UUID(int=rng.getrandbits(128), version=4)),
        mock.patch("time.time", lambda: FROZEN_CLOCK),
    ):
        yield


def build(case: Case) -> Built:
    site = Site(case.name)
    with deterministic(case.name):
        given = case.build(site)
        objects = {info.key: site.store.get(info.key) for info in site.store.list("")}
        expected = given if given is not None else _read(case, site)
    latest = json.loads(objects["_latest_manifest"])["version"]
    info = {
        "name": case.name,
        "description": case.description,
        "exercises": list(case.exercises),
        "kind": case.kind,
        "written_by": f"release {case.written_by}" if case.written_by else "tests/conformance/generate.py",
        "latest": latest,
        "versions": _versions(case, expected),
    }
    return Built(info, objects, {path: _parquet(table) for path, table in expected.items()})


def _read(case: Case, site: Site) -> dict[str, pa.Table]:
    """The rows of every retained version, as this release reads them."""
    out = {}
    if case.kind == "table":
        table = site.open()
        for version in _retained(site):
            out[f"v{version}.parquet"] = table.scan(version=version).to_arrow()
        return out
    db = site.open_database()
    for version in _retained(site):
        snapshot = db.snapshot(version=version)
        for name in snapshot.tables():
            out[f"{name}/v{version}.parquet"] = snapshot.table(name).to_arrow()
    return out


def _retained(site: Site) -> list[int]:
    return sorted(int(info.key[len("manifest/v") : -len(".json")]) for info in site.store.list("manifest/"))


def _versions(case: Case, expected: dict[str, pa.Table]) -> dict[str, object]:
    """What case.json says of each retained version: its rows and columns (types as the
    version's schema has them: Parquet keeps some of them in another form, see README)."""
    versions: dict[str, dict[str, object]] = {}
    for path, table in sorted(expected.items(), key=lambda kv: _order(kv[0])):
        *name, file = path.split("/")
        summary = {"rows": table.num_rows, "columns": [_column(f) for f in table.schema]}
        version = file[1 : -len(".parquet")]
        if name:
            versions.setdefault(version, {})[name[0]] = summary
        else:
            versions[version] = summary
    return versions


def _order(path: str) -> tuple[int, str]:
    *name, file = path.split("/")
    return int(file[1 : -len(".parquet")]), "/".join(name)


def _column(field: pa.Field) -> str:
    return f"{field.name}: {field.type}{'' if field.nullable else ' not null'}"


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def write(built: Built, directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    for key, data in built.objects.items():
        (directory / "objects" / key).parent.mkdir(parents=True, exist_ok=True)
        (directory / "objects" / key).write_bytes(data)
    for path, data in built.expected.items():
        (directory / "expected" / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / "expected" / path).write_bytes(data)
    (directory / "case.json").write_text(json.dumps(built.info, indent=1, ensure_ascii=False) + "\n")


def main(arguments: list[str]) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # see the module's docstring
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tests.conformance.generate", *arguments],
            {**os.environ, "PYTHONHASHSEED": "0"},
        )
    check = "--check" in arguments
    names = [a for a in arguments if not a.startswith("--")] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown cases {unknown}; known: {sorted(CASES)}")
        return 2
    started, changed = time.monotonic(), []
    for name in names:
        directory = CORPUS / name
        built = build(CASES[name])
        found = differences(built, load(directory)) if directory.exists() else ["the case is not in the corpus"]
        if found:
            changed.append(name)
            print(f"{name}: " + "; ".join(found[:8]) + (f"; and {len(found) - 8} more" if len(found) > 8 else ""))
            if not check:
                write(built, directory)
    stray = sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and p.name not in CASES) if CORPUS.exists() else []
    if stray and len(names) == len(CASES):
        print(f"directories of no case: {stray}" + ("" if check else " (removed)"))
        changed += stray
        if not check:
            for name in stray:
                shutil.rmtree(CORPUS / name)
    verb = "differ from what this release writes" if check else "rewritten"
    print(f"{len(names)} cases, {len(changed)} {verb}, {time.monotonic() - started:.1f} s")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Purge (issue 34): ``Table.purge``, ``Database.purge``, ``manifest-table purge`` and
``compact(min_deleted_fraction=0)``, and the erase that docs/operations.md describes
("Erasing data physically"): after delete, purge and gc, no object under the table's root
holds an erased value, as data or as a statistic."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.operations.compaction import rewrite_group
from manifest_table.operations.purge import commit_purge, plan_purge
from manifest_table.storage import LocalStore

SCHEMA = pa.schema([("id", pa.int64()), ("email", pa.string()), ("score", pa.int64())])


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": range(start, start + n),
            "email": [f"user{i}@example.org" for i in range(start, start + n)],
            "score": [score(i) for i in range(start, start + n)],
        },
        schema=SCHEMA,
    )


def score(i: int) -> int:
    """A value found nowhere else, growing with ``i``."""
    return 10**12 + 7919 * i


def table_with_deletes(tmp_path: Path, **create: Any) -> mt.Table:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, **create)
    for start in range(0, 400, 100):
        t.append(rows(start, 100))
    t.delete("id IN (3, 5, 250)")
    return t


def live_ids(t: mt.Table) -> list[int]:
    return sorted(t.scan(columns=["id"]).to_arrow()["id"].to_pylist())


def test_purge_rewrites_exactly_the_files_holding_deleted_rows(tmp_path: Path) -> None:
    t = table_with_deletes(tmp_path)
    before, files = live_ids(t), {f.path for f in t.manifest().files}
    info = t.purge()
    assert info.operation == "purge" and info.metrics["files_removed"] == 2 and info.metrics["rows_dropped"] == 3
    assert "rows_deleted" not in info.metrics and "where" not in info.parameters
    assert live_ids(t) == before
    now = t.manifest().files
    assert not [f for f in now if f.deleted_rows] and len(files & {f.path for f in now}) == 2
    assert not t.purge().committed  # nothing left to do


def test_purge_where_deletes_and_rewrites_in_one_commit_without_recording_the_condition(tmp_path: Path) -> None:
    t = table_with_deletes(tmp_path)
    version = t.version
    info = t.purge(where="email = 'user42@example.org' OR id = 399")
    assert info.version == version + 1 and info.metrics["rows_deleted"] == 2 and info.metrics["rows_dropped"] == 5
    assert 42 not in live_ids(t) and 399 not in live_ids(t) and len(live_ids(t)) == 395
    recorded = t.store.get(f"manifest/v{info.version:020d}.json")
    assert b"user42" not in recorded and b"id = 399" not in recorded and info.parameters["where"] == "(not recorded)"
    changes = t.changes(version).to_arrow()
    assert sorted(changes["id"].to_pylist()) == [42, 399] and set(changes["_change_type"].to_pylist()) == {"delete"}


def test_a_purge_that_fails_midway_leaves_none_of_its_files(tmp_path: Path) -> None:
    """The second file to rewrite is gone: the purge raises, and the first file's outputs and
    the plan's tombstone objects are removed with it (nothing for GC to find)."""
    t = table_with_deletes(tmp_path)
    second = [f for f in t.manifest().files if f.deleted_rows][1]
    t.store.delete(second.path)
    before = {info.key for info in t.store.list()}
    with pytest.raises(mt.errors.ManifestTableError, match=second.path):
        t.purge()
    assert {info.key for info in t.store.list()} == before and t.version == 5


def test_compact_with_min_deleted_fraction_0_leaves_no_deleted_row(tmp_path: Path) -> None:
    t = table_with_deletes(tmp_path, target_file_size=1)  # every file counts as big
    assert not t.compact(min_deleted_fraction=0.2).committed  # 1% deleted: below the default
    info = t.compact(min_deleted_fraction=0)
    assert info.metrics["files_removed"] == 2 and not [f for f in t.manifest().files if f.deleted_rows]


def test_a_delete_committed_while_a_purge_rewrites_is_carried_onto_its_outputs(tmp_path: Path) -> None:
    t = table_with_deletes(tmp_path)
    base, pointer = t.log.latest()
    dvs = DeletionVectors(t.store)
    matched = {f.path: p for f, p in t.scan(columns=[], where="id = 7").matching_positions()}
    plan = plan_purge(t, base, dvs, matched)
    results = [rewrite_group(t, g, dvs) for g in plan.groups]
    t.delete("id IN (8, 9, 300)")  # 8 and 9 sit in a file the purge rewrites; 300 in one it leaves
    info = commit_purge(t, base, pointer, plan, results, True, mt.clock.Stamp.now())
    assert info.committed and info.metrics["rows_deleted"] == 1 + 2  # 7, then 8 and 9 carried onto an output
    assert not {3, 5, 7, 8, 9, 250, 300} & set(live_ids(t)) and len(live_ids(t)) == 393


def test_database_purge_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    for name in ("a", "b", "c"):
        db.create_table(name, SCHEMA).append(rows(0, 50))
    db.table("a").delete("id < 3")
    db.table("b").delete("id = 7")
    done = db.purge()
    assert {name for name, info in done.items() if info.committed} == {"a", "b"}
    assert not [f for name in "abc" for f in db.table(name).manifest().files if f.deleted_rows]
    t = mt.write_table(str(tmp_path / "t"), rows(0, 20))
    assert main(["purge", t.uri, "--where", "email = 'user3@example.org'"]) == 0
    assert "1 row matched --where" in capsys.readouterr().out
    assert 3 not in live_ids(t) and not [f for f in t.manifest().files if f.deleted_rows]
    assert main(["purge", str(tmp_path / "db"), "--where", "id = 1"]) == 1  # a database: no --where
    assert "--where applies to a table" in capsys.readouterr().err


# --- erasing data physically --------------------------------------------------------------
ERASED_EMAILS = [f"user{i}@example.org" for i in (0, 150, 399)]
ERASED_SCORES = [score(i) for i in (0, 150, 399)]  # 0 and 399: the table's min and max score


def test_after_delete_purge_and_gc_no_object_holds_an_erased_value(tmp_path: Path) -> None:
    """The sequence of docs/operations.md, on a table mirrored to Iceberg and Delta, with
    several versions after the rows were written: every object under the root is decoded
    (Parquet data, segments and checkpoints with their statistics, JSON manifests and logs,
    Avro manifests, tombstones and deletion vectors as bytes) and none holds an erased value,
    even as a min or max statistic."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg", "delta"],
                        properties={"tail_limit": 1, "segment_target_files": 3})
    for start in range(0, 400, 50):
        t.append(rows(start, 50))
    t.delete("id = 7")
    assert _holding(tmp_path / "t")  # before: the values are everywhere
    t.purge(where="id IN (0, 150, 399)")
    t.append(rows(1000, 10))
    t.gc(retain_versions=1, retain_for=None, grace="0s", force=True)
    assert sorted(set(range(400)) - set(live_ids(t))) == [0, 7, 150, 399]
    assert _holding(tmp_path / "t") == []


def _holding(root: Path) -> list[str]:
    """Objects under ``root`` that hold an erased value, and where."""
    found = []
    store = LocalStore(str(root))
    for info in store.list():
        data = store.get(info.key)
        for where, value in _values(info.key, data):
            if value in ERASED_EMAILS or value in ERASED_SCORES:
                found.append(f"{info.key}: {where} {value!r}")
    return found


def _values(key: str, data: bytes) -> Iterator[tuple[str, Any]]:
    """Every value an object holds, decoded by its kind; bytes also searched for each erased
    email and each erased score's 8-byte little-endian form (Iceberg's bounds)."""
    for email in ERASED_EMAILS:
        if email.encode() in data:
            yield "bytes", email
    for value in ERASED_SCORES:
        if struct.pack("<q", value) in data:
            yield "bytes", value
    if data[:4] == b"PAR1":
        parquet = pq.ParquetFile(pa.BufferReader(data))
        yield from (("row", v) for v in _flat(parquet.read().to_pylist()))
        meta = parquet.metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                stats = meta.row_group(g).column(c).statistics
                if stats is not None and stats.has_min_max:
                    yield "statistic", stats.min
                    yield "statistic", stats.max
    elif data[:4] == b"Obj\x01":
        yield from (("avro", v) for v in _flat(list(fastavro.reader(io.BytesIO(data)))))
    elif key.endswith(".json") or key.endswith(".text"):
        for line in data.decode().splitlines():
            if line.strip():
                yield from (("json", v) for v in _flat(json.loads(line)))
    # else: tombstones, Puffin and Delta deletion vectors hold positions only (searched as bytes)


def _flat(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _flat(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _flat(v)
    elif isinstance(value, str) and value[:1] in "{[":
        try:
            yield from _flat(json.loads(value))  # JSON inside JSON: Delta's stats
        except ValueError:
            yield value
    else:
        yield value

"""What the readers found in the mirrors (issue 31), one test per finding, each read by the
readers others wrote: strict JSON, exact decimal bounds, null counts, Delta features declared only as
used, Delta stats that claim only what holds, garbage collection that leaves no expired
version offered, Delta time travel by timestamp, dropped columns Iceberg readers cannot read,
and database tables' mirrors."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.expressions import EqualTo, IsNull
from pyiceberg.table import StaticTable

import manifest_table as mt
from manifest_table.errors import MirrorTypeError
from tests import delta_protocol
from tests.mirror_readers import delta_rows, iceberg_rows, rows

BOTH = {"iceberg": {}, "delta": {"checkpoint_interval": 3}}


def _log(root: Path) -> list[dict[str, Any]]:
    """Every action of every Delta JSON commit, parsed strictly (no ``Infinity`` or ``NaN``)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    actions = []
    for path in sorted((root / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line, parse_constant=refuse)
            if "add" in action:
                json.loads(action["add"]["stats"], parse_constant=refuse)
            actions.append(action)
    return actions


def _protocol(uri: str, version: int | None = None) -> set[str]:
    return set(DeltaTable(uri, version=version).protocol().reader_features or [])


# --- 1. strict JSON ------------------------------------------------------------------------------
def test_infinite_floats_leave_the_delta_log_strict_json(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("g", pa.float32())])
    t = mt.create_table(str(tmp_path / "t"), schema, mirrors=["iceberg", "delta"])
    t.append(
        pa.table(
            {
                "id": [1, 2, 3],
                "f": [float("inf"), 1.5, float("-inf")],
                "g": pa.array([float("nan"), float("-inf"), 2.0], pa.float32()),
            }
        )
    )
    t.append(pa.table({"id": [4, 5], "f": [1.5, 2.5], "g": pa.array([float("inf"), 1.0], pa.float32())}))
    stats = [json.loads(a["add"]["stats"]) for a in _log(tmp_path / "t") if "add" in a]
    assert [(s["minValues"].get("f"), s["maxValues"].get("f")) for s in stats] == [(None, None), (1.5, 2.5)]
    expected = rows(t.to_arrow())
    assert delta_rows(t.uri) == iceberg_rows(t.uri) == expected
    assert rows(DeltaTable(t.uri).to_pyarrow_table()) == expected
    assert rows(pl.scan_delta(t.uri).collect().to_arrow()) == expected
    positive = pl.scan_delta(t.uri).filter(pl.col("f") > 0).collect().to_arrow()  # pruned by the bounds kept
    assert rows(positive) == rows(t.scan(where="f > 0").to_arrow())


# --- 2. exact decimal bounds -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [pa.decimal128(38, 0), pa.decimal128(38, 10), pa.decimal128(30, 29)])
def test_iceberg_decimal_bounds_are_exact_at_any_precision(tmp_path: Path, dtype: pa.Decimal128Type) -> None:
    digits = "12345678901234567890123456789012345678"[: dtype.precision]
    text = f"{digits[: dtype.precision - dtype.scale]}.{digits[dtype.precision - dtype.scale :]}".rstrip(".")
    one = Decimal("1." + "0" * dtype.scale if dtype.scale else "1")
    values = [Decimal(text), Decimal("-" + text), one]  # (unary minus would round to 28 digits)
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("d", dtype)]), mirrors=["iceberg"])
    for i, value in enumerate(values):  # one file each: each file's bounds are its value
        t.append(pa.table({"id": [i], "d": pa.array([value], dtype)}))
    table = StaticTable.from_metadata(t.uri)
    for value in values:
        found = table.scan(row_filter=EqualTo("d", value)).to_arrow()
        assert found.column("d").to_pylist() == [value], f"{value} through pyiceberg"


def test_iceberg_null_counts_let_a_reader_skip_files_without_nulls(tmp_path: Path) -> None:
    """Each data file's ``null_value_counts`` are the manifest's: a reader asking for the
    rows where a column is null plans only the files holding one."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    t = mt.create_table(str(tmp_path / "t"), schema, mirrors=["iceberg"])
    t.append(pa.table({"id": [1, 2], "name": ["a", None]}))
    t.append(pa.table({"id": [3, 4], "name": ["b", "c"]}))
    table = StaticTable.from_metadata(t.uri)
    planned = [task.file for task in table.scan(row_filter=IsNull("name")).plan_files()]
    with_null = next(f for f in t.manifest().files if f.stats["name"].null_count)
    assert [(f.file_path.rsplit("/", 1)[-1], dict(f.null_value_counts)) for f in planned] == [
        (with_null.path.rsplit("/", 1)[-1], {1: 0, 2: 1})
    ]
    assert table.scan(row_filter=IsNull("name")).to_arrow().column("id").to_pylist() == [2]


# --- 3. column mapping only from the first rename ----------------------------------------------------
def test_delta_declares_only_the_features_a_version_uses(tmp_path: Path) -> None:
    """A table never renamed reads through deltalake's pyarrow path and Polars; deletion
    vectors and column mapping are declared while used (Delta may enable both on an
    existing table), and every version reads the same in deltalake and Polars."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    t = mt.create_table(str(tmp_path / "t"), schema, mirrors=BOTH)
    t.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "score": [0.5, 1.5, 2.5]}))
    with t.update_schema() as s:
        s.drop_column("score")  # a drop alone maps nothing: the files' names are the schema's
    t.append(pa.table({"id": [4], "name": ["d"]}))
    plain = t.version
    assert _protocol(t.uri) == set()
    assert rows(DeltaTable(t.uri).to_pyarrow_table()) == rows(t.to_arrow())
    assert rows(pl.read_delta(t.uri).to_arrow()) == rows(t.to_arrow())
    t.delete("id = 2")
    assert _protocol(t.uri) == {"deletionVectors"}
    assert rows(pl.scan_delta(t.uri).collect().to_arrow()) == rows(t.to_arrow())
    t.compact(target_file_size=1 << 20, min_deleted_fraction=0.01)
    assert _protocol(t.uri) == set()  # no file has a deletion vector any more
    with t.update_schema() as s:
        s.rename_column("name", "label")
    assert _protocol(t.uri) == {"columnMapping"}
    metadata = next(a["metaData"] for a in reversed(_log(tmp_path / "t")) if "metaData" in a)
    assert metadata["configuration"]["delta.columnMapping.mode"] == "name"
    for version in range(t.version + 1):
        assert delta_rows(t.uri, version) == rows(t.scan(version=version).to_arrow()), version
    assert rows(DeltaTable(t.uri, version=plain).to_pyarrow_table()) == rows(t.scan(version=plain).to_arrow())


def test_delta_stats_claim_only_what_holds(tmp_path: Path) -> None:
    """Bounds are tight only for a file without a deletion vector (a reader may answer
    ``min``/``max`` from tight bounds alone); timestamps carry no bounds (Delta truncates them
    to milliseconds, and a truncated maximum below the true one would skip a matching file); a
    NOT NULL column is declared as the invariant Spark's Delta takes it for."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("at", pa.timestamp("us", "UTC")), ("v", pa.float64())]
    )
    t = mt.create_table(str(tmp_path / "t"), schema, mirrors=["delta"])
    at = pa.array([1_700_000_000_000_001, 1_700_000_000_000_999, None], pa.timestamp("us", "UTC"))
    t.append(pa.table({"id": [1, 2, 3], "at": at, "v": [0.5, 1.5, 2.5]}, schema=schema))
    t.delete("id = 2")
    adds = [a["add"] for a in _log(tmp_path / "t") if "add" in a]
    stats = [json.loads(a["stats"]) for a in adds]
    assert [(s["tightBounds"], "deletionVector" in a) for s, a in zip(stats, adds)] == [(True, False), (False, True)]
    assert all(set(s["minValues"]) == set(s["maxValues"]) == {"id", "v"} for s in stats)
    assert all(s["nullCount"]["at"] == 1 for s in stats)
    assert "invariants" in (DeltaTable(t.uri).protocol().writer_features or [])
    assert delta_rows(t.uri) == rows(t.to_arrow())
    assert delta_protocol.problems(t) == []


# --- 4. GC: no expired version offered ------------------------------------------------------------------
def test_gc_leaves_no_expired_version_offered_by_either_mirror(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])
    t = mt.create_table(str(tmp_path / "t"), schema, mirrors=BOTH)
    for i in range(8):
        t.append(pa.table({"id": [i]}))
        if i % 3 == 2:
            t.delete(f"id = {i - 1}")
    t.compact(target_file_size=1 << 20, min_deleted_fraction=0.01)
    t.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    retained = {info.version for info in t.history()}
    # Iceberg: every retained metadata file lists only retained snapshots, each readable.
    for version in retained:
        table = StaticTable.from_metadata(f"{t.uri}/metadata/v{version}.metadata.json")
        listed = {int(s.summary["manifest-table.version"]): s.snapshot_id for s in table.metadata.snapshots}
        assert set(listed) <= retained, f"v{version}.metadata.json lists expired versions"
        for snapshot_version, snapshot_id in listed.items():
            assert rows(table.scan(snapshot_id=snapshot_id).to_arrow()) == rows(
                t.scan(version=snapshot_version).to_arrow()
            )
    # Delta: every version the log offers is retained and reads.
    offered = sorted(int(p.name[:20]) for p in (tmp_path / "t" / "_delta_log").glob("*.json"))
    assert set(offered) == retained
    for version in offered:
        assert delta_rows(t.uri, version) == rows(t.scan(version=version).to_arrow())


# --- 5. Delta time travel by timestamp -------------------------------------------------------------------
def test_delta_commits_carry_our_commit_time(tmp_path: Path) -> None:
    """Each Delta commit records our commit time as its in-commit timestamp (Spark's Delta
    travels by it: tests/mirrors/test_mirror_matrix.py), and a mirror started late has a JSON commit
    at its first version, so a reader finds that version's time (deltalake refused any time
    before the mirror's second commit)."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    started = t.set_mirrors(["delta"]).version
    time.sleep(0.01)
    t.append(pa.table({"id": [2]}))
    infos = {i.version: i for i in t.history()}
    first = json.loads((tmp_path / "t" / "_delta_log" / f"{started:020d}.json").read_text().splitlines()[0])
    commits = {
        json.loads(p.read_text().splitlines()[0])["commitInfo"]["manifest_table"]["version"]: json.loads(
            p.read_text().splitlines()[0]
        )["commitInfo"]
        for p in (tmp_path / "t" / "_delta_log").glob("*.json")
    }
    assert first["commitInfo"]["inCommitTimestamp"] == int(infos[started].timestamp.timestamp() * 1000)
    for version, info in commits.items():
        assert info["inCommitTimestamp"] == int(infos[version].timestamp.timestamp() * 1000)
    table = DeltaTable(t.uri)
    table.load_as_version(infos[started].timestamp)
    assert table.version() == started
    assert delta_rows(t.uri, started) == rows(t.scan(version=started).to_arrow())


# --- 6. dropped columns Iceberg readers cannot read ---------------------------------------------------------
@pytest.mark.parametrize(
    "column",
    [
        pa.field("l", pa.list_(pa.int64())),
        pa.field("s", pa.struct([("a", pa.int64())])),
        pa.field("d", pa.duration("us")),
    ],
)
def test_iceberg_is_refused_while_live_files_hold_a_dropped_column_it_cannot_represent(
    tmp_path: Path, column: pa.Field
) -> None:
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), column]))
    values = {"l": [[1], None], "s": [{"a": 1}, None], "d": [1, None]}[column.name]
    t.append(pa.table({"id": [1, 2], column.name: pa.array(values, column.type)}))
    t.append(pa.table({"id": [3], column.name: pa.array([None], column.type)}))
    with t.update_schema() as s:
        s.drop_column(column.name)
    before = t.version
    with pytest.raises(MirrorTypeError, match=f"still holds column '{column.name}'"):
        t.set_mirrors(["iceberg"])
    assert t.version == before and t.mirrors == []
    t.set_mirrors(["delta"])  # Delta readers read a file's columns by name: the dropped one is never read
    t.compact(target_file_size=1 << 30)  # rewrites both files without the dropped column
    t.set_mirrors(["iceberg", "delta"])
    assert iceberg_rows(t.uri) == delta_rows(t.uri) == rows(t.to_arrow())


# --- 8. mirrors of a database's tables -----------------------------------------------------------------------
def test_a_database_s_tables_have_iceberg_mirrors_in_their_folders(tmp_path: Path) -> None:
    """Each table's mirror lives in its folder (``tables/<table_id>/``), is written after each
    database commit that changes the table (a transaction over two tables included), and
    survives the database's garbage collection for every state it retains."""
    from manifest_table.errors import InvalidArgumentError

    db = mt.create_database(str(tmp_path / "db"))
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    a = db.create_table("a", schema, mirrors=["iceberg"])
    b = db.create_table("b", schema)
    a.append(pa.table({"id": [1, 2, 3], "name": ["x", "y", None]}))
    b.append(pa.table({"id": [7, 8], "name": ["p", "q"]}))
    assert b.set_mirrors(["iceberg"]).committed
    with db.transaction() as tx:
        tx.table("a").delete("id = 2")
        tx.table("b").append(pa.table({"id": [9], "name": ["r"]}))
    for _ in range(3):  # versions that leave a alone
        b.delete(f"id = {b.to_arrow().column('id').to_pylist()[0]}")
    with pytest.raises(InvalidArgumentError, match="no Delta mirror"):
        a.set_mirrors(["iceberg", "delta"])
    with pytest.raises(InvalidArgumentError, match="no Delta mirror"):
        db.create_table("c", schema, mirrors=["delta"])

    def folder(name: str) -> str:
        return str(tmp_path / "db" / "tables" / db.table(name).table_id)

    for name in ("a", "b"):
        assert iceberg_rows(folder(name)) == rows(db.table(name).to_arrow()), name
        # its metadata lists its own snapshot only: which older states stay is the database's to say
        assert len(StaticTable.from_metadata(folder(name)).metadata.snapshots) == 1, name
    db.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    for name in ("a", "b"):
        table = db.table(name)
        assert iceberg_rows(folder(name)) == rows(table.to_arrow()), f"{name} after gc"
        assert list((Path(folder(name)) / "tombstones").glob("*.puffin")), "the deletion vectors' Puffin files stay"
    changed = [info.version for info in db.table("b").history()]
    for version in changed:  # every retained change of b is described by its own metadata file
        assert iceberg_rows(folder("b"), version) == rows(db.table("b").scan(version=version).to_arrow())


# --- the bound on listed snapshots ---------------------------------------------------------------------------
def test_max_snapshots_bounds_what_iceberg_metadata_lists(tmp_path: Path) -> None:
    from manifest_table.errors import CorruptTableError, InvalidArgumentError

    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), mirrors={"iceberg": {"max_snapshots": 3}})
    for i in range(6):
        t.append(pa.table({"id": [i]}))
    table = StaticTable.from_metadata(t.uri)
    assert [int(s.summary["manifest-table.version"]) for s in table.metadata.snapshots] == [4, 5, 6]
    assert iceberg_rows(t.uri, 2) == rows(t.scan(version=2).to_arrow())  # older versions: by their own file
    for bad, message in (
        ({"iceberg": {"max_snapshots": 0}}, "max_snapshots must be an integer >= 1"),
        ({"iceberg": {"checkpoint_interval": 5}}, "unknown options"),
    ):
        with pytest.raises(InvalidArgumentError, match=message):
            mt.create_table(str(tmp_path / "bad"), pa.schema([("id", pa.int64())]), mirrors=bad)
    key = tmp_path / "t" / "manifest" / f"v{t.version:020d}.json"
    doc = json.loads(key.read_text())
    doc["mirrors"]["iceberg"]["max_snapshots"] = -1
    key.write_text(json.dumps(doc))
    with pytest.raises(CorruptTableError, match="mirrors.iceberg.max_snapshots"):
        mt.open_table(t.uri).manifest(t.version)

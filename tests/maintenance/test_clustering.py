"""Clustering (issue 34): the ``cluster_by`` property, the curve, the incremental plan, deletes
carried through a clustering rewrite, the format of runs, and ``sort_by`` at write time.
Speed is measured in tests/benchmarks/clustering.py, never asserted here."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.data.curve import curve_order, hilbert_index
from manifest_table.data.placement import placement
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.errors import InvalidArgumentError
from manifest_table.format.manifest import manifest_key
from manifest_table.maintenance.job import JobOptions, maintain
from manifest_table.operations import clustering
from manifest_table.operations.compaction import commit_compaction, plan_compaction, rewrite_group

SCHEMA = pa.schema([("id", pa.int64()), ("user_id", pa.int64()), ("country", pa.string())])
COUNTRIES = [f"C{i:02d}" for i in range(40)]


def batch(rng: np.random.Generator, start: int, n: int, users: tuple[int, int] = (0, 100_000)) -> pa.Table:
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "user_id": rng.integers(*users, n),
            "country": np.array(COUNTRIES)[rng.integers(0, len(COUNTRIES), n)],
        },
        schema=SCHEMA,
    )


def clustered_table(tmp_path: Path, columns: list[str], files: int = 12, rows: int = 4_000) -> mt.Table:
    """``files`` appends in random order of both columns, on a table with a small target size."""
    rng = np.random.default_rng(7)
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"cluster_by": columns}, target_file_size=12_000)
    for i in range(files):
        t.append(batch(rng, i * rows, rows))
    return t


def ids(t: mt.Table, where: str | None = None) -> Counter[int]:
    return Counter(t.scan(columns=["id"], where=where).to_arrow()["id"].to_pylist())


def files_read(t: mt.Table, where: str) -> float:
    return len(t.scan(where=where).plan_files()) / len(t.manifest().files)


# --- the curve ----------------------------------------------------------------------------
@pytest.mark.parametrize("axes, bits", [(2, 4), (3, 3), (4, 2)])
def test_the_hilbert_index_visits_every_cell_once_stepping_to_a_neighbour(axes: int, bits: int) -> None:
    cells = np.array(list(itertools.product(range(2**bits), repeat=axes)), np.uint64)
    index = hilbert_index(cells, bits)
    assert sorted(index.tolist()) == list(range(len(cells)))
    path = cells[np.argsort(index)].astype(np.int64)
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()


def test_curve_order_is_a_stable_function_of_the_values_with_nulls_last() -> None:
    one = curve_order([pa.array([3, None, 1, 3, 2])])
    assert one.tolist() == [2, 4, 0, 3, 1]  # ties (the two 3s) in input order, null last
    columns = [pa.array([5, 5, None, 1, 5, 1]), pa.array(["b", "b", "a", None, "b", None])]
    order = curve_order(columns)
    assert sorted(order.tolist()) == list(range(6))
    assert [i for i in order.tolist() if i in (0, 1, 4)] == [0, 1, 4]  # equal rows keep their order
    assert curve_order([c.slice(0) for c in columns]).tolist() == order.tolist()


# --- clustering ---------------------------------------------------------------------------
def test_clustering_by_one_column_sorts_rows_into_files_with_disjoint_ranges(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id"])
    before = ids(t)
    assert files_read(t, "user_id BETWEEN 40000 AND 40999") == 1  # random order: every file
    info = t.compact()
    assert info.committed and info.parameters["rewrites"][0]["order"] == {"curve": "hilbert", "field_ids": [2]}
    assert ids(t) == before
    files = sorted(t.manifest().files, key=lambda f: f.stats["user_id"].min)
    assert len(files) > 5 and len({f.cluster_run for f in files}) == 1
    assert all(a.stats["user_id"].max <= b.stats["user_id"].min for a, b in itertools.pairwise(files))
    assert files_read(t, "user_id BETWEEN 40000 AND 40999") <= 2 / len(files)
    assert ids(t, "user_id BETWEEN 40000 AND 40999") == Counter(
        i for i, u in zip(*(t.to_arrow()[c].to_pylist() for c in ("id", "user_id"))) if 40000 <= u <= 40999
    )
    assert not t.compact().committed  # the layout is as good as it gets


def test_clustering_by_two_columns_narrows_each_columns_filter(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id", "country"], files=16)
    before = ids(t)
    t.compact()
    assert ids(t) == before and len(t.manifest().files) >= 12
    by_user = np.mean([files_read(t, f"user_id BETWEEN {u} AND {u + 999}") for u in range(0, 99_000, 9_000)])
    by_country = np.mean([files_read(t, f"country = '{c}'") for c in COUNTRIES[::4]])
    assert by_user < 0.6 and by_country < 0.6, (by_user, by_country)  # random order: 1.0 each
    assert not t.compact().committed


def test_boxes_that_only_touch_do_not_overlap() -> None:
    """Files cut inside a run of one value share that value as a bound: such boxes meet but
    do not cross, and counting them as overlapping would rewrite a neighbour for nothing at
    every compaction. Boxes overlap where they meet in every column and cross in one."""
    lo = np.array([[0], [10], [5], [20], [10]], dtype=np.int64)
    hi = np.array([[10], [20], [15], [20], [10]], dtype=np.int64)
    # 0..10 and 10..20 touch; 5..15 crosses both; the single values 20 and 10 touch their ends
    assert clustering.overlapping(lo, hi, [0], [1, 3]).tolist() == [False]
    assert clustering.overlapping(lo, hi, [1, 4], [3, 0]).tolist() == [False, False]
    assert clustering.overlapping(lo, hi, [0, 1, 3, 4], [2]).tolist() == [True, True, False, True]
    lo2 = np.array([[0, 0], [10, 5], [10, 10]], dtype=np.int64)
    hi2 = np.array([[10, 10], [20, 15], [20, 20]], dtype=np.int64)
    # touching in the first column, crossing in the second: overlap; touching in both: not
    assert clustering.overlapping(lo2, hi2, [0], [1]).tolist() == [True]
    assert clustering.overlapping(lo2, hi2, [0], [2]).tolist() == [False]


def test_new_rows_in_one_range_rewrite_only_the_files_they_overlap(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id"])
    t.compact()
    layout = len(t.manifest().files)
    rng = np.random.default_rng(1)
    t.append(batch(rng, 10**6, 300, users=(50_000, 50_300)))
    assert not t.compact().committed  # one small file that overlaps little: left as it is
    t.append(batch(rng, 2 * 10**6, 300, users=(50_000, 50_300)))
    before = ids(t)
    info = t.compact()
    assert info.committed and info.metrics["files_removed"] <= 2 + 2 < layout, info.metrics
    assert ids(t) == before


def test_random_new_rows_wait_in_a_small_run_instead_of_rewriting_the_table(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id", "country"])
    t.compact()
    rows = t.scan().count()
    rng = np.random.default_rng(2)
    rewritten = []
    for i in range(4):
        t.append(batch(rng, 10**6 + i * 500, 500))
        t.append(batch(rng, 2 * 10**6 + i * 500, 500))
        info = t.compact()
        rewritten.append(info.metrics.get("rows_rewritten", 0))
    assert max(rewritten) < rows / 2, rewritten  # the big run stays; new rows merge with their like
    runs = Counter(f.cluster_run for f in t.manifest().files)
    assert None not in runs and len(runs) <= 3, runs


def test_the_maintenance_job_clusters(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id"], files=6, rows=1_000)
    before = ids(t)
    outcome = maintain(t.uri, JobOptions(retain_for=None, force=True, grace="0s"))
    assert outcome.ok and "compaction: version" in outcome.lines[0], outcome.lines
    assert ids(t) == before and None not in {f.cluster_run for f in t.manifest().files}
    assert "nothing to do" in maintain(t.uri, JobOptions(dry_run=True)).lines[0]


def test_no_merge_takes_more_than_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge is sorted in memory: past ``MAX_MERGE_BYTES`` the unclustered files become
    several runs, which later compactions leave apart."""
    t = clustered_table(tmp_path, ["user_id"], files=8, rows=1_000)
    bound = sum(f.size for f in t.manifest().files) * 3.5 / 8  # three files and a half
    monkeypatch.setattr(clustering, "MAX_MERGE_BYTES", bound)
    before = ids(t)
    info = t.compact()
    assert [len(rw["sources"]) for rw in info.parameters["rewrites"]] == [3, 3, 2]
    assert len({f.cluster_run for f in t.manifest().files}) == 3 and ids(t) == before
    assert not t.compact().committed


def test_changing_cluster_by_reclusters_the_table_by_the_new_columns(tmp_path: Path) -> None:
    t = clustered_table(tmp_path, ["user_id"])
    t.compact()
    t.set_properties({"cluster_by": ["country"]})
    plan = plan_compaction(t.manifest(), t.write_options.target_file_size, 0.2)
    assert len(plan) == 1 and len(plan[0].files) == len(t.manifest().files) and plan[0].order == (3,)
    t.compact()
    assert files_read(t, "country = 'C07'") < 0.5


def test_deletes_follow_rows_through_a_clustering_rewrite_both_ways(tmp_path: Path) -> None:
    """A delete staged before a clustering commits rebases onto it; a delete that commits while
    a clustering rewrites is carried onto its outputs. Both recompute where each row went."""
    t = clustered_table(tmp_path, ["country", "user_id"], files=6, rows=2_000)
    t.delete(mt.col("id").isin(list(range(0, 12_000, 7))))
    expected = ids(t)
    tx = t.transaction()
    tx.delete(mt.col("id").isin(list(range(1, 12_000, 5))))
    assert t.compact().committed
    tx.commit()
    expected -= Counter(range(1, 12_000, 5))
    assert ids(t) == +expected
    rng = np.random.default_rng(3)
    for i in range(3):
        t.append(batch(rng, 20_000 + i * 1_000, 1_000))
    expected.update(range(20_000, 23_000))
    base, pointer = t.log.latest()
    groups = plan_compaction(base, 12_000, 0.2)
    assert any(g.order for g in groups)
    results = [rewrite_group(t, g, DeletionVectors(t.store)) for g in groups]
    gone = list(range(2, 23_000, 3))
    t.delete(mt.col("id").isin(gone))
    info = commit_compaction(t, base, pointer, results, {})
    assert info.metrics["rows_deleted"] > 0
    assert ids(t) == +(expected - Counter(gone))


def test_the_placement_recomputed_from_the_sources_is_where_the_rewrite_put_each_row(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.string())])
    t = mt.create_table(str(tmp_path / "t"), schema, properties={"cluster_by": ["x", "s"]}, target_file_size=4_000)
    for i in range(4):
        n = 700
        x = rng.choice([0.0, -0.0, 1.5, float("nan"), None, 2.0], n).tolist()  # ties, NaN, nulls
        t.append(pa.table({"id": range(i * n, (i + 1) * n), "x": x, "s": rng.choice(["a", "b", None], n).tolist()},
                          schema=schema))
    t.delete("id < 100")
    (group,) = plan_compaction(t.manifest(), 4_000, 0.2)
    outputs, rewrite = rewrite_group(t, group, DeletionVectors(t.store))
    written = pa.concat_tables([pq.read_table(pa.BufferReader(t.store.get(f.path))) for f in outputs])["id"]
    live = [i for f in group.files for i in _live_ids(t, f)]  # the sources' live rows, in order
    places = placement(t.io, group.version, group.files, group.fields, rewrite.order, DeletionVectors(t.store))
    assert sorted(live) == sorted(t.scan(columns=["id"]).to_arrow()["id"].to_pylist())
    assert [written[int(p)].as_py() for p in places] == live
    t.store.delete_unreferenced(f.path for f in outputs)


def _live_ids(t: mt.Table, f: mt.DataFile) -> list[int]:
    return [i for g, rows in t.scan(columns=["id"]).matching_rows() if g.path == f.path for i in rows["id"].to_pylist()]


# --- the property and the format ----------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    ([], "1 to 4"), (["a", "b", "c", "d", "e"], "1 to 4"), (["id", "id"], "distinct"), (5, "1 to 4"),
    (["nope"], "names column 'nope', which the table would not have"), (["tags"], "has no order"),
])
def test_cluster_by_is_checked_before_anything_is_written(tmp_path: Path, value: object, message: str) -> None:
    schema = SCHEMA.append(pa.field("tags", pa.list_(pa.string())))
    with pytest.raises(InvalidArgumentError, match=message):
        mt.create_table(str(tmp_path / "a"), schema, properties={"cluster_by": value})
    t = mt.create_table(str(tmp_path / "b"), schema)
    with pytest.raises(InvalidArgumentError, match=message):
        t.set_properties({"cluster_by": value})
    assert t.version == 0


def test_cluster_by_from_the_cli_and_an_upgrade(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    assert main(["properties", t.uri, "cluster_by=user_id,country", "sort_by=[\"id\"]"]) == 0
    assert t.properties["cluster_by"] == ["user_id", "country"] and t.properties["sort_by"] == ["id"]
    assert '["user_id", "country"]' in capsys.readouterr().out
    old = mt.create_table(str(tmp_path / "v1"), SCHEMA, format_version=1)
    with pytest.raises(InvalidArgumentError, match="names column 'nope'"):
        old.upgrade(properties={"cluster_by": ["nope"]})
    assert old.upgrade(properties={"cluster_by": ["country"]}).committed and old.properties["cluster_by"] == ["country"]


def test_a_renamed_column_stays_in_cluster_by_and_a_listed_one_is_not_dropped(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"cluster_by": ["country", "id"], "sort_by": "id"})
    assert t.manifest().format_version == 3  # 0.3.0 neither reads nor writes it
    with t.update_schema() as s:
        s.rename_column("country", "land")
    assert t.properties["cluster_by"] == ["land", "id"] and t.properties["sort_by"] == ["id"]
    with pytest.raises(InvalidArgumentError, match="cluster_by names column 'land'"):
        with t.update_schema() as s:
            s.drop_column("land")
    assert "land" in t.schema.names
    t.set_properties({"cluster_by": None})
    with t.update_schema() as s:
        s.drop_column("land")


def test_runs_are_recorded_per_file_through_segments_and_shown(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rng = np.random.default_rng(5)
    tiny = {"tail_limit": 1, "segment_target_files": 3, "max_small_segments": 2}
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={**tiny, "cluster_by": ["user_id"]},
                        target_file_size=8_000)
    plain = mt.create_table(str(tmp_path / "plain"), SCHEMA, properties=tiny)
    for i in range(6):
        t.append(batch(rng, i * 1_000, 1_000))
        plain.append(batch(rng, i * 1_000, 1_000))
    t.compact()
    t.append(batch(rng, 10_000, 50))  # segments flush and merge with runs in them
    t.append(batch(rng, 11_000, 50))
    fresh = mt.open_table(t.uri).manifest()
    assert fresh.index is not None and fresh.index.segments
    runs = Counter(f.cluster_run for f in fresh.files)
    assert runs[None] == 2 and len(runs) == 2
    assert t.inspect.files()["cluster_run"].to_pylist().count(None) == 2
    # a table that never clustered keeps segments 0.3.0 can decode: no cluster_run column
    segment = plain.manifest().index.segments[0].path
    assert "cluster_run" not in pq.read_schema(pa.BufferReader(plain.store.get(segment))).names
    assert main(["info", t.uri]) == 0
    assert re.search(r"^cluster by: +user_id$", capsys.readouterr().out, re.M)
    assert main(["info", t.uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster_by"] == ["user_id"]


@pytest.mark.parametrize("field_ids", [["user_id"], [], [1, 2, 3, 4, 5], [0], [True]],
                         ids=["a name", "none", "five", "zero", "a boolean"])
def test_a_rewrite_record_with_a_bad_order_is_corrupt(tmp_path: Path, field_ids: list) -> None:
    t = clustered_table(tmp_path, ["user_id"], files=3, rows=500)
    info = t.compact()
    doc = json.loads(t.store.get(manifest_key(info.version)))
    doc["parameters"]["rewrites"][0]["order"]["field_ids"] = field_ids
    t.store.delete(manifest_key(info.version))
    t.store.put_if_absent(manifest_key(info.version), json.dumps(doc).encode())
    with pytest.raises(mt.errors.CorruptTableError, match=r"parameters.rewrites\[0\].order.field_ids"):
        mt.open_table(t.uri).scan().count()


# --- sort_by ------------------------------------------------------------------------------
def test_sort_by_sorts_each_appended_batch_and_keeps_an_updates_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"sort_by": ["country", "user_id"]})
    t.append(batch(rng, 0, 2_000))
    (f,) = t.manifest().files
    written = pq.read_table(pa.BufferReader(t.store.get(f.path)))
    keys = list(zip(written["country"].to_pylist(), written["user_id"].to_pylist()))
    assert keys == sorted(keys)
    t.update({"user_id": "user_id + 1"}, where="id < 10")
    changes = t.changes(1).to_arrow()
    pre, post = (changes.filter(pa.compute.equal(changes["_change_type"], kind)) for kind in
                 ("update_preimage", "update_postimage"))
    assert sorted(pre["id"].to_pylist()) == list(range(10))
    assert [u + 1 for u in pre.sort_by("id")["user_id"].to_pylist()] == post.sort_by("id")["user_id"].to_pylist()

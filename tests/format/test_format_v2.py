"""Format v2: a small root per version over write-once segments (docs/format.md).

What each commit writes, that the layout stays bounded, upgrade from v1 with time travel
across it, concurrent writers while segments merge, GC of segments, planning that reads only
the segments a filter needs, and hostile roots and segments."""

from __future__ import annotations

import json
import pickle
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.errors import CorruptTableError, InvalidArgumentError
from manifest_table.format.manifest import manifest_key
from manifest_table.storage import LocalStore, MemoryStore
from tests.crafted import commit_raw, latest_doc, put_object
from tests.stores import CountingStore

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
TINY = {"tail_limit": 2, "deletes_limit": 2, "segment_target_files": 4, "max_small_segments": 2}


def rows(ids) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def ids(t: mt.Table, **kwargs) -> Counter:
    return Counter(t.scan(**kwargs).to_arrow().column("id").to_pylist())


def tiny_table(store=None, uri: str = "mem://t", **properties) -> mt.Table:
    return mt.create_table(uri, SCHEMA, store=store or MemoryStore(), properties={**TINY, **properties})


def test_new_tables_are_v2_and_a_small_append_writes_its_data_the_root_and_the_pointer():
    store = CountingStore(MemoryStore())
    t = mt.create_table("mem://t", SCHEMA, store=store)
    assert t.manifest().format_version == 2
    store.reset()
    t.append(rows([1]))
    writes = {kind: n for (op, kind), n in store.reset().items() if op == "put"}
    assert writes == {"data": 1, "manifest": 1, "pointer": 1}
    root = json.loads(store.get(manifest_key(1)))
    assert root["format_version"] == 2 and len(root["tail"]) == 1 and root["segments"] == []
    assert root["totals"] == {"files": 1, "rows": 1, "deleted": 0, "bytes": t.manifest().tail[0].size}


def test_a_one_row_delete_of_a_segment_file_writes_a_tombstone_the_root_and_the_pointer():
    store = CountingStore(MemoryStore())
    t = mt.create_table("mem://t", SCHEMA, store=store, properties={"tail_limit": 1})
    t.append(rows(range(10)))
    t.append(rows(range(10, 20)))  # the tail overflows: both files go to a segment
    assert len(t.manifest().index.segments) == 1 and not t.manifest().tail
    store.reset()
    t.delete("id = 3")
    writes = {kind: n for (op, kind), n in store.reset().items() if op == "put"}
    assert writes == {"tombstone": 1, "manifest": 1, "pointer": 1}
    index = t.manifest().index
    assert len(index.deletes) == 1 and index.totals.deleted == 1
    assert ids(t) == Counter(i for i in range(20) if i != 3)


def test_the_layout_stays_bounded_and_every_version_reads_back():
    t = tiny_table()
    expected = [Counter()]
    for i in range(30):
        t.append(rows(range(i * 10, i * 10 + 10)))
        expected.append(expected[-1] + Counter(range(i * 10, i * 10 + 10)))
        if i % 2:
            t.delete(f"id = {i * 10 + 1} OR id = {i * 5 + 2}")
            expected.append(Counter({k: 1 for k in expected[-1] if k not in (i * 10 + 1, i * 5 + 2)}))
        index = t.manifest().index
        small = [s for s in index.segments if s.files < TINY["segment_target_files"]]
        assert len(small) <= TINY["max_small_segments"]
        assert len(t.manifest().tail) <= TINY["tail_limit"] and len(index.deletes) <= TINY["deletes_limit"]
    for version, want in enumerate(expected):
        assert ids(t, version=version) == want
        assert t.scan(version=version).count() == sum(want.values())
    totals = t.manifest().totals
    assert (totals.files, totals.rows - totals.deleted) == (30, sum(expected[-1].values()))


def test_overwrite_and_compaction_rewrite_the_segments_holding_their_files():
    t = tiny_table()
    for i in range(12):
        t.append(rows(range(i * 10, i * 10 + 10)))
    t.overwrite(rows([1000]), where="id < 25 OR id = 1000")
    assert ids(t) == Counter([*range(25, 120), 1000])
    t.delete("id < 60")
    t.compact(min_deleted_fraction=0.1)
    assert ids(t) == Counter([*range(60, 120), 1000])
    paths = [f.path for f in t.manifest().files]
    assert len(paths) == len(set(paths)) == t.manifest().totals.files


def test_upgrade_moves_a_v1_table_to_v2_and_time_travel_crosses_it(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, format_version=1)
    for i in range(5):
        t.append(rows(range(i * 10, i * 10 + 10)))
    t.delete("id = 3")
    before = [ids(t, version=v) for v in range(t.version + 1)]
    info = t.upgrade({"segment_target_files": 2})
    assert info.committed and info.operation == "upgrade"
    upgraded = t.manifest()
    assert upgraded.format_version == 2 and [s.files for s in upgraded.index.segments] == [2, 2, 1]
    assert ids(t) == before[-1]
    t.append(rows([100]))
    t.delete("id = 4")
    assert [ids(t, version=v) for v in range(len(before))] == before
    assert ids(t) == before[-1] + Counter([100]) - Counter([4])
    assert [m.format_version for m in (t.manifest(v) for v in range(t.version + 1))] == [1] * 7 + [2] * 3
    assert not t.upgrade().committed  # already v2: nothing to do
    assert t.history()[2].operation == "upgrade"


def test_concurrent_writers_while_segments_merge(tmp_path: Path):
    """Four threads append and delete their own ids on a local directory (atomic conditional
    writes) with limits that make nearly every commit flush or merge segments."""
    uri = str(tmp_path / "t")
    tiny_table(LocalStore(tmp_path / "t"), uri)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            t = mt.open_table(uri)
            for i in range(6):
                base = w * 1000 + i * 10
                t.append(rows(range(base, base + 10)))
                t.delete(f"id = {base + 5}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    t = mt.open_table(uri)
    expected = Counter(w * 1000 + i * 10 + k for w in range(4) for i in range(6) for k in range(10) if k != 5)
    assert ids(t) == expected and t.scan().count() == len(expected)
    assert t.version == 48 and t.manifest().totals.files == 24


def test_gc_deletes_segments_no_retained_version_needs(tmp_path: Path):
    t = tiny_table(LocalStore(tmp_path / "t"), str(tmp_path / "t"))
    for i in range(10):
        t.append(rows(range(i * 10, i * 10 + 10)))
        t.delete(f"id = {i * 10}")
    listed = {info.key for info in t.store.list("segments/")}
    latest = {s.path for s in t.manifest().index.segments}
    assert latest < listed
    report = t.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert {info.key for info in t.store.list("segments/")} == latest
    assert report.deleted["segments"].count == len(listed - latest)
    assert ids(t) == Counter(i for i in range(100) if i % 10)


def test_a_point_lookup_reads_only_the_segment_its_stats_allow():
    store = CountingStore(MemoryStore())
    t = mt.create_table("mem://t", SCHEMA, store=store, properties={"tail_limit": 1, "segment_target_files": 2,
                                                                    "max_small_segments": 1})
    for i in range(8):
        t.append(rows(range(i * 10, i * 10 + 10)))
    assert len(t.manifest().index.segments) >= 3
    store.reset()
    fresh = mt.open_table("mem://t", store=store)
    assert ids(fresh, where="id = 42") == Counter([42])
    assert store.reset()[("get", "segment")] == 1
    assert fresh.scan().count() == 80
    assert store.reset()[("get", "segment")] == 0  # totals in the root


def test_a_segments_summary_is_unknown_where_one_of_its_entries_is():
    """A string longer than the stats keep has no bounds in its entry, and a file written
    before a column was added has no null count for it: the segment's summary must say
    unknown there, not summarize the other entries, or a filter would skip the segment that
    holds the row."""
    long = "a" * 300  # before every "n<i>" of the other files
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore(), properties={"tail_limit": 1, "segment_target_files": 4,
                                                                          "max_small_segments": 1})
    t.append(pa.table({"id": [1000], "name": [long]}, schema=SCHEMA))
    t.append(rows(range(10)))
    with t.update_schema() as schema:
        schema.add_column("v", pa.int64())
    for i in range(1, 5):
        t.append(pa.table({"id": range(i * 10, i * 10 + 10), "name": ["n"] * 10, "v": [i] * 10}))
    assert any(s.files >= 3 for s in t.manifest().index.segments)
    fresh = mt.open_table("mem://t", store=t.store)
    assert ids(fresh, where=f"name = '{long}'") == ids(fresh, where="name < 'b'") == Counter([1000])
    assert ids(fresh, where="v IS NULL") == Counter([1000, *range(10)])


def test_planned_segment_files_pickle_with_their_stats():
    """The Spark data source sends each partition's files to its executors: a file planned
    from a segment pickles as its own stats, not its whole segment (whose lock once made
    every data-source read of a table with segments fail)."""
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore(), properties={"tail_limit": 1})
    for i in range(3):
        t.append(rows(range(i * 10, i * 10 + 10)))
    files = mt.open_table("mem://t", store=t.store).scan().plan_files()
    assert t.manifest().index.segments and len(files) == 3
    copies = pickle.loads(pickle.dumps(tuple(files)))  # (as a partition holds them)
    assert [dict(f.stats) for f in copies] == [dict(f.stats) for f in files]
    assert copies[1].stats["id"].min == 10


def test_segment_summaries_are_stored_again_as_read_and_follow_a_rename():
    """Each root writes every segment summary again: as it was read (or first encoded) for
    the same schema, and under a renamed column's new name, not the old one."""
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore(), properties={"tail_limit": 1, "segment_target_files": 2,
                                                                            "max_small_segments": 1})
    for i in range(8):
        t.append(rows(range(i * 10, i * 10 + 10)))
    fresh = mt.open_table("mem://t", store=t.store)
    summaries = {s.path: s for s in fresh.manifest().index.segments}
    assert len(summaries) >= 2
    before = {s["path"]: s["stats"] for s in latest_doc(fresh)["segments"]}
    fresh.append(rows([100]))
    after = {s["path"]: s["stats"] for s in latest_doc(fresh)["segments"]}
    kept = before.keys() & after.keys()
    assert kept and all(after[p] == before[p] for p in kept)
    for path in kept:  # the same as encoding the decoded stats anew
        summaries[path].stored.clear()
    again = json.loads(fresh.manifest().to_json())["segments"]
    assert {s["path"]: s["stats"] for s in again} == after
    with fresh.update_schema() as change:
        change.rename_column("id", "key")
    fresh.append(pa.table({"key": [200], "name": ["x"]}))
    assert ids_of(mt.open_table("mem://t", store=t.store), "key = 15") == [15]
    renamed = {s["path"]: s["stats"] for s in latest_doc(fresh)["segments"]}
    assert all(renamed[p] == after[p] for p in kept & renamed.keys())  # stats keyed by field id


def ids_of(t: mt.Table, where: str) -> list[int]:
    return t.scan(where=where).to_arrow().column("key").to_pylist()


@pytest.mark.parametrize("kwargs, match", [
    ({"format_version": 4}, "format_version must be 1 to 3"),
    ({"format_version": "2"}, "format_version must be 1 to 3"),
    ({"properties": {"tail_limt": 3}}, r"unknown table properties \['tail_limt'\]"),
    ({"properties": {"tail_limit": 0}}, "tail_limit"),
    ({"properties": {"deletes_limit": 1.5}}, "deletes_limit"),
    ({"properties": "small"}, "properties must be a dict"),
    ({"format_version": 1, "properties": {"tail_limit": 3}}, "format version 2 tables only"),
])
def test_bad_create_arguments_create_nothing(kwargs, match):
    store = MemoryStore()
    with pytest.raises(InvalidArgumentError, match=match):
        mt.create_table("mem://t", SCHEMA, store=store, **kwargs)
    assert not list(store.list())


# --- hostile roots and segments ------------------------------------------------------------
def segmented() -> mt.Table:
    t = mt.create_table("mem://t", SCHEMA, store=MemoryStore(), properties={"tail_limit": 1})
    t.append(rows(range(10)))
    t.append(rows(range(10, 20)))
    assert len(t.manifest().index.segments) == 1
    return t


def craft_segment(t: mt.Table, change) -> str:
    key = t.manifest().index.segments[0].path
    table = change(pq.read_table(pa.BufferReader(t.store.get(key))))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return put_object(t, "segments/", ".parquet", sink.getvalue().to_pybytes())


def with_column(name, values, dtype=None, nullable=None):
    def change(table: pa.Table) -> pa.Table:
        i = table.schema.get_field_index(name)
        old = table.schema.field(i)
        field = pa.field(name, dtype or old.type, old.nullable if nullable is None else nullable)
        return table.set_column(i, field, pa.array(values(table), field.type))
    return change


SEGMENT_CASES = {
    "rows-negative": (with_column("rows", lambda t: [-1] * t.num_rows), "field rows"),
    "size-null": (with_column("size", lambda t: [None] * t.num_rows, nullable=True), "are not the segment columns"),
    "path-escapes": (with_column("path", lambda t: ["data/../../x.parquet"] * t.num_rows), r"'\.' or '\.\.'"),
    "path-twice": (with_column("path", lambda t: [t.column("path")[0].as_py()] * t.num_rows), "more than once"),
    "dv-half-set": (with_column("dv_offset", lambda t: [8] * t.num_rows), "deletion-vector fields"),
    "nulls-above-rows": (with_column("nulls_1", lambda t: [10**6] * t.num_rows), "nulls_1"),
    "column-missing": (lambda t: t.drop_columns(["max_1"]), "are not the segment columns"),
    "wrong-type": (with_column("min_1", lambda t: [str(v) for v in t.column("min_1").to_pylist()], pa.string()),
                   "are not the segment columns"),
}


@pytest.mark.parametrize("case", SEGMENT_CASES)
def test_a_hostile_segment_is_corrupt_and_named(case: str):
    t = segmented()
    change, match = SEGMENT_CASES[case]
    key = craft_segment(t, change)
    doc = latest_doc(t)
    doc["segments"][0]["path"] = key
    commit_raw(t, doc)
    with pytest.raises(CorruptTableError, match=match) as caught:
        t.to_arrow()
    assert key in str(caught.value)


def test_a_segment_that_is_not_parquet_is_corrupt():
    t = segmented()
    doc = latest_doc(t)
    doc["segments"][0]["path"] = put_object(t, "segments/", ".parquet", b"not parquet")
    commit_raw(t, doc)
    with pytest.raises(CorruptTableError, match="not a readable Parquet segment"):
        t.to_arrow()


def _root(change):
    def craft(doc):
        change(doc)
        return doc
    return craft


ROOT_CASES = {
    "segment-key-escapes": (lambda d: d["segments"][0].update(path="segments/../data/x.parquet"), "segments"),
    "segment-key-elsewhere": (lambda d: d["segments"][0].update(path="data/x.parquet"), "is not under segments/"),
    "segment-listed-twice": (lambda d: d["segments"].append(d["segments"][0]), "distinct segment keys"),
    "segment-rows-negative": (lambda d: d["segments"][0].update(rows=-5), r"segments\[0\]\.rows"),
    "totals-deleted-above-rows": (lambda d: d["totals"].update(deleted=10**9), "totals.deleted"),
    "totals-missing": (lambda d: d.pop("totals"), "field totals is missing"),
    "property-zero": (lambda d: d["properties"].update(tail_limit=0), r"properties\.tail_limit"),
    "field-id-missing": (lambda d: d.update(schema=_schema_without_ids(d["schema"])), "field_id"),
    "last-field-id-below-ids": (lambda d: d.update(last_field_id=1), "last_field_id"),
    "deletes-key-escapes": (lambda d: d.update(deletes={"data/../x": {"path": "tombstones/a", "offset": 8,
                                                                     "length": 1, "cardinality": 1}}), "deletes"),
    "tail-not-list": (lambda d: d.update(tail={}), "field tail"),
}


def _schema_without_ids(text: str) -> str:
    from manifest_table.format.schema import encode_schema
    return encode_schema(SCHEMA)


@pytest.mark.parametrize("case", ROOT_CASES)
def test_a_hostile_root_is_corrupt_and_nothing_is_written(case: str):
    t = segmented()
    change, match = ROOT_CASES[case]
    commit_raw(t, _root(change)(latest_doc(t)))
    listed = sorted(info.key for info in t.store.list())
    with pytest.raises(CorruptTableError, match=match):
        t.append(rows([99]))
    with pytest.raises(CorruptTableError, match=match):
        mt.open_table("mem://t", store=t.store).scan().to_arrow()
    assert sorted(info.key for info in t.store.list()) == listed


def test_a_deletes_entry_with_more_deleted_rows_than_its_file_has_is_corrupt():
    t = segmented()
    t.delete("id = 1")
    doc = latest_doc(t)
    (path, ref), = doc["deletes"].items()
    doc["deletes"][path] = {**ref, "cardinality": 11}
    commit_raw(t, doc)
    with pytest.raises(CorruptTableError, match="cardinality 11, more than the file's 10 rows"):
        t.to_arrow()

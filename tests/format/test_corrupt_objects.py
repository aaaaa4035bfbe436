"""Hand-crafted corrupt and hostile objects (docs/format.md, "Reader requirements"): whatever a stored object
holds, reading it gives the right answer or a ``CorruptTableError`` naming the object and
field, never another exception or a wrong answer; keys never lead out of the table root; and
cleanup (``abort``, ``gc``) never deletes outside the root nor anything our writers did not
name."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap

from manifest_table import Table, create_table, open_table
from manifest_table.data.tombstones import MAGIC
from manifest_table.errors import CommitConflictError, CommitFailedError, CorruptTableError, InvalidArgumentError
from manifest_table.format.listed_once import ListedPaths, check_listed_once
from manifest_table.format.manifest import DataFile, manifest_key, version_of_key
from manifest_table.format.pointer import POINTER_KEY
from manifest_table.operations.garbage_collection import collect_garbage
from manifest_table.storage import LocalStore, MemoryStore, ObjectStore
from manifest_table.storage.prefixed import PrefixedStore
from manifest_table.storage.s3 import S3Store
from tests.cli_run import cli_count
from tests.conftest import make_store
from tests.crafted import DELETED, ROWS, SCHEMA, commit_raw, latest_doc, put_object, rows, set_pointer, small_table

HOSTILE = [None, -1, 0, 2**64, -(2**63), 1.5, float("nan"), True, "", "x", "../x", [], {}, [1], {"a": 1}]


def _positions(doc: Any, at: tuple = ()) -> Iterator[tuple]:
    """Every place in a JSON document (dict keys and list indexes), depth first."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield at + (k,)
            yield from _positions(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield at + (i,)
            yield from _positions(v, at + (i,))


def _set(doc: Any, at: tuple, value: Any) -> None:
    for step in at[:-1]:
        doc = doc[step]
    doc[at[-1]] = value


def test_every_field_of_a_manifest_set_to_hostile_values_reads_right_or_raises_corrupt() -> None:
    """Each position of a real manifest (schema aside: its own decoder's job), set to each
    hostile value: reading the table either works, with a count that agrees with the rows
    read, or raises CorruptTableError; never an IndexError, TypeError, KeyError, OverflowError."""
    store = MemoryStore()
    t = small_table(store)
    # Compaction parameters too: give the manifest a rewrites record to damage.
    template = latest_doc(t)
    template["parameters"]["rewrites"] = [
        {
            "output": template["files"][0]["path"],
            "sources": [
                {"path": template["files"][0]["path"], "rows": ROWS, "deletes": dict(template["files"][0]["deletes"])}
            ],
        }
    ]
    positions = [p for p in _positions(template) if p[0] != "schema"]
    assert len(positions) > 40
    outcomes = {"ok": 0, "corrupt": 0}
    for at in positions:
        for value in HOSTILE:
            doc = json.loads(json.dumps(template))
            _set(doc, at, value)
            version = t.version + 1
            doc["version"], doc["parent_version"] = version, version - 1
            if at in (("version",), ("parent_version",)):
                _set(doc, at, value)
            commit_raw(t, json.dumps(doc).encode())
            try:
                table = t.scan().to_arrow()
                filtered = t.scan(where="id >= 5 AND name != 'n7'").to_arrow()
                count = t.scan().count()
                t.history(limit=1)
                collect_garbage(t, retain_versions=1, retain_for=None, grace=timedelta(0), dry_run=True, force=True)
            except CorruptTableError as exc:
                outcomes["corrupt"] += 1
                assert "manifest/v" in str(exc) or "tombstones/" in str(exc) or "data/" in str(exc), exc
            else:
                outcomes["ok"] += 1
                assert 0 <= count == table.num_rows <= ROWS, (at, value)
                assert set(filtered.column("id").to_pylist()) <= set(table.column("id").to_pylist())
    assert outcomes["corrupt"] > outcomes["ok"] > 0, outcomes


@pytest.mark.parametrize("claims", [-1, +1, +5])
def test_a_manifest_that_names_another_version_than_its_key_is_corrupt(claims: int) -> None:
    """A manifest copied under the wrong key (a restore by hand, a bad tool) names a version
    its key does not: taken at its word, a reader would show one version's rows as another's
    and the next commit would number from the wrong place."""
    t = small_table(MemoryStore())
    doc = latest_doc(t)
    version = t.version + 1
    doc["version"], doc["parent_version"] = version + claims, version + claims - 1
    key = commit_raw(t, doc)
    for read in (lambda: t.scan().count(), lambda: t.history(limit=1), lambda: open_table("mem://t", store=t.store)):
        with pytest.raises(CorruptTableError, match=f"{key} says it is version {version + claims}"):
            read()


@pytest.mark.parametrize(
    ("positions", "said", "message"),
    [
        ([0, 1, 2, ROWS], 4, f"deletes position {ROWS}, past the end of its data file of {ROWS} rows"),
        ([0, 1, 2, 3], 3, "the bitmap has 4 positions, the manifest's deletes.cardinality says 3"),
        ([0, 1], 3, "the bitmap has 2 positions, the manifest's deletes.cardinality says 3"),
    ],
    ids=["position past the end", "more than the manifest says", "fewer than the manifest says"],
)
def test_a_tombstone_that_disagrees_with_its_entry_is_corrupt(positions: list[int], said: int, message: str) -> None:
    """A bitmap is checked against the entry that points at it: a position the file does not
    have, or a count other than the manifest's (which every count of live rows uses), would
    make a scan and a count disagree."""
    t = small_table(MemoryStore())
    blob = BitMap(positions).serialize()
    key = put_object(t, "tombstones/", ".roaring", MAGIC + blob)
    doc = latest_doc(t)
    doc["files"][0]["deletes"] = {"path": key, "offset": len(MAGIC), "length": len(blob), "cardinality": said}
    commit_raw(t, doc)
    with pytest.raises(CorruptTableError, match=message):
        t.scan().to_arrow()


def test_the_change_feed_refuses_a_file_whose_footer_disagrees_with_its_entry() -> None:
    """The feed reads added files by position, as a scan does, so it checks the footer's row
    count against the entry first: a file of 10 rows listed as 12 would shift every position."""
    t = small_table(MemoryStore())
    sink = pa.BufferOutputStream()
    pq.write_table(rows(range(ROWS)), sink)
    blob = sink.getvalue().to_pybytes()
    doc = latest_doc(t)
    doc["files"][0] = {**doc["files"][0], "path": put_object(t, "data/", ".parquet", blob), "rows": ROWS + 2,
                       "size": len(blob), "deletes": None}
    commit_raw(t, doc)
    with pytest.raises(CorruptTableError, match=f"footer has {ROWS} rows, the manifest's rows field says {ROWS + 2}"):
        t.changes(t.version - 1).to_arrow()


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_errors_name_the_object_and_the_field(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    t = small_table(make_store(kind, request, tmp_path))
    doc = latest_doc(t)
    doc["files"][0]["deletes"]["cardinality"] = ROWS + 5
    key = commit_raw(t, doc)
    with pytest.raises(CorruptTableError) as caught:
        t.scan().count()
    assert str(caught.value).startswith(f"{key}: field files[0].deletes.cardinality is 15")

    set_pointer(t, b'{"format_version": 1, "version": "many"}')
    with pytest.raises(CorruptTableError, match=f"^{POINTER_KEY}: field version is 'many'"):
        t.version


# --- keys never leave the root ----------------------------------------------------------
def _other_tables_file(other: Table) -> str:
    return other.manifest().files[0].path


def _traverse(t: Table, target: str) -> None:
    doc = latest_doc(t)
    doc["files"][0].update(path=target, rows=ROWS)
    doc["files"][0].pop("deletes", None)
    commit_raw(t, doc)


def test_a_manifest_path_into_a_sibling_table_is_not_read_on_a_local_directory(tmp_path: Path) -> None:
    ours, other = small_table(LocalStore(tmp_path / "t")), create_table(str(tmp_path / "other"), SCHEMA)
    other.append(rows(range(1000, 1000 + ROWS)))
    target = f"data/../../other/{_other_tables_file(other)}"
    assert os.path.exists(os.path.join(tmp_path, "t", target))  # the path does lead to the other table's rows
    _traverse(ours, target)
    for read in (lambda: ours.scan().to_arrow(), lambda: ours.scan(where="id > 999").to_arrow(), lambda: ours.gc()):
        with pytest.raises(CorruptTableError, match=r"files\[0\]\.path holds key .*'\.\.'"):
            read()
    assert other.scan().count() == ROWS


def test_a_manifest_path_into_a_sibling_table_is_not_read_on_s3(s3_uri: str) -> None:
    parent = s3_uri.rsplit("/", 1)[0]
    ours = small_table(S3Store.from_uri(f"{parent}/t"), f"{parent}/t")
    other = create_table(f"{parent}/other", SCHEMA)
    other.append(rows(range(1000, 1000 + ROWS)))
    _traverse(ours, f"data/../../other/{_other_tables_file(other)}")
    with pytest.raises(CorruptTableError, match=r"'\.\.'"):
        ours.scan().to_arrow()
    # An absolute name or a URL of the other table's object is refused the same way.
    for target in (
        f"/{parent.removeprefix('s3://')}/other/{_other_tables_file(other)}",
        f"{parent}/other/{_other_tables_file(other)}",
    ):
        _traverse(ours, target)
        with pytest.raises(CorruptTableError, match="is not under data/"):
            ours.scan().to_arrow()
    assert other.scan().count() == ROWS


# --- cleanup deletes only what our writers named, inside the root --------------------------
def test_abort_removes_staged_files_but_never_a_callers_file_nor_outside_the_root(tmp_path: Path) -> None:
    t, other = small_table(LocalStore(tmp_path / "t")), create_table(str(tmp_path / "other"), SCHEMA)
    other.append(rows(range(5)))
    theirs = _other_tables_file(other)
    with pytest.raises(InvalidArgumentError, match="add_files"):
        with t.transaction() as tx:
            tx.append(rows(range(100, 105)))
            tx.add_files([DataFile(f"data/../../other/{theirs}", 5, 100)])
    assert (tmp_path / "other" / theirs).exists()

    notes = tmp_path / "t" / "data" / "notes.txt"
    notes.write_bytes(b"mine")
    before = {p.name for p in (tmp_path / "t" / "data").iterdir()}
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.append(rows(range(100, 105)))  # staged: a writer-shaped file, removed on abort
            tx.add_files([DataFile("data/notes.txt", 1, 4)])
            raise RuntimeError("the caller's block failed")
    assert notes.read_bytes() == b"mine"
    assert {p.name for p in (tmp_path / "t" / "data").iterdir()} == before
    assert other.scan().count() == 5 and t.scan().count() == ROWS - DELETED


def test_a_commit_that_fails_never_removes_a_callers_file(tmp_path: Path) -> None:
    """A file a caller named in ``add_files`` under its own name is theirs: a commit that fails
    before its commit point (a replayed streaming batch, a conflict) removes what it wrote
    itself, never that file (docs/protocol.md W8; the old code removed it)."""
    t = create_table(str(tmp_path / "t"), SCHEMA)
    with t.transaction() as tx:
        tx.set_app_transaction("query", 0)
        tx.append(rows(range(3)))
    theirs = tmp_path / "t" / "data" / "part-00000-theirs.parquet"
    pq.write_table(rows(range(10, 12)), theirs)
    with t.transaction() as tx:  # a replay: commits nothing
        tx.set_app_transaction("query", 0)
        tx.add_files([DataFile("data/part-00000-theirs.parquet", 2, theirs.stat().st_size)])
        tx.append(rows(range(20, 22)))  # staged by us: removed
        assert not tx.commit().committed
    assert theirs.exists()

    other = open_table(str(tmp_path / "t"))
    with pytest.raises(CommitConflictError):
        with t.transaction() as tx:  # an overwrite that a concurrent append of a matching row defeats
            tx.add_files([DataFile("data/part-00000-theirs.parquet", 2, theirs.stat().st_size)])
            tx.overwrite(rows([0]), where="id = 0")
            other.append(rows([0]))
    assert theirs.exists()
    assert {p.name for p in theirs.parent.iterdir()} == {theirs.name, *(f.path[5:] for f in t.manifest().files)}


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_gc_deletes_only_writer_shaped_objects(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    store = make_store(kind, request, tmp_path)
    t = small_table(store)
    foreign = [
        "data/notes.txt",
        "data/part-00000-1f2e.snappy.parquet",
        f"data/{uuid.uuid4().hex.upper()}.parquet",
        "tombstones/readme.md",
        "manifest/v1.json",
        "manifest/v00000000000000000001.json.bak",
    ]
    for key in foreign:
        store.put_if_absent(key, b"not ours")
    nested = create_table(f"{tmp_path}/nested", SCHEMA, store=PrefixedStore(store, "data/nested/"))  # nested in data/
    nested.append(rows(range(3)))
    orphan = put_object(t, "data/", ".parquet", b"orphan of a failed commit")
    staging = f"data/_spark-{uuid.uuid4().hex}/part-00000-c000.zstd.parquet"  # a Spark driver died
    store.put_if_absent(staging, b"staged by a Spark job that never committed")
    kept_before = {info.key: store.get(info.key) for info in store.list() if info.key not in (orphan, staging)}

    report = collect_garbage(
        t, retain_versions=1, retain_for=None, force=True, now=datetime.now(UTC) + timedelta(days=30)
    )
    assert orphan in report.deleted_keys and store.head(orphan) is None
    assert staging in report.deleted_keys and store.head(staging) is None
    nested_keys = [k for k in kept_before if k.startswith("data/nested/")]
    assert len(nested_keys) >= 2  # the nested table's data file and tombstone-free manifest
    assert set(foreign) | {k for k in nested_keys if k.startswith(("data/", "tombstones/"))} <= set(report.unknown_keys)
    after = {info.key: store.get(info.key) for info in store.list()}
    expired = {manifest_key(0), manifest_key(1)}  # versions GC expired: ours to delete
    assert {k: v for k, v in kept_before.items() if k not in expired and k not in report.deleted_keys} == {
        k: v for k, v in after.items() if k not in expired
    }
    assert all(k not in report.deleted_keys for k in foreign + nested_keys)
    assert nested.scan().count() == 3 and t.scan().count() == ROWS - DELETED
    assert "unknown objects" in str(report)


# --- the pointer ---------------------------------------------------------------------------
def test_a_commit_never_rewrites_a_pointer_of_a_newer_format() -> None:
    """A newer library moved the table to pointer format 2 while our transaction was open:
    our commit's manifest may land (and is then reported as durable, not as failed), but the
    pointer is never rewritten in the old format."""
    t = small_table(MemoryStore())
    tx = t.transaction()
    tx.append(rows(range(100, 102)))
    newer = json.dumps({"format_version": 2, "version": t.version, "extra": "v2 only"}).encode()
    set_pointer(t, newer)
    with pytest.raises(CommitFailedError, match="landed as version.*format version 2.*will not overwrite it"):
        tx.commit()
    assert t.store.get(POINTER_KEY) == newer
    with pytest.raises(CorruptTableError, match="upgrade manifest_table"):
        t.append(rows(range(200, 202)))
    assert t.store.get(POINTER_KEY) == newer


def test_stats_of_the_wrong_type_fail_only_the_reads_that_use_them() -> None:
    """Stats are checked when first used: a count without a filter never looks at them."""
    t = small_table(MemoryStore())
    doc = latest_doc(t)
    doc["files"][0]["stats"]["name"] = {"min": 1, "max": 2, "null_count": 0}
    key = commit_raw(t, doc)
    assert t.scan().count() == ROWS - DELETED
    assert t.scan(where="id > 5").count() == 4
    for _ in range(2):  # the manifest (and its stats) are cached: the second use fails too
        with pytest.raises(
            CorruptTableError, match=rf"{key}: field files\[0\]\.stats\.name\.min is 1; expected a JSON str"
        ):
            t.scan(where="name = 'n5'").count()
    doc["files"][0]["stats"]["d"] = {"min": "-Infinity", "max": "1", "null_count": 0}
    doc.update(version=doc["version"] + 1, parent_version=doc["version"])
    key = commit_raw(t, doc)
    for _ in range(2):
        with pytest.raises(CorruptTableError, match=rf"{key}: field files\[0\]\.stats\.d is Decimal\('-Infinity'\)"):
            t.scan(where="d > 1").count()
    assert pa.types.is_string(t.schema.field("name").type)


@pytest.mark.parametrize("fmt", [1, 2])
def test_a_schema_that_does_not_decode_fails_every_read_that_uses_it_and_no_count(fmt: int, tmp_path: Path) -> None:
    """The schema is decoded when first used (format/stored_schema.py): the count command,
    which reads the manifest's counts alone, answers; every read of rows, and every commit,
    fails with the manifest and the field named, each time. Format v2's field ids above
    ``last_field_id`` are found the same way."""
    root = tmp_path / "t"
    t = create_table(str(root), SCHEMA, format_version=fmt)
    t.append(rows(range(ROWS)))
    t.delete(f"id < {DELETED}")
    good = latest_doc(t)["schema"]
    crafted = {"schema": base64.b64encode(b"not arrow ipc").decode()}, "field schema: manifest schema does not decode"
    cases = [crafted] + (
        [({"schema": good, "last_field_id": 2}, r"field last_field_id is 2; expected an integer in \[4,")]
        if fmt == 2
        else []
    )
    for change, message in cases:
        doc = latest_doc(t)
        doc.update(change)
        key = commit_raw(t, doc)
        listed = sorted(info.key for info in t.store.list())
        assert cli_count(str(root)) == ROWS - DELETED
        assert [c.version for c in t.history(limit=2)] == [t.version, t.version - 1]
        for read in (
            lambda: t.scan().to_arrow(),
            lambda: t.scan(where="id > 5").count(),
            lambda: t.schema,
            lambda: t.append(rows(range(20, 22))),
        ):
            for _ in range(2):  # the manifest is cached: a second use fails the same way
                with pytest.raises(CorruptTableError, match=f"^{key}: {message}"):
                    read()
        assert sorted(info.key for info in t.store.list()) == listed and t.version == version_of_key(key)


# --- a data file listed twice in one version (format v2) ------------------------------------
def _segmented(store: ObjectStore) -> Table:
    """Format v2, five files of ROWS rows: two segments of two, one in the root's tail."""
    t = create_table(
        "crafted", SCHEMA, store=store, properties={"tail_limit": 1, "segment_target_files": 2, "max_small_segments": 4}
    )
    for i in range(5):
        t.append(rows(range(i * ROWS, (i + 1) * ROWS)))
    assert [s.files for s in t.manifest().index.segments] == [2, 2] and len(t.manifest().tail) == 1
    return t


def _in_two_segments(t: Table, doc: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """A copy of the first segment, listed after the others: its files are in two. Returns a
    file listed twice and what the root's totals would count again."""
    first = doc["segments"][0]
    doc["segments"].append({**first, "path": put_object(t, "segments/", ".parquet", t.store.get(first["path"]))})
    return t.manifest().segment(first["path"]).files()[0].path, {n: first[n] for n in ("files", "rows", "bytes")}


def _in_a_segment_and_the_tail(t: Table, doc: dict[str, Any], segment: int = 1) -> tuple[str, dict[str, int]]:
    f = t.manifest().segment(t.manifest().index.segments[segment].path).files()[1]
    doc["tail"].append({"path": f.path, "rows": f.rows, "size": f.size, "stats": {}})
    return f.path, {"files": 1, "rows": f.rows, "bytes": f.size}


def _listing_twice(t: Table, place: Any, *, count_twice: bool) -> tuple[str, str]:
    """Commit a root listing a file twice (``place`` crafts it); ``count_twice``: with totals
    that count it twice, as a consistent writer of that root would."""
    doc = latest_doc(t)
    path, added = place(t, doc)
    if count_twice:
        doc["totals"].update({n: doc["totals"][n] + added[n] for n in added})
    return commit_raw(t, doc), path


TWICE = {"two-segments": _in_two_segments, "segment-and-tail": _in_a_segment_and_the_tail}
READS = {
    "scan": lambda t: t.to_arrow(),
    "filtered-scan": lambda t: t.scan(where="id >= 0").to_arrow(),
    "filtered-count": lambda t: t.scan(where="id >= 0").count(),
    "listing": lambda t: t.manifest().files,
    "delete": lambda t: t.delete("id >= 0"),
    "compaction": lambda t: t.compact(),
    "gc": lambda t: collect_garbage(
        t, retain_versions=1, retain_for=None, grace=timedelta(0), dry_run=True, force=True
    ),
}


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("place", TWICE)
def test_a_file_listed_twice_in_a_version_is_refused_by_every_reader(place: str, read: str) -> None:
    """A file in two segments, or in a segment and the tail, was read twice: a scan returned
    more rows than count(). Every reader that combines the entries refuses the version."""
    t = _segmented(MemoryStore())
    key, path = _listing_twice(t, TWICE[place], count_twice=True)
    listed = sorted(info.key for info in t.store.list())
    with pytest.raises(CorruptTableError, match=f"^{key}: data file {path} is listed twice, in "):
        READS[read](t)
    assert sorted(info.key for info in t.store.list()) == listed


@pytest.mark.parametrize("place", TWICE)
def test_count_refuses_a_root_whose_totals_count_a_file_once_that_it_lists_twice(place: str) -> None:
    """count() answers from the root's totals without reading segments: a root whose totals
    are not the sum over its segments and tail is refused on decode."""
    t = _segmented(MemoryStore())
    key, _ = _listing_twice(t, TWICE[place], count_twice=False)
    with pytest.raises(CorruptTableError, match=rf"^{key}: field totals\.files is 5; expected [67], the sum"):
        t.scan().count()


def test_a_commit_rebasing_onto_a_version_listing_a_file_twice_is_refused() -> None:
    """The conflict check reads the segments only one of the versions lists: a file the winner
    lists twice there is found without reading the segments both share."""
    t = _segmented(MemoryStore())
    with t.transaction() as tx:
        tx.delete("id = 1")
        doc = latest_doc(t)
        first = doc["segments"][0]
        doc["segments"][0] = {**first, "path": put_object(t, "segments/", ".parquet", t.store.get(first["path"]))}
        path, added = _in_a_segment_and_the_tail(t, doc, segment=0)  # in the copy and the tail
        doc["totals"].update({n: doc["totals"][n] + added[n] for n in added})
        key = commit_raw(t, doc)
        with pytest.raises(CorruptTableError, match=f"^{key}: data file {path} is listed twice"):
            tx.commit()


def test_paths_listed_twice_are_found_in_a_slice_of_a_longer_column() -> None:
    """A part's paths may be a slice of a longer column: their fingerprints read the slice's
    own values, from its offset, not the column's first ones."""
    a, b = (f"data/{c * 32}.parquet" for c in "ab")
    assert ListedPaths.of("segment s", pa.array([a, b, b]).slice(1)).twice() == b
    parts = [ListedPaths.of("segment s", pa.array([a, b]).slice(1)), ListedPaths.of("the tail", [b])]
    with pytest.raises(CorruptTableError, match=f"^root r: data file {b} is listed twice, in segment s and in the"):
        check_listed_once("root r", parts)

"""Garbage collection: retention rules, the grace period, dry runs, expired versions,
orphans of commits killed at every step, and GC racing live writers in other processes.
Time passes by handing ``collect_garbage`` a later clock (or ageing files with
``os.utime``), never by sleeping."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from manifest_table import Table, create_database, create_table, open_database, open_table
from manifest_table.errors import (
    CommitFailedError,
    CorruptTableError,
    InvalidArgumentError,
    TableExistsError,
    VersionExpiredError,
)
from manifest_table.format.manifest import manifest_key
from manifest_table.format.pointer import POINTER_KEY, decode_pointer
from manifest_table.operations.garbage_collection import collect_garbage
from manifest_table.storage import ObjectStore
from tests.conftest import make_store
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.int64())])
HOUR = timedelta(hours=1)
ZERO = timedelta(0)


@pytest.fixture(params=["memory", "local"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Table:
    return create_table(str(tmp_path / "t"), SCHEMA, store=make_store(request.param, request, tmp_path))


def append(t: Table, start: int, n: int = 10) -> None:
    ids = list(range(start, start + n))
    t.append(pa.table({"id": ids, "g": [i % 5 for i in ids]}, schema=SCHEMA))


def rows(t: Table, **scan: object) -> Counter[int]:
    return Counter(t.scan(**scan).to_arrow().column("id").to_pylist())


def objects(store: ObjectStore) -> dict[str, str]:
    return {info.key: info.etag for info in store.list()}


def referenced(t: Table, versions: range) -> set[str]:
    """Keys the manifests of ``versions`` need, read straight from the manifests."""
    keys = {"_latest_manifest"}
    for v in versions:
        m = t.manifest(v)
        keys.add(manifest_key(v))
        keys.update(f.path for f in m.files)
        keys.update(f.deletes.path for f in m.files if f.deletes)
        for rw in m.parameters.get("rewrites", []):
            keys.update(s["deletes"]["path"] for s in rw["sources"] if s["deletes"])
    return keys


def later(delta: timedelta) -> datetime:
    return datetime.now(UTC) + delta


# --- retention --------------------------------------------------------------------------
def test_gc_expires_versions_and_deletes_what_no_retained_version_needs(table: Table) -> None:
    for i in range(4):
        append(table, 10 * i)
    table.delete("g = 1")
    compacted = table.compact(1 << 20).version
    expected = rows(table)
    old = rows(table, version=2)  # cached by this handle: GC must make it fail anyway

    report = table.gc(retain_versions=2, retain_for=None, grace=ZERO, force=True)
    assert report.versions_retained == range(compacted - 1, compacted + 1)
    assert report.versions_expired == range(0, compacted - 1)
    assert set(objects(table.store)) == referenced(table, report.versions_retained)
    assert rows(table, version=compacted - 1) == rows(table) == expected and sum(old.values()) == 20

    report = table.gc(retain_versions=1, retain_for=None, grace=ZERO, force=True)
    assert report.versions_retained == range(compacted, compacted + 1)
    assert report.deleted["data files"].count == 4  # the compaction's sources
    assert set(objects(table.store)) == referenced(table, report.versions_retained)
    assert rows(table) == expected
    for version in (0, 2, compacted - 1):
        with pytest.raises(VersionExpiredError):
            table.scan(version=version)
    with pytest.raises(VersionExpiredError):
        table.scan(as_of=table.history()[0].timestamp - timedelta(milliseconds=1))
    assert [c.version for c in table.history()] == [compacted]


def test_retention_by_time_keeps_versions_current_within_the_window(table: Table) -> None:
    for i in range(3):
        append(table, 10 * i)
    assert collect_garbage(table, retain_for=HOUR, grace=HOUR, force=True).versions_retained == range(0, 4)
    # Two hours on, only the latest was current within the last hour; the last 2 by count.
    report = collect_garbage(table, retain_versions=2, retain_for=HOUR, grace=HOUR, now=later(2 * HOUR), force=True)
    assert report.versions_retained == range(2, 4) and report.versions_expired == range(0, 2)
    assert rows(table, version=2) == Counter(range(20))


def test_retention_by_time_holds_for_exactly_retain_for(table: Table) -> None:
    """Versions superseded moments ago are kept until ``retain_for`` has passed since, and not
    after: at three quarters of it every version stays, at five quarters only the latest.
    (No grace: GC would keep the too-young manifests for it, hiding a shorter retention.)"""
    for i in range(3):
        append(table, 10 * i)
    kept = [
        collect_garbage(table, retain_for=HOUR, grace=ZERO, now=later(HOUR * k / 4), dry_run=True, force=True)
        for k in (3, 5)
    ]
    assert [report.versions_retained for report in kept] == [range(0, 4), range(3, 4)]


def test_a_version_superseded_long_after_it_committed_is_retained(table: Table) -> None:
    append(table, 0)
    report = collect_garbage(table, retain_for=HOUR, grace=HOUR, now=later(HOUR / 2), dry_run=True, force=True)
    assert report.versions_retained == range(0, 2)  # version 0 was current until moments ago


def test_dry_run_changes_nothing_and_predicts_the_real_run(table: Table) -> None:
    for i in range(3):
        append(table, 10 * i)
    table.delete("g = 2")
    table.compact(1 << 20)
    before = objects(table.store)
    dry = table.gc(retain_versions=1, retain_for=None, grace=ZERO, dry_run=True, force=True)
    assert objects(table.store) == before and table.scan(version=0).count() == 0
    assert "dry run" in str(dry) and "would delete" in str(dry)
    real = table.gc(retain_versions=1, retain_for=None, grace=ZERO, force=True)
    assert (real.deleted, real.deleted_keys, real.versions_expired) == (
        dry.deleted,
        dry.deleted_keys,
        dry.versions_expired,
    )
    assert set(before) - set(objects(table.store)) == set(real.deleted_keys)
    text = str(real)
    assert f"  version {real.versions_retained[0]} retained," in text and "deleted" in text
    assert not table.gc(retain_versions=1, retain_for=None, grace=ZERO, force=True).deleted_keys


@pytest.mark.parametrize(
    "kwargs, forcible",
    [
        (dict(retain_for=HOUR, grace=2 * HOUR), True),  # retention shorter than grace
        (dict(retain_for=None), True),  # count-based retention alone: no time guarantee
        (dict(retain_versions=0), False),
        (dict(grace=-HOUR), False),
    ],
)
def test_unsafe_or_nonsense_settings_are_refused(table: Table, kwargs: dict, forcible: bool) -> None:
    append(table, 0)
    with pytest.raises(InvalidArgumentError):
        table.gc(**kwargs)
    if forcible:
        assert table.gc(**kwargs, force=True).versions_retained == range(0, 2)
    else:
        with pytest.raises(InvalidArgumentError):
            table.gc(**kwargs, force=True)


def test_recent_expired_manifests_stay_until_their_grace_ends(table: Table) -> None:
    for i in range(3):
        append(table, 10 * i)
    report = table.gc(retain_versions=1, retain_for=None, grace=HOUR, force=True)
    assert report.versions_retained == range(0, 4) and not report.deleted_keys
    assert report.in_grace["manifests"].count == 3
    assert rows(table, version=1) == Counter(range(10))


def test_aged_orphans_on_a_local_table_are_removed_after_the_grace_period(tmp_path: Path) -> None:
    t = create_table(str(tmp_path / "t"), SCHEMA)
    append(t, 0)
    root = Path(t.store.root)
    old, young, temp = (
        root / "data" / f"{'0' * 32}.parquet",
        root / "data" / f"{'f' * 32}.parquet",
        root / "data" / ".tmp-x",
    )
    notes = root / "data" / "notes.txt"  # not a shape our writers produce: never ours to delete
    for path in (old, young, temp, notes):
        path.write_bytes(b"partial")
    two_days_ago = time.time() - 2 * 86400
    for path in (old, temp, notes):
        os.utime(path, (two_days_ago, two_days_ago))
    report = t.gc()
    assert report.deleted_keys == [f"data/{'0' * 32}.parquet"] and report.in_grace["data files"].count == 1
    assert report.unknown_keys == ["data/notes.txt"] and "kept 1 unknown objects" in str(report)
    assert young.exists() and temp.exists() and notes.exists() and not old.exists()  # temp files are LocalStore's
    assert rows(t) == Counter(range(10))


def _age(root: Path, keys: list[str], seconds: float = 2 * 86400) -> None:
    then = time.time() - seconds
    for key in keys:
        os.utime(root / key, (then, then))


def test_an_expired_version_too_young_to_delete_keeps_its_old_files(tmp_path: Path) -> None:
    """Version 2 is expired by the rules but its manifest is inside the grace period, so it
    stays readable, and so must the file it shares with version 1, which is older than the
    grace and no retained version names."""
    t = create_table(str(tmp_path / "t"), SCHEMA)
    append(t, 0)
    old_file = t.manifest(1).files[0].path
    append(t, 10)
    t.overwrite(pa.table({"id": [99], "g": [4]}, schema=SCHEMA))
    _age(Path(t.store.root), [manifest_key(0), manifest_key(1), old_file])
    report = collect_garbage(t, retain_versions=1, retain_for=None, grace=HOUR, force=True)
    assert report.versions_expired == range(0, 2) and report.versions_retained == range(2, 4)
    assert old_file not in report.deleted_keys and (Path(t.store.root) / old_file).exists()
    assert rows(t, version=2) == Counter(range(20))


def test_manifests_aged_out_of_order_expire_only_as_a_prefix(tmp_path: Path) -> None:
    """A copied table's manifests may carry times out of order: version 2 older than version 1.
    Expired versions stay a prefix (time travel and ``oldest`` search for where they end), so
    version 2 stays while version 1 is inside the grace period."""
    t = create_table(str(tmp_path / "t"), SCHEMA)
    for start in (0, 10, 20):
        append(t, start)
    _age(Path(t.store.root), [manifest_key(0), manifest_key(2)])
    report = collect_garbage(t, retain_versions=1, retain_for=None, grace=HOUR, force=True)
    assert report.versions_expired == range(0, 1) and report.versions_retained == range(1, 4)
    assert (Path(t.store.root) / manifest_key(2)).exists()
    assert rows(t, version=2) == Counter(range(20))


# --- commits killed at every step -------------------------------------------------------
class Crash(Exception):
    """The writing process died."""


class CrashingStore(WrappedStore):
    """A writing process that dies at its ``writes``-th write and can do nothing after, not
    even clean up. Data files go through it too (no arrow filesystem), so they count."""

    def __init__(self, inner: ObjectStore, writes: int) -> None:
        super().__init__(inner)
        self.left, self.dead = writes, False

    def _before(self, op: str, key: str) -> None:
        if op == "put" and self.left == 0:
            self.dead = True
        if self.dead:
            raise Crash()
        self.left -= op == "put"

    def arrow_filesystem(self) -> None:
        return None


def _append_and_delete(t: Table) -> None:
    with t.transaction() as tx:
        tx.append(pa.table({"id": [100, 101], "g": [0, 1]}, schema=SCHEMA))
        tx.delete("g = 1")


def _append_and_delete_effect(ids: Counter[int]) -> Counter[int]:
    return Counter({i: n for i, n in ids.items() if i % 5 != 1}) + Counter([100])


def _compact(t: Table) -> None:
    t.compact(1 << 20)


@pytest.mark.parametrize("operation, effect", [(_append_and_delete, _append_and_delete_effect), (_compact, Counter)])
def test_orphans_of_commits_killed_at_every_step(
    table: Table, operation: Callable[[Table], None], effect: Callable[[Counter[int]], Counter[int]]
) -> None:
    store = table.store
    for i in range(3):
        append(table, 10 * i)
    table.delete("g = 3")
    outcomes = []
    for writes in range(10):
        before = rows(table)
        try:
            operation(Table(table.uri, CrashingStore(store, writes)))
        except Crash:
            pass
        else:
            break
        stored = decode_pointer(*store.get_with_etag(POINTER_KEY)).version  # (a local pointer may lag)
        committed = table.log.probe_forward(stored) > stored  # died before the pointer
        outcomes.append(committed)
        # Before its grace period ends nothing a dying writer left is touched...
        report = table.gc(retain_versions=1, retain_for=HOUR, grace=HOUR, force=True)
        assert not report.deleted_keys and report.pointer_rolled_forward == committed
        assert rows(table) == (effect(before) if committed else before)
        # ...and once it is over, only what the latest version needs is left.
        collect_garbage(table, retain_versions=1, retain_for=HOUR, grace=HOUR, now=later(3 * HOUR), force=True)
        assert set(objects(store)) == referenced(table, range(table.version, table.version + 1))
        assert rows(table) == (effect(before) if committed else before)
    # Killed before each staged object, before the manifest (nothing committed), and before
    # the pointer moved (committed: the next GC rolls the pointer forward).
    assert outcomes == [False] * (len(outcomes) - 1) + [True] and len(outcomes) >= 3


# --- GC under fire ----------------------------------------------------------------------
RUN_SECONDS = 5.0
GRACE = timedelta(seconds=3)
DEADLINE = 2.0
"""Every handle commits with a deadline below the grace, so "grace >= the longest commit"
holds by construction however loaded the runner is: a commit that would outlive it gives up
(``CommitFailedError``, nothing committed) and is not counted as acknowledged."""


def _writer(uri: str, writer: int, seconds: float, out: str) -> None:
    """Append tagged batches; delete some of its own earlier batches by tag. Report what
    committed and how many commits gave up at their deadline. Runs in another process."""
    t = open_table(uri, deadline=DEADLINE)
    appended, deleted, gave_up = [], [], 0
    stop = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < stop:
        tag = writer * 100_000 + seq
        try:
            t.append(pa.table({"id": [tag * 10 + i for i in range(7)], "g": [tag] * 7}, schema=SCHEMA))
            appended.append(tag)
            if seq % 3 == 2 and len(appended) >= 2:
                t.delete(f"g = {appended[-2]}")
                deleted.append(appended[-2])
        except CommitFailedError:
            gave_up += 1
        seq += 1
        time.sleep(0.02)
    Path(out).write_text(json.dumps({"appended": appended, "deleted": deleted, "gave_up": gave_up}))


def test_gc_and_compaction_under_fire_lose_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = create_table(uri, SCHEMA, deadline=DEADLINE)
    ctx = multiprocessing.get_context("spawn")
    outs = [str(tmp_path / f"w{i}.json") for i in range(2)]
    workers = [ctx.Process(target=_writer, args=(uri, i, RUN_SECONDS, out)) for i, out in enumerate(outs)]
    for w in workers:
        w.start()
    rounds = compactions = 0
    expired: list[int] = []
    while any(w.is_alive() for w in workers):
        try:
            compactions += t.compact(64 * 1024, 0.1).committed
        except CommitFailedError:
            pass  # gave up at its deadline: nothing committed
        expired.extend(t.gc(retain_versions=2, retain_for=GRACE, grace=GRACE, force=True).versions_expired)
        rounds += 1
        time.sleep(0.1)
    for w in workers:
        w.join()
        assert w.exitcode == 0
    logs = [json.loads(Path(out).read_text()) for out in outs]
    assert rounds > 3 and compactions > 0 and expired

    live = {tag for log in logs for tag in log["appended"]} - {tag for log in logs for tag in log["deleted"]}
    assert Counter(t.scan().to_arrow().column("g").to_pylist()) == {tag: 7 for tag in live}
    retained = range(t.history()[-1].version, t.version + 1)
    assert not {key for key in referenced(t, retained) if t.store.head(key) is None}
    for version in retained:
        assert t.scan(version=version).to_arrow().num_rows == t.manifest(version).live_rows
    with pytest.raises(VersionExpiredError):
        t.scan(version=expired[0])


def test_a_reader_holding_an_expired_snapshot_gets_version_expired(tmp_path) -> None:
    """A handle that cached a manifest before GC expired it must not fail deep in pyarrow."""
    t = create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    stale = t.scan(version=1)  # planned: holds version 1's manifest
    t.overwrite(pa.table({"id": [2]}))
    t.gc(retain_versions=1, retain_for=timedelta(0), grace=timedelta(0), force=True)
    with pytest.raises(VersionExpiredError, match="version 1"):
        stale.to_arrow()


def test_create_table_refuses_a_table_whose_first_version_was_collected(tmp_path) -> None:
    t = create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    t.gc(retain_versions=1, retain_for=timedelta(0), grace=timedelta(0), force=True)
    assert t.store.head(manifest_key(0)) is None
    with pytest.raises(TableExistsError):
        create_table(tmp_path / "t", pa.schema([("other", pa.string())]))
    assert t.store.head(manifest_key(0)) is None and t.scan().count() == 1


def test_gc_skips_versions_a_concurrent_gc_expired_after_it_listed_them(tmp_path: Path) -> None:
    """A GC that has read the retained versions' roots, then reads their segments while a
    second GC expires most of them and deletes the segments only they held: the first keeps
    what still exists (it failed with VersionExpiredError), and the table reads as before."""
    uri = str(tmp_path / "t")
    table = create_table(uri, SCHEMA, properties={"tail_limit": 1, "deletes_limit": 1, "segment_target_files": 2})
    for i in range(6):
        table.append(pa.table({"id": [i, i + 10], "g": [i, i]}, schema=SCHEMA))
        table.delete(f"id = {i + 10}")
    later = datetime.now(UTC) + timedelta(hours=1)

    class SecondGcAtFirstSegmentRead(WrappedStore):
        ran = False

        def _before(self, op: str, key: str) -> None:
            if op == "get" and key.startswith("segments/") and not self.ran:
                self.ran = True
                collect_garbage(open_table(uri), 1, None, timedelta(0), force=True, now=later)

    store = SecondGcAtFirstSegmentRead(open_table(uri).store)
    collect_garbage(open_table(uri, store=store), 20, None, timedelta(0), force=True, now=later)
    assert store.ran
    assert sorted(open_table(uri).to_arrow().column("id").to_pylist()) == list(range(6))


def test_a_retained_version_missing_a_segment_stops_gc_before_it_deletes_anything(tmp_path: Path) -> None:
    """A segment deleted by hand under the latest version: what that version references cannot
    be read, so its data files look unreferenced. GC deletes nothing, and says why and what to do."""
    uri = str(tmp_path / "t")
    table = create_table(uri, SCHEMA, properties={"tail_limit": 1})
    for i in range(4):
        table.append(pa.table({"id": [i], "g": [i]}, schema=SCHEMA))
    segment = table.manifest().index.segments[0].path
    os.remove(tmp_path / "t" / segment)
    stored = sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file())
    later = datetime.now(UTC) + timedelta(hours=1)
    with pytest.raises(CorruptTableError, match=rf"stopped and deleted nothing: version 4.*\({segment}\).*repair"):
        collect_garbage(open_table(uri), 1, None, timedelta(0), force=True, now=later)
    assert sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file()) == stored


def test_history_of_another_handle_leaves_out_what_gc_expired(tmp_path: Path) -> None:
    """A long-lived handle caches manifests: after GC through another handle (another
    process, the maintenance job) its history and time travel no longer offer them."""
    uri = str(tmp_path / "t")
    writer = create_table(uri, pa.schema([("id", pa.int64())]))
    for i in range(6):
        writer.append(pa.table({"id": [i]}))
    reader = open_table(uri)
    assert [c.version for c in reader.history()] == [6, 5, 4, 3, 2, 1, 0]  # (each manifest cached)
    open_table(uri).gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    assert [c.version for c in reader.history()] == [6, 5]
    assert [c.version for c in reader.history(limit=1)] == [6]
    with pytest.raises(VersionExpiredError):
        reader.scan(version=4).to_arrow()
    db = create_database(str(tmp_path / "db"))
    db.create_table("a", pa.schema([("id", pa.int64())])).append(pa.table({"id": [1]}))
    assert [c.version for c in db.history()] == [2, 1, 0]
    open_database(db.uri).gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert [c.version for c in db.history()] == [2]


def test_a_retention_of_thousands_of_years_keeps_everything(tmp_path: Path) -> None:
    """``now - retain_for`` before the year 1 was an ``OverflowError``: everything is younger."""
    t = create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in range(3):
        t.append(pa.table({"id": [i]}))
    longest = {"retain_for": timedelta.max, "grace": timedelta.max}
    for retention in ({"retain_for": "3000000d", "grace": "3000000d"}, longest):
        assert not t.gc(**retention).versions_expired
    assert [c.version for c in t.history()] == [3, 2, 1, 0]

"""The commit protocol under contention, crashes and ambiguous store responses."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
from collections.abc import Iterator
from datetime import timedelta

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.clock import Stamp, utc_now
from manifest_table.errors import (
    CommitConflictError,
    CommitFailedError,
    NotFound,
    PreconditionFailed,
    StoreError,
    SyncFailedError,
)
from manifest_table.format.manifest import manifest_key
from manifest_table.format.pointer import POINTER_KEY, decode_pointer
from manifest_table.storage import MemoryStore, ObjectInfo, ObjectStore
from manifest_table.storage.retry import RetryingStore
from manifest_table.testing import TIMEOUT, TRANSIENT, Call, FaultPlan, FaultyStore
from tests.conftest import store_location
from tests.stores import AmbiguousPutStore, CountingStore, WrappedStore

SCHEMA = pa.schema([("writer", pa.int64()), ("seq", pa.int64())])
WRITERS, APPENDS = 4, 25
WHERE = ["local", "s3", "seaweedfs", "gcs", "azure"]
"""A local directory and every server (S3 on moto and SeaweedFS, GCS on fake-gcs-server, Azure
on Azurite): the writers are processes, so each builds its own client from the options."""


def _location(where: str, tmp_path, request) -> tuple[str, dict[str, str] | None]:
    return (str(tmp_path / "t"), None) if where == "local" else store_location(where, request)


def _append_worker(uri: str, options: dict[str, str] | None, writer: int, appends: int, queue) -> None:
    table = mt.open_table(uri, storage_options=options)
    for seq in range(appends):
        info = table.append(pa.table({"writer": [writer], "seq": [seq]}, schema=SCHEMA))
        queue.put((writer, seq, info.version, info.commit_id))


def _run_writers(uri: str, options: dict[str, str] | None, appends: int) -> list[tuple[int, int, int, str]]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_append_worker, args=(uri, options, w, appends, queue)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    acks = [queue.get(timeout=300) for _ in range(WRITERS * appends)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return acks


@pytest.mark.parametrize("where", WHERE)
def test_concurrent_appends_lose_nothing(where, tmp_path, request):
    uri, options = _location(where, tmp_path, request)
    table = mt.create_table(uri, SCHEMA, storage_options=options)
    appends = APPENDS if where in ("local", "s3") else 8  # the stress test runs there too: bounded for CI
    acks = _run_writers(uri, options, appends)
    total = WRITERS * appends
    got = table.scan().to_arrow()
    assert sorted(zip(got.column("writer").to_pylist(), got.column("seq").to_pylist())) == \
        sorted((w, s) for w in range(WRITERS) for s in range(appends))
    assert table.version == total
    history = table.history()
    assert [h.version for h in history] == list(range(total, -1, -1))  # contiguous 0..N
    assert {(a[2], a[3]) for a in acks} <= {(h.version, h.commit_id) for h in history}
    assert len({a[2] for a in acks}) == total  # every acknowledged commit got its own version


def _crash_after_manifest(uri: str, options: dict[str, str] | None) -> None:
    """A writer that dies (SIGKILL) right after the commit point, before the pointer CAS."""
    class DieBeforePointer(WrappedStore):
        def _before(self, op: str, key: str) -> None:
            if op == "put" and key == "_latest_manifest":
                os.kill(os.getpid(), signal.SIGKILL)
    from manifest_table.storage import store_for_uri
    table = mt.open_table(uri, store=DieBeforePointer(store_for_uri(uri, options)))
    table.append(pa.table({"writer": [99], "seq": [0]}, schema=SCHEMA))


@pytest.mark.parametrize("where", WHERE)
def test_writer_killed_between_manifest_and_pointer(where, tmp_path, request):
    uri, options = _location(where, tmp_path, request)
    table = mt.create_table(uri, SCHEMA, storage_options=options)
    table.append(pa.table({"writer": [1], "seq": [0]}, schema=SCHEMA))
    proc = multiprocessing.get_context("spawn").Process(target=_crash_after_manifest, args=(uri, options))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == -signal.SIGKILL
    # The commit point was reached: version 2 exists, the pointer still says 1.
    assert table.store.head(manifest_key(2)) is not None
    assert decode_pointer(*table.store.get_with_etag(POINTER_KEY)).version == 1
    # Readers see a consistent snapshot: the older one, or where they probe past the pointer
    # (a local directory, whose pointer's rename is not synced; GCS: docs/protocol.md, "The
    # pointer under rate limits") the unacknowledged commit.
    seen = 2 if where in ("local", "gcs") else 1
    assert table.version == seen and table.scan().count() == seen
    info = table.append(pa.table({"writer": [2], "seq": [0]}, schema=SCHEMA))
    assert info.version == 3 and table.version == 3  # the writer rebased and rolled the pointer forward
    assert sorted(table.scan().to_arrow().column("writer").to_pylist()) == [1, 2, 99]


def _faulty(at: int, fault: str, key: str, kinds: tuple[str, ...] = ("put_if_absent", "put_if_match")) -> FaultyStore:
    """A memory store whose ``at``-th write of ``key`` fails with ``fault``."""
    return FaultyStore(MemoryStore(), FaultPlan(at=at, fault=fault, kinds=kinds, keys=lambda k: k == key))


def test_ambiguous_manifest_put_that_landed_is_a_success():
    store = _faulty(1, TIMEOUT, manifest_key(1))
    table = mt.create_table("mem://t", SCHEMA, store=store)
    info = table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    assert store.plan.injected is not None
    assert info.version == 1 and table.version == 1 and table.scan().count() == 1
    assert [h.version for h in table.history()] == [1, 0]  # committed exactly once


def test_manifest_put_that_landed_and_reported_412_is_a_success():
    """A store without S3Store's "412 after a retry" conversion: our own landed PUT, retried
    by the client, comes back as a lost race."""
    store = AmbiguousPutStore(MemoryStore(), lambda op, key: key == manifest_key(1))
    table = mt.create_table("mem://t", SCHEMA, store=store)
    info = table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    assert store.injected == 1
    assert info.version == 1 and table.version == 1 and table.scan().count() == 1
    assert [h.version for h in table.history()] == [1, 0]


def test_ambiguous_pointer_put_that_landed_is_a_success():
    store = _faulty(2, TIMEOUT, "_latest_manifest")  # the first is create_table's
    table = mt.create_table("mem://t", SCHEMA, store=store)
    assert table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA)).version == 1
    assert table.version == 1 and store.plan.injected == Call("put_if_match", "_latest_manifest")


def test_a_put_that_did_not_land_is_retried_at_the_same_version():
    store = _faulty(1, TRANSIENT, manifest_key(1))
    table = mt.create_table("mem://t", SCHEMA, store=store)
    assert table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA)).version == 1
    assert store.plan.injected is not None and table.scan().count() == 1
    assert [c.key for c in store.plan.calls].count(manifest_key(1)) >= 3  # create, read back, create


def test_request_counts():
    store = CountingStore(MemoryStore())
    table = mt.create_table("mem://t", SCHEMA, store=store)
    table.append(pa.table({"writer": [0], "seq": [0]}, schema=SCHEMA))
    store.reset()
    fresh = mt.open_table("mem://t", store=store)  # a new handle: it reads the pointer and the manifest
    assert store.reset() == {("get", "pointer"): 1, ("get", "manifest"): 1}
    fresh.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    counts = store.reset()
    assert counts[("put", "data")] == 1 and counts[("put", "manifest")] == 1 and counts[("put", "pointer")] == 1
    assert counts[("get", "pointer")] == 1  # the manifest open read is the transaction's base
    assert sum(n for (op, _), n in counts.items() if op in ("put", "get")) == 4
    assert sum(n for (op, _), n in counts.items() if op in ("head", "list", "delete")) == 0

    reader = mt.open_table("mem://t", store=store)  # its first read uses the pointer it read
    assert reader.scan().to_arrow().num_rows == 2
    counts = store.reset()
    assert counts == {("get", "pointer"): 1, ("get", "manifest"): 1, ("get", "data"): 2}
    assert reader.scan().count() == 2 and store.reset() == {("get", "pointer"): 1}


def test_the_pointer_open_table_read_serves_one_read_only():
    """The handle's first read uses the pointer open_table read (docs/protocol.md, "Opening a
    table"); after that, and after any other pointer read, reads see the latest version."""
    store = CountingStore(MemoryStore())
    writer = mt.create_table("mem://t", SCHEMA, store=store)
    reader = mt.open_table("mem://t", store=store)
    writer.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    store.reset()
    assert reader.scan().version == 0 and store.reset()[("get", "pointer")] == 0  # as of open_table
    assert reader.scan().version == 1 and store.reset()[("get", "pointer")] == 1

    reader = mt.open_table("mem://t", store=store)
    writer.append(pa.table({"writer": [1], "seq": [2]}, schema=SCHEMA))
    assert [h.version for h in reader.history(limit=1)] == [2]
    assert reader.version == 2  # history read the pointer: no going back to what open_table saw

    reader = mt.open_table("mem://t", store=store)
    writer.append(pa.table({"writer": [1], "seq": [3]}, schema=SCHEMA))
    assert reader.append(pa.table({"writer": [2], "seq": [1]}, schema=SCHEMA)).version == 4  # writes read anew
    assert reader.scan().version == 4 and reader.scan().count() == 4


def test_a_commit_older_than_retention_does_not_resurrect_a_collected_version():
    """A writer whose snapshot is older than the retention re-reads the pointer before its
    create: without that, its create-only write of a version GC removed would succeed and
    the commit would silently vanish below the pointer."""
    table = mt.create_table("mem://t", SCHEMA, store=MemoryStore())
    slow = mt.open_table("mem://t", store=table.store).transaction()  # snapshot: version 0
    slow.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    for seq in range(3):
        table.append(pa.table({"writer": [2], "seq": [seq]}, schema=SCHEMA))
    for version in (1, 2):  # what GC does to expired versions, oldest first
        table.store.delete(manifest_key(version))
    slow.staging.started = Stamp.at(utc_now() - timedelta(hours=1))  # the transaction has been open for an hour
    with pytest.raises(CommitConflictError, match="removed by garbage collection"):
        slow.commit()
    assert table.store.head(manifest_key(1)) is None and table.version == 3


class _PointerDown(WrappedStore):
    """Once manifest v1 is created, every request for the pointer fails until ``down`` is reset."""
    down = False

    def _before(self, op: str, key: str) -> None:
        if self.down and key == "_latest_manifest":
            raise StoreError(f"injected: {op} {key} failed")

    def _after(self, op: str, key: str) -> None:
        if op == "put" and key == manifest_key(1):
            self.down = True


def test_a_commit_whose_pointer_step_fails_names_itself_and_is_not_duplicated_by_a_retry():
    """Issue 8 item 6: the manifest create (the commit point) lands, then advancing the pointer
    and re-reading it both fail. The caller must learn that the commit landed (and which one),
    not a bare StoreError that reads as "nothing committed" and invites a duplicating retry."""
    store = _PointerDown(MemoryStore())
    table = mt.create_table("mem://t", SCHEMA, store=store)
    with pytest.raises(CommitFailedError, match=r"landed as version 1 .* committed: do not retry") as caught:
        table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    commit_id = re.search(r"commit ([0-9a-f]{32})", str(caught.value)).group(1)
    store.down = False
    assert table.version == 0  # not acknowledged: the pointer never moved
    assert table.manifest(1).commit_id == commit_id
    table.append(pa.table({"writer": [2], "seq": [1]}, schema=SCHEMA))  # rolls the pointer forward
    assert sorted(table.scan().to_arrow().column("writer").to_pylist()) == [1, 2]
    assert [h.commit_id for h in table.history()].count(commit_id) == 1


def test_a_commit_that_gives_up_before_its_commit_point_leaves_nothing_behind():
    class ManifestCreatesFail(WrappedStore):
        def _before(self, op: str, key: str) -> None:
            if op == "put" and key.startswith("manifest/") and key != manifest_key(0):
                raise StoreError(f"injected: {key} not written")
    store = ManifestCreatesFail(MemoryStore())
    table = mt.create_table("mem://t", SCHEMA, store=store, max_attempts=3)
    with pytest.raises(CommitFailedError, match="unchanged by this commit"):
        table.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    assert [info.key for info in store.list()] == ["_latest_manifest", manifest_key(0)]


def test_transient_failures_of_repeatable_calls_are_retried_and_others_are_not():
    """Reads, deletes and creates of uniquely named objects are retried; a create of a
    manifest or a compare-and-swap of the pointer never is (read back instead)."""
    inner = MemoryStore()
    table = mt.create_table("mem://t", SCHEMA, store=inner)
    calls = {"get": lambda s: s.get("_latest_manifest"), "head": lambda s: s.head("_latest_manifest"),
             "list": lambda s: list(s.list("")), "delete": lambda s: s.delete("data/nothing"),
             # landed, then the response was lost: the retry finds the key taken, and it is ours
             "put_if_absent": lambda s: s.put_if_absent("data/x.parquet", b"1")}
    for kind, call in calls.items():
        plan = FaultPlan(at=1, fault=TIMEOUT, kinds=[kind])
        call(RetryingStore(FaultyStore(inner, plan), ("data/",)))
        assert plan.injected is not None and len(plan.calls) >= 2, kind
    plan = FaultPlan(at=1, fault=TRANSIENT, kinds=["put_if_absent"])
    with pytest.raises(StoreError):
        RetryingStore(FaultyStore(inner, plan), ("data/",)).put_if_absent(manifest_key(5), b"{}")
    assert len(plan.calls) == 1
    assert table.scan().count() == 0


class FailsFirst(WrappedStore):
    """Its first ``failures`` requests fail (as a reset connection does, by default); it
    counts them all."""

    def __init__(self, inner: ObjectStore, failures: int, error: type[StoreError] = StoreError) -> None:
        super().__init__(inner)
        self.failures, self.error, self.requests = failures, error, 0

    def _before(self, op: str, key: str) -> None:
        self.requests += 1
        if self.requests <= self.failures:
            raise self.error(f"injected: {op} {key} failed")


@pytest.mark.parametrize("call", ["get", "delete", "list", "put_new"])
@pytest.mark.parametrize("failures", [3, 4])
def test_a_repeatable_call_is_tried_four_times_in_all(call: str, failures: int) -> None:
    """``RetryPolicy.attempts`` counts the first try: three transient failures in a row are
    absorbed, a fourth is the caller's error (docs/protocol.md, "Retries")."""
    inner = MemoryStore()
    inner.put_if_absent("data/a.parquet", b"x")
    store = FailsFirst(inner, failures)
    calls = {"get": lambda s: s.get("data/a.parquet"), "delete": lambda s: s.delete("data/a.parquet"),
             "list": lambda s: list(s.list("data/")), "put_new": lambda s: s.put_new("data/b.parquet", b"y")}
    retrying = RetryingStore(store, ("data/",))
    if failures == 3:
        calls[call](retrying)
    else:
        with pytest.raises(StoreError, match="injected"):
            calls[call](retrying)
    assert store.requests == 4


def test_an_answer_is_never_asked_twice():
    """A missing key or a lost race is an answer, not a failure: one request each."""
    store = CountingStore(MemoryStore())
    retrying = RetryingStore(store, ("data/",))
    with pytest.raises(NotFound):
        retrying.get("data/missing.parquet")
    with pytest.raises(NotFound):
        retrying.get_with_etag("_latest_manifest")
    etag = retrying.put_if_absent("_latest_manifest", b"v1")
    retrying.put_if_match("_latest_manifest", b"v2", etag)
    with pytest.raises(PreconditionFailed):
        retrying.put_if_match("_latest_manifest", b"v3", etag)
    assert sum(store.counts.values()) == 5


def test_what_a_retry_cannot_mend_is_tried_once():
    """A pointer swap whose outcome is unknown is resolved by reading it back (the version
    log), never by swapping again; a failed sync would fail again (a full disk)."""
    swap = FailsFirst(MemoryStore(), 0)
    etag = swap.put_if_absent("_latest_manifest", b"v1")
    swap.failures = 2
    with pytest.raises(StoreError, match="injected"):
        RetryingStore(swap, ("data/",)).put_if_match("_latest_manifest", b"v2", etag)
    assert swap.requests == 2
    sync = FailsFirst(MemoryStore(), 1, SyncFailedError)
    with pytest.raises(SyncFailedError, match="injected"):
        RetryingStore(sync, ("data/",)).put_new("data/a.parquet", b"x")
    assert sync.requests == 1


def test_a_unique_key_taken_before_the_first_attempt_is_not_taken_as_ours():
    """Only a key found taken after an attempt of ours failed can be our attempt landing; one
    taken before we ever tried is someone else's object, and a retry that took it as ours
    would reference bytes it never wrote."""
    inner = MemoryStore()
    inner.put_if_absent("data/x.parquet", b"theirs")
    store = RetryingStore(inner, ("data/",))
    for create in (store.put_if_absent, store.put_new):
        with pytest.raises(PreconditionFailed):
            create("data/x.parquet", b"ours")
    assert inner.get("data/x.parquet") == b"theirs"


def test_a_listing_that_fails_midway_resumes_after_the_last_key_it_gave():
    """Each key once, in order: a listing retried from the start must not hand GC or a repair
    the keys it already gave (a key given twice was counted twice, and deleted twice)."""

    class FailsOnceMidway(WrappedStore):
        failed = False

        def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
            for i, info in enumerate(self.inner.list(prefix)):
                if i == 3 and not self.failed:
                    self.failed = True
                    raise StoreError("injected: connection reset while listing")
                yield info

    inner = MemoryStore()
    keys = [f"data/{i:02}.parquet" for i in range(8)]
    for key in keys:
        inner.put_if_absent(key, b"x")
    store = FailsOnceMidway(inner)
    assert [info.key for info in RetryingStore(store, ("data/",)).list("data/")] == keys
    assert store.failed


def test_a_create_found_taken_after_a_failed_attempt_but_then_missing_is_not_ours():
    """The key was taken when the retry tried it and gone when it looked: nothing says the
    object was ours, so the create fails rather than answer an etag of nothing."""

    class TakenThenGone(WrappedStore):
        attempts = 0

        def put_if_absent(self, key: str, data: bytes) -> str:
            self.attempts += 1
            if self.attempts == 1:
                raise StoreError("injected: timed out, did not land")
            raise PreconditionFailed(key)

    store = TakenThenGone(MemoryStore())
    with pytest.raises(PreconditionFailed):
        RetryingStore(store, ("data/",)).put_if_absent("data/x.parquet", b"ours")
    assert store.attempts == 2


def test_a_commit_past_its_deadline_gives_up_and_leaves_nothing_behind():
    """GC deletes unreferenced objects older than its grace; a deadline below the grace keeps a
    slow commit from referencing an object GC already collected."""
    table = mt.create_table("mem://t", SCHEMA, store=MemoryStore(), deadline=5.0)
    tx = table.transaction()
    tx.append(pa.table({"writer": [1], "seq": [1]}, schema=SCHEMA))
    tx.staging.started = Stamp.at(utc_now() - timedelta(seconds=10))  # the transaction has been open for 10 s
    with pytest.raises(CommitFailedError, match=r"deadline of 5 s \(the deadline option\).* Nothing was committed"):
        tx.commit()
    assert [info.key for info in table.store.list()] == ["_latest_manifest", manifest_key(0)]
    assert table.append(pa.table({"writer": [2], "seq": [1]}, schema=SCHEMA)).version == 1  # a fresh one commits

"""Conformance of every ObjectStore to the interface (MemoryStore is the reference) on every
server (moto and SeaweedFS for S3, fake-gcs-server, Azurite), races on the stores that promise
cross-process safety, and the parts specific to each service."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import resource
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.httpsession import URLLib3Session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifest_table.errors import InvalidArgumentError, NotFound, PreconditionFailed, StoreError
from manifest_table.storage.base import ObjectInfo, ObjectStore
from manifest_table.storage.memory import MemoryStore
from manifest_table.storage.s3 import S3Store
from tests.conftest import STORE_KINDS, make_store

# =========================================================================================
# Conformance: every store
# =========================================================================================


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A fresh, empty store of every kind (conftest's ``store`` has the first three)."""
    return make_store(store_kind, request, tmp_path)


MISSING_KEY_SWAP = {"seaweedfs": PreconditionFailed, "gcs": PreconditionFailed, "azure": PreconditionFailed}
"""What ``put_if_match`` on a missing key raises where it is not ``NotFound``: these servers
answer 412 to a failed condition whether the key changed or is missing. The protocol treats
both the same (the pointer is re-read, and re-created if missing)."""


def test_missing_key(store: ObjectStore) -> None:
    with pytest.raises(NotFound):
        store.get("_latest_manifest")
    assert store.head("_latest_manifest") is None
    assert list(store.list()) == []


def test_a_key_below_an_object_is_missing(store: ObjectStore) -> None:
    """On a local directory the path runs through a file (``NotADirectoryError``): still a
    missing key, as on every object store, never a failed request."""
    store.put_if_absent("data/a.parquet", b"x")
    with pytest.raises(NotFound):
        store.get("data/a.parquet/b")
    with pytest.raises(NotFound):
        store.get_with_etag("data/a.parquet/b")
    assert store.head("data/a.parquet/b") is None


def test_put_if_absent_then_read(store: ObjectStore) -> None:
    before = datetime.now(UTC)
    etag = store.put_if_absent("_latest_manifest", b"v1")
    assert isinstance(etag, str) and etag
    assert store.get("_latest_manifest") == b"v1"
    info = store.head("_latest_manifest")
    assert info is not None
    assert (info.key, info.size, info.etag) == ("_latest_manifest", 2, etag)
    assert info.last_modified.utcoffset() == timedelta(0)
    # S3 keeps whole seconds; allow for that and for clock skew between test and store.
    assert before - timedelta(seconds=5) <= info.last_modified <= datetime.now(UTC) + timedelta(seconds=5)


def test_put_if_absent_on_existing_key_fails(store: ObjectStore) -> None:
    etag = store.put_if_absent("manifest/v1.json", b"first")
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("manifest/v1.json", b"second")
    assert store.get("manifest/v1.json") == b"first"
    assert store.head("manifest/v1.json").etag == etag  # type: ignore[union-attr]


def test_put_new_creates_once(store: ObjectStore) -> None:
    """``put_new`` (a fresh name nothing names yet) is a create-only put on every store."""
    etag = store.put_new("tombstones/a.roaring", b"first")
    with pytest.raises(PreconditionFailed):
        store.put_new("tombstones/a.roaring", b"second")
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("tombstones/a.roaring", b"second")
    assert store.get("tombstones/a.roaring") == b"first"
    assert store.head("tombstones/a.roaring").etag == etag  # type: ignore[union-attr]
    assert [i.key for i in store.list()] == ["tombstones/a.roaring"]


@contextmanager
def file_size_limit(size: int) -> Iterator[None]:
    """Writes past ``size`` bytes fail (``EFBIG``), as on a full disk, without filling one."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, limit[1]))
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, handler)


@pytest.fixture
def failing_sync_of_a_roaring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``fsync`` of a file named ``a.roaring`` fails as a failing disk's does."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("a.roaring"):
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("fails", ["write", "file", "directory"])
def test_local_put_new_whose_write_or_sync_fails_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """A local ``put_new`` creates its name before it writes and syncs; a failed write (a file
    too large for the disk's limit), or a failed sync of the bytes or of the directory,
    unlinks the name again, so a retry writes the object anew instead of finding the name
    taken and taking partial bytes, or bytes the disk may lose, for a created object."""
    from manifest_table.storage.local import LocalStore

    store = LocalStore(tmp_path)
    (tmp_path / "tombstones").mkdir()
    data = b"bytes" * 4096  # (more than a buffered write keeps)
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}") == (fails == "directory"):
            raise OSError(5, "Input/output error")
        real(fd)

    if fails != "write":
        monkeypatch.setattr(os, "fsync", fsync)
    with file_size_limit(len(data) // 2) if fails == "write" else nullcontext():
        with pytest.raises(StoreError, match="Input/output error|too large"):
            store.put_new("tombstones/a.roaring", data)
    assert store.head("tombstones/a.roaring") is None
    assert sorted(os.listdir(tmp_path / "tombstones")) == []  # no temp file either
    monkeypatch.setattr(os, "fsync", real)
    store.put_new("tombstones/a.roaring", data)
    assert store.get("tombstones/a.roaring") == data


@pytest.mark.parametrize("op", ["put_if_absent", "put_if_match"])
def test_local_conditional_write_that_fills_the_disk_leaves_nothing(tmp_path: Path, op: str) -> None:
    """A temp file cut short (a full disk, a file-size limit) is removed, and the failure is
    ``SyncFailedError`` (the same write would fail again: the commit loop does not retry it)."""
    from manifest_table.errors import SyncFailedError
    from manifest_table.storage.local import LocalStore

    store = LocalStore(tmp_path)
    etag = store.put_if_absent("_latest_manifest", b"v1")
    data = b"bytes" * 4096
    with file_size_limit(len(data) // 2), pytest.raises(SyncFailedError, match="too large.*nothing was written"):
        if op == "put_if_absent":
            store.put_if_absent("manifest/v1.json", data)
        else:
            store.put_if_match("_latest_manifest", data, etag)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["_latest_manifest"]
    assert store.get("_latest_manifest") == b"v1"


@pytest.mark.usefixtures("failing_sync_of_a_roaring")
def test_local_failed_deferred_sync_is_the_error_a_failed_temp_write_reports(tmp_path: Path) -> None:
    """A disk that fails fails both: the sync of an object staged in a ``deferred_syncs``
    block and the temp file of the manifest that would name it. The staged object's failure
    is the one reported (it says what was removed), and the object is gone."""
    from manifest_table.errors import SyncFailedError
    from manifest_table.storage.local import LocalStore, deferred_syncs

    store = LocalStore(tmp_path)
    data = b"bytes" * 4096
    with pytest.raises(SyncFailedError, match=r"syncing .*a\.roaring failed: Input/output error; it was removed"):
        with deferred_syncs():
            store.put_new("tombstones/a.roaring", b"bitmap")
            with file_size_limit(len(data) // 2):
                store.put_if_absent("manifest/v1.json", data)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.usefixtures("failing_sync_of_a_roaring")
def test_local_failed_deferred_sync_fails_the_rest_of_its_block(tmp_path: Path) -> None:
    """Once a staged object's sync failed, nothing later in the ``deferred_syncs`` block is
    written (a retried manifest would name the object); a block that never asked (no
    conditional write came) raises the failure at its end."""
    from manifest_table.errors import SyncFailedError
    from manifest_table.storage.local import LocalStore, deferred_syncs

    store = LocalStore(tmp_path)
    with pytest.raises(SyncFailedError, match=r"a\.roaring failed: Input/output error"):
        with deferred_syncs():
            store.put_new("tombstones/a.roaring", b"bitmap")
    assert not (tmp_path / "tombstones" / "a.roaring").exists()
    with deferred_syncs():
        store.put_new("tombstones/a.roaring", b"bitmap")
        with pytest.raises(SyncFailedError, match=r"a\.roaring"):
            store.put_if_absent("manifest/v1.json", b"names a.roaring")
        with pytest.raises(SyncFailedError, match=r"a\.roaring"):
            store.put_new("tombstones/b.roaring", b"bitmap")
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def test_local_lost_conditional_writes_leave_no_temp_file(tmp_path: Path) -> None:
    """A conditional write stages its bytes in a hidden temp file before it checks its
    condition; a writer that loses the race (taken name, stale etag, missing pointer) takes it
    away again, or a busy table would fill with them (nothing lists or collects hidden files)."""
    from manifest_table.storage.local import LocalStore

    store = LocalStore(tmp_path)
    etag = store.put_if_absent("_latest_manifest", b"v1")
    store.put_if_match("_latest_manifest", b"v2", etag)
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("_latest_manifest", b"v3")
    with pytest.raises(PreconditionFailed):
        store.put_if_match("_latest_manifest", b"v3", etag)
    with pytest.raises(NotFound):
        store.put_if_match("missing", b"v3", etag)
    assert sorted(os.listdir(tmp_path)) == [".cas.lock", "_latest_manifest"]


def test_local_hidden_files_and_directories_are_not_objects(tmp_path: Path) -> None:
    """Temp files, the lock, and what lives in hidden directories (an editor's or a sync
    tool's) are never listed, so GC never takes them for orphans."""
    from manifest_table.storage.local import LocalStore

    store = LocalStore(tmp_path)
    store.put_if_absent("data/a.parquet", b"x")
    (tmp_path / "data" / ".tmp-1").write_bytes(b"partial")
    (tmp_path / ".trash" / "data").mkdir(parents=True)
    (tmp_path / ".trash" / "data" / "b.parquet").write_bytes(b"y")
    assert [i.key for i in store.list()] == ["data/a.parquet"]


def test_local_listing_an_unreadable_directory_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing that skipped a directory it cannot read would show its objects as missing
    (to GC, to a reader's probe): it fails instead. (The tests run as root, whom no mode
    bit stops, so the refusal is the system call's.)"""
    from manifest_table.storage.local import LocalStore

    store = LocalStore(tmp_path)
    store.put_if_absent("data/a.parquet", b"x")
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == str(tmp_path / "data"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(StoreError, match="listing .*data failed: Permission denied"):
        list(store.list())


def test_put_if_match_swaps(store: ObjectStore) -> None:
    old = store.put_if_absent("_latest_manifest", b"v1")
    new = store.put_if_match("_latest_manifest", b"v2", old)
    assert new != old
    assert store.get("_latest_manifest") == b"v2"
    assert store.head("_latest_manifest").etag == new  # type: ignore[union-attr]
    # the etag returned is accepted back as is
    assert store.put_if_match("_latest_manifest", b"v3", new) not in (old, new)


def test_put_if_match_with_stale_etag_fails(store: ObjectStore) -> None:
    old = store.put_if_absent("_latest_manifest", b"v1")
    current = store.put_if_match("_latest_manifest", b"v2", old)
    with pytest.raises(PreconditionFailed):
        store.put_if_match("_latest_manifest", b"v3", old)
    assert store.get("_latest_manifest") == b"v2"
    assert store.head("_latest_manifest").etag == current  # type: ignore[union-attr]


def test_put_if_match_on_missing_key_is_not_found(store: ObjectStore, store_kind: str) -> None:
    missing = MISSING_KEY_SWAP.get(store_kind, NotFound)
    with pytest.raises(missing):
        store.put_if_match("_latest_manifest", b"v1", '"d41d8cd98f00b204e9800998ecf8427e"')
    etag = store.put_if_absent("_latest_manifest", b"v1")
    store.delete("_latest_manifest")
    with pytest.raises(missing):
        store.put_if_match("_latest_manifest", b"v2", etag)
    assert store.head("_latest_manifest") is None


def test_get_with_etag(store: ObjectStore) -> None:
    with pytest.raises(NotFound):
        store.get_with_etag("_latest_manifest")
    etag = store.put_if_absent("_latest_manifest", b"v1")
    assert store.get_with_etag("_latest_manifest") == (b"v1", etag)
    new = store.put_if_match("_latest_manifest", b"v2", etag)
    assert store.get_with_etag("_latest_manifest") == (b"v2", new)


def test_etag_changes_on_every_write(store: ObjectStore) -> None:
    etags = [store.put_if_absent("k", b"0")]
    for i in range(1, 6):
        etags.append(store.put_if_match("k", str(i).encode(), etags[-1]))
    assert len(set(etags)) == len(etags)


def test_rewriting_equal_bytes(store: ObjectStore) -> None:
    """S3's ETag is the MD5 of the content, so rewriting equal bytes gives back an equal etag
    (ABA): a CAS pointer must carry something unique per write. The other stores do better."""
    etag = store.put_if_absent("k", b"same")
    again = store.put_if_match("k", b"same", etag)
    if isinstance(store, S3Store):
        assert again == etag
    else:
        assert again != etag


def test_delete(store: ObjectStore) -> None:
    store.delete("never-written")
    store.put_if_absent("data/x.parquet", b"x")
    store.delete("data/x.parquet")
    assert store.head("data/x.parquet") is None
    with pytest.raises(NotFound):
        store.get("data/x.parquet")
    assert list(store.list()) == []
    store.put_if_absent("data/x.parquet", b"again")  # a deleted key can be created again
    assert store.get("data/x.parquet") == b"again"


def test_list_prefixes_order_and_relative_keys(store: ObjectStore) -> None:
    keys = [
        "manifest/v10.json",
        "data/x.parquet",
        "_latest_manifest",
        "manifest/v1.json",
        "data/xy/z.parquet",
        "data/p=1/a b+c.parquet",
        "manifest/v2.json",
        "datum",
    ]
    for i, key in enumerate(keys):
        store.put_if_absent(key, b"#" * i)

    def listed(prefix: str = "") -> list[str]:
        return [info.key for info in store.list(prefix)]

    assert listed() == sorted(keys)
    assert listed("manifest/") == ["manifest/v1.json", "manifest/v10.json", "manifest/v2.json"]
    assert listed("manifest/v1") == ["manifest/v1.json", "manifest/v10.json"]
    assert listed("data/") == ["data/p=1/a b+c.parquet", "data/x.parquet", "data/xy/z.parquet"]
    assert listed("data/x") == ["data/x.parquet", "data/xy/z.parquet"]
    assert listed("dat") == ["data/p=1/a b+c.parquet", "data/x.parquet", "data/xy/z.parquet", "datum"]
    assert listed("data/x.parquet") == ["data/x.parquet"]
    assert listed("nothing/") == []
    for info in store.list():
        assert info == store.head(info.key)
        assert info.size == keys.index(info.key)


def test_binary_payloads(store: ObjectStore) -> None:
    payloads = {
        "empty": b"",
        "all-bytes": bytes(range(256)) * 4,
        "big": os.urandom(3 * 1024 * 1024 + 17),
        "nul": b"\x00",
    }
    for key, data in payloads.items():
        store.put_if_absent(f"bin/{key}", data)
    for key, data in payloads.items():
        assert store.get(f"bin/{key}") == data
        assert store.head(f"bin/{key}").size == len(data)  # type: ignore[union-attr]


def test_arrow_filesystem_shares_the_objects(store: ObjectStore) -> None:
    plane = store.arrow_filesystem()
    if plane is None:
        pytest.skip(f"{type(store).__name__} has no arrow filesystem")
    fs, root = plane
    store.put_if_absent("data/a.bin", b"written by the control plane")
    with fs.open_input_file(root + "/data/a.bin") as f:
        assert f.read() == b"written by the control plane"
        assert f.size() == len(b"written by the control plane")

    with fs.open_output_stream(root + "/data/b.bin") as f:
        f.write(b"written by arrow")
    table = pa.table({"id": list(range(1000)), "name": [f"n{i}" for i in range(1000)]})
    pq.write_table(table, root + "/data/c.parquet", filesystem=fs, row_group_size=100)

    assert store.get("data/b.bin") == b"written by arrow"
    assert [info.key for info in store.list("data/")] == ["data/a.bin", "data/b.bin", "data/c.parquet"]
    assert pq.read_table(root + "/data/c.parquet", filesystem=fs).equals(table)
    # Column and row-group pruning means range reads through the same filesystem.
    part = pq.ParquetFile(fs.open_input_file(root + "/data/c.parquet")).read_row_group(3, columns=["id"])
    assert part.column("id").to_pylist() == list(range(300, 400))


# --- the same random operation sequences on every store and on the reference ------------

# No key is a "directory" of another: a filesystem cannot hold both "a" and "a/b".
KEYS = ["a", "ab", "b/c", "b/d/e", "manifest/v1.json", "manifest/v10.json"]
_ops = st.lists(
    st.tuples(
        st.sampled_from(["absent", "match", "stale", "get", "head", "delete", "list"]),
        st.sampled_from(KEYS),
        st.sampled_from(["", "a", "b/", "b/d", "manifest/v1"]),
    ),
    max_size=20,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_ops)
def test_behaves_like_the_reference(store: ObjectStore, store_kind: str, ops: list[tuple[str, str, str]]) -> None:
    ns = f"{uuid.uuid4().hex}/"  # the fixture's store is shared by all examples
    missing_key_swap = MISSING_KEY_SWAP.get(store_kind, NotFound)
    stores = {"ref": MemoryStore(), "sut": store}
    etags: dict[str, dict[str, list[str]]] = {"ref": {}, "sut": {}}

    def apply(name: str, i: int, op: str, key: str, prefix: str) -> Any:
        s, seen = stores[name], etags[name].setdefault(key, [])
        data = f"{i}:{op}:{key}".encode()  # unique, so no stale etag can match again (ABA)
        try:
            if op == "absent":
                seen.append(s.put_if_absent(ns + key, data))
            elif op == "match":
                seen.append(s.put_if_match(ns + key, data, seen[-1] if seen else '"none"'))
            elif op == "stale":
                s.put_if_match(ns + key, data, seen[0] if len(seen) > 1 else '"none"')
            elif op == "get":
                return s.get(ns + key)
            elif op == "head":
                info = s.head(ns + key)
                return info and (info.key, info.size)
            elif op == "delete":
                s.delete(ns + key)
            else:
                return [(info.key, info.size) for info in s.list(ns + prefix)]
        except (NotFound, PreconditionFailed) as e:
            return missing_key_swap if op in ("match", "stale") and type(e) is NotFound else type(e)
        return None

    for i, (op, key, prefix) in enumerate(ops):
        assert apply("sut", i, op, key, prefix) == apply("ref", i, op, key, prefix), (i, op, key)


# =========================================================================================
# Races: threads and spawned processes, on every store that promises cross-process safety
# =========================================================================================


def _create_once(barrier: Any, store: ObjectStore, key: str, data: bytes) -> bool:
    barrier.wait(timeout=60)
    try:
        store.put_if_absent(key, data)
        return True
    except PreconditionFailed:
        return False


def _increment(barrier: Any, store: ObjectStore, key: str, times: int) -> tuple[int, int]:
    """Add one to the counter ``times`` times by read + compare-and-swap; return
    (increments that committed, CAS attempts that lost)."""
    barrier.wait(timeout=60)
    done = lost = 0
    while done < times:
        data, etag = store.get_with_etag(key)
        try:
            store.put_if_match(key, str(int(data) + 1).encode(), etag)
            done += 1
        except PreconditionFailed:
            lost += 1
    return done, lost


PROCESSES = 4
_pool_barrier: Any = None  # set in each pool process by _init_pool_process


def _init_pool_process(barrier: Any) -> None:
    global _pool_barrier
    _pool_barrier = barrier


def _in_pool_process(target: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return target(_pool_barrier, *args)


@pytest.fixture(scope="module")
def process_pool() -> Iterator[Any]:
    """``PROCESSES`` spawned processes sharing one barrier, started once for all the process
    races of this module (spawning and importing is what would make them slow)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCESSES, initializer=_init_pool_process, initargs=(ctx.Barrier(PROCESSES),)) as pool:
        yield pool


def run_concurrently(workers: Any, target: Callable[..., Any], args_list: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``target(barrier, *args)`` for each args, all released at once by the barrier: in
    threads when ``workers`` is None, else in the process pool (which gets the store pickled).
    Each pool task blocks in the barrier until all have arrived, so no process takes two."""
    if workers is None:
        barrier = threading.Barrier(len(args_list))
        with ThreadPoolExecutor(len(args_list)) as pool:
            return [f.result() for f in [pool.submit(target, barrier, *args) for args in args_list]]
    assert len(args_list) == PROCESSES
    tasks = [workers.apply_async(_in_pool_process, (target, args)) for args in args_list]
    return [task.get(timeout=120) for task in tasks]


def _race_setup(kind: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[ObjectStore, Any, int]:
    """The store, the process pool (None for threads) and the number of workers."""
    store = make_store(kind, request, tmp_path)
    if mode == "threads":
        return store, None, 8
    return store, request.getfixturevalue("process_pool"), PROCESSES


RACES = [
    ("local", "threads"),
    ("local", "processes"),
    ("s3", "threads"),
    ("s3", "processes"),
    ("seaweedfs", "threads"),
    ("gcs", "threads"),
    ("azure", "threads"),
]
"""moto is made atomic by its server's lock (tests/s3_server.py); SeaweedFS, fake-gcs-server
and Azurite check conditions atomically themselves, and these races are what shows it.
Their requests are concurrent from threads as from processes: threads are enough there."""


@pytest.mark.parametrize("kind,mode", RACES)
def test_race_put_if_absent_has_one_winner(
    kind: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store, workers, n = _race_setup(kind, mode, request, tmp_path)
    for round_ in range(3):
        key = f"manifest/v{round_}.json"
        won = run_concurrently(workers, _create_once, [(store, key, f"writer {i}".encode()) for i in range(n)])
        assert won.count(True) == 1, won
        assert store.get(key) == f"writer {won.index(True)}".encode()


@pytest.mark.parametrize("kind,mode", RACES)
def test_race_compare_and_swap_loses_no_update(
    kind: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store, workers, n = _race_setup(kind, mode, request, tmp_path)
    store.put_if_absent("counter", b"0")
    times = 10
    outcomes = run_concurrently(workers, _increment, [(store, "counter", times)] * n)
    committed = sum(done for done, _ in outcomes)
    assert committed == n * times
    assert int(store.get("counter")) == committed


# =========================================================================================
# S3 specifics
# =========================================================================================


def test_moto_enforces_conditional_puts(moto_endpoint: str, s3_uri: str) -> None:
    """The server, not S3Store, must refuse a lost race; check it does with a raw client."""
    bucket = s3_uri.split("/")[2]
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    etag = client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")["ETag"]

    def status(**kwargs: Any) -> int:
        with pytest.raises(client.exceptions.ClientError) as info:
            client.put_object(Bucket=bucket, **kwargs)
        return info.value.response["ResponseMetadata"]["HTTPStatusCode"]

    assert status(Key="k", Body=b"2", IfNoneMatch="*") == 412
    assert status(Key="k", Body=b"2", IfMatch='"0123456789abcdef0123456789abcdef"') == 412
    assert status(Key="missing", Body=b"2", IfMatch=etag) == 404
    assert client.put_object(Bucket=bucket, Key="k", Body=b"2", IfMatch=etag)["ETag"] != etag
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"2"


def test_s3_keys_live_under_the_prefix(moto_endpoint: str, s3_uri: str) -> None:
    store = S3Store.from_uri(s3_uri)
    etag = store.put_if_absent("manifest/v1.json", b"{}")
    raw = boto3.client("s3", endpoint_url=moto_endpoint)
    obj = raw.head_object(Bucket=store.bucket, Key="tables/t/manifest/v1.json")
    assert etag == obj["ETag"] and etag.startswith('"')  # exactly as S3 returns it
    assert [i.key for i in store.list()] == ["manifest/v1.json"]
    # A sibling table whose name extends ours sees none of our objects, nor we its.
    sibling = S3Store.from_uri(s3_uri + "2/")
    sibling.put_if_absent("x", b"")
    assert [i.key for i in sibling.list()] == ["x"]
    assert [i.key for i in store.list()] == ["manifest/v1.json"]
    # The bucket root works too.
    whole = S3Store.from_uri(f"s3://{store.bucket}")
    assert [i.key for i in whole.list()] == ["tables/t/manifest/v1.json", "tables/t2/x"]
    assert whole.arrow_filesystem()[1] == store.bucket


def test_s3_store_pickles(s3_uri: str) -> None:
    store = S3Store.from_uri(s3_uri)
    store.put_if_absent("k", b"v")
    store.arrow_filesystem()  # build the lazy parts, which must not travel
    clone = pickle.loads(pickle.dumps(store))
    assert clone._client is None and clone._fs is None
    assert clone.get("k") == b"v"
    fs, root = clone.arrow_filesystem()
    assert fs.open_input_file(root + "/k").read() == b"v"
    assert (clone.bucket, clone.prefix) == (store.bucket, store.prefix)


def test_arrow_uses_the_credentials_and_endpoint_boto3_resolved(moto_endpoint: str, s3_uri: str) -> None:
    store = S3Store.from_uri(
        s3_uri, {"access_key_id": "AKIAEXPLICIT", "secret_access_key": "s3cr3t", "session_token": "tok"}
    )
    fs, root = store.arrow_filesystem()
    options = fs.__reduce__()[1][0]
    assert (options["access_key"], options["secret_key"], options["session_token"]) == ("AKIAEXPLICIT", "s3cr3t", "tok")
    assert f"{options['scheme']}://{options['endpoint_override']}" == moto_endpoint
    assert options["region"] == "us-east-1"
    assert root == s3_uri.removeprefix("s3://")
    assert store.arrow_filesystem()[0] is fs  # built once
    # From the environment chain (the moto fixture's AWS_* variables) as well.
    options = S3Store.from_uri(s3_uri).arrow_filesystem()[0].__reduce__()[1][0]
    assert (options["access_key"], options["secret_key"]) == ("testing", "testing")


def test_s3_missing_bucket_is_a_store_error_not_a_missing_key(moto_endpoint: str) -> None:
    store = S3Store.from_uri("s3://no-such-bucket-here/t")
    for call in (lambda: store.get("k"), lambda: store.put_if_absent("k", b""), lambda: list(store.list())):
        with pytest.raises(StoreError) as info:
            call()
        assert not isinstance(info.value, (NotFound, PreconditionFailed))
        assert "no-such-bucket-here" in str(info.value)


def test_s3_unreachable_endpoint_is_a_store_error() -> None:
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",  # discard port: nothing listens
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=1),
    )
    store = S3Store("bucket", "tables/t", client=client)
    with pytest.raises(StoreError, match=r"put_if_absent of s3://bucket/tables/t/_latest_manifest") as info:
        store.put_if_absent("_latest_manifest", b"v")
    assert isinstance(info.value.__cause__, EndpointConnectionError)
    with pytest.raises(StoreError, match=r"head of s3://bucket/tables/t/k"):
        store.head("k")


@pytest.mark.parametrize("op", ["put_if_absent", "put_if_match"])
def test_s3_lost_race_after_a_retry_is_outcome_unknown(s3_uri: str, op: str) -> None:
    """A write lands, its response is lost, botocore retries, the retry gets 412 because of
    our own first attempt. That must not read as "someone else won"."""
    store = S3Store.from_uri(s3_uri)
    etag = store.put_if_absent("_latest_manifest", b"v1") if op == "put_if_match" else None
    sent: list[Any] = []

    def lose_first_response(request: Any, **_: Any) -> None:
        if not sent:
            sent.append(URLLib3Session().send(request))
            raise ReadTimeoutError(endpoint_url=request.url)

    store.client.meta.events.register("before-send.s3.PutObject", lose_first_response)
    with pytest.raises(StoreError, match="outcome unknown") as info:
        if op == "put_if_absent":
            store.put_if_absent("_latest_manifest", b"mine")
        else:
            store.put_if_match("_latest_manifest", b"mine", etag)  # type: ignore[arg-type]
    assert not isinstance(info.value, PreconditionFailed)
    assert sent[0].status_code == 200
    assert store.get("_latest_manifest") == b"mine"  # reading back resolves it


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


@pytest.mark.parametrize(
    "status, body",
    [
        (409, b"<Error><Code>ConditionalRequestConflict</Code><Message>in flight</Message></Error>"),
        (412, b"<Error><Code>PreconditionFailed</Code></Error>"),
        (412, b""),  # an S3-compatible server that names no code: the status says it
    ],
    ids=["409-conflict", "412", "412-no-code"],
)
@pytest.mark.parametrize("op", ["put_if_absent", "put_if_match"])
def test_s3_refusals_of_a_condition_are_lost_races(s3_uri: str, op: str, status: int, body: bytes) -> None:
    """AWS answers a conditional write that races another in flight with 409
    ConditionalRequestConflict: the write did not land, so the writer re-reads and retries,
    as after a 412. The answers are the server's own, sent on the first attempt."""
    from botocore.awsrequest import AWSResponse

    store = S3Store.from_uri(s3_uri)
    etag = store.put_if_absent("_latest_manifest", b"v1")

    def refuse(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, status, {"x-amz-request-id": "1"}, _Body(body))

    store.client.meta.events.register("before-send.s3.PutObject", refuse)
    with pytest.raises(PreconditionFailed):
        if op == "put_if_absent":
            store.put_if_absent("_latest_manifest", b"mine")
        else:
            store.put_if_match("_latest_manifest", b"mine", etag)
    assert store.get("_latest_manifest") == b"v1"


@pytest.mark.parametrize(
    "uri,bucket,prefix",
    [
        ("s3://bkt", "bkt", ""),
        ("s3://bkt/", "bkt", ""),
        ("s3://bkt/tables/t", "bkt", "tables/t"),
        ("s3://bkt/tables/t/", "bkt", "tables/t"),
        ("s3://my.bucket-1/a=1/b", "my.bucket-1", "a=1/b"),
        ("s3a://bkt/t", "bkt", "t"),
    ],
)
def test_from_uri_parses(uri: str, bucket: str, prefix: str) -> None:
    store = S3Store.from_uri(uri)
    assert (store.bucket, store.prefix) == (bucket, prefix)


@pytest.mark.parametrize(
    "uri", ["", "bkt/t", "s3:/bkt/t", "s3://", "s3:///t", "http://bkt/t", "s3://bkt//t", "s3://bkt/t?x=1", "s3://b:1/t"]
)
def test_from_uri_rejects_malformed(uri: str) -> None:
    with pytest.raises(InvalidArgumentError):
        S3Store.from_uri(uri)


def test_from_uri_options() -> None:
    options = {
        "endpoint_url": "http://127.0.0.1:1",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "a",
        "secret_access_key": "s",
        "AWS_SESSION_TOKEN": "t",
    }
    store = S3Store.from_uri("s3://bkt/t", options)
    assert store.client.meta.endpoint_url == "http://127.0.0.1:1"
    assert store.client.meta.region_name == "eu-west-1"
    frozen = store.client._request_signer._credentials.get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key, frozen.token) == ("a", "s", "t")
    # botocore reads max_attempts=5 as five retries after the first attempt
    assert store.client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}


def test_from_uri_rejects_unknown_and_conflicting_options() -> None:
    with pytest.raises(InvalidArgumentError, match="endpoint, profile"):
        S3Store.from_uri("s3://bkt/t", {"profile": "x", "region": "us-east-1", "endpoint": "y"})
    with pytest.raises(InvalidArgumentError, match="region"):
        S3Store.from_uri("s3://bkt/t", {"region": "us-east-1", "AWS_REGION": "eu-west-1"})
    S3Store.from_uri("s3://bkt/t", {"region": "us-east-1", "AWS_REGION": "us-east-1"})


def test_object_info_is_the_interface_type(store: ObjectStore) -> None:
    store.put_if_absent("k", b"v")
    assert all(type(info) is ObjectInfo for info in [store.head("k"), *store.list()])

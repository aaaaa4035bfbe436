"""The pointer under a store's write-rate limit (docs/protocol.md, "The pointer under rate
limits"): commits are acknowledged ahead of a pointer the store refuses to move, by at most
``MAX_POINTER_LAG`` versions, readers probe past it, and nothing is lost."""

from __future__ import annotations

import http.server
import math
import threading
from collections import Counter
from datetime import timedelta

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import RateLimited
from manifest_table.format.pointer import POINTER_KEY, decode_pointer
from manifest_table.log.version_log import MAX_POINTER_LAG
from manifest_table.storage import store_for_uri
from tests.stores import CountingStore, RateLimitedStore

SCHEMA = pa.schema([("writer", pa.int64()), ("seq", pa.int64())])


def _row(writer: int, seq: int) -> pa.Table:
    return pa.table({"writer": [writer], "seq": [seq]}, schema=SCHEMA)


def _stored_version(store: RateLimitedStore) -> int:
    return decode_pointer(*store.inner.get_with_etag(POINTER_KEY)).version


def test_commits_outrun_a_refused_pointer_by_the_lag_bound_and_readers_see_each(tmp_path):
    now = [0.0]
    uri = str(tmp_path / "t")
    store = RateLimitedStore(store_for_uri(uri), writes_per_second=1, clock=lambda: now[0])
    table = mt.create_table(uri, SCHEMA, store=store)
    for seq in range(1, MAX_POINTER_LAG + 1):  # no time passes: every pointer move is refused
        assert table.append(_row(0, seq)).version == seq
        reader = mt.open_table(uri, store=store)
        assert (reader.version, reader.scan().count()) == (seq, seq)
    assert _stored_version(store) == 0 and store.refused >= MAX_POINTER_LAG

    # GC keeps the versions past the stored pointer, and what they reference.
    table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert mt.open_table(uri, store=store).scan().count() == MAX_POINTER_LAG

    # One more would pass the bound: the commit waits until the store lets the pointer move.
    ticks = iter(range(1, 1000))
    store.clock = lambda: next(ticks) * 0.25
    assert table.append(_row(0, MAX_POINTER_LAG + 1)).version == MAX_POINTER_LAG + 1
    assert _stored_version(store) == MAX_POINTER_LAG + 1


def test_concurrent_writers_under_a_pointer_rate_limit_lose_nothing(tmp_path):
    """Real time, one write per second to the pointer, 4 writer threads: every acknowledged
    commit is visible to a reader that starts after it, once, in contiguous versions."""
    uri = str(tmp_path / "t")
    store = RateLimitedStore(store_for_uri(uri), writes_per_second=1)
    mt.create_table(uri, SCHEMA, store=store)
    writers, appends = 4, 12
    acks: list[tuple[int, str]] = []
    unseen: list[int] = []

    def write(writer: int) -> None:
        table = mt.open_table(uri, store=store)
        for seq in range(appends):
            info = table.append(_row(writer, seq))
            acks.append((info.version, info.commit_id))
            if mt.open_table(uri, store=store).version < info.version:
                unseen.append(info.version)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table = mt.open_table(uri, store=store)
    got = table.scan().to_arrow()
    assert sorted(zip(got.column("writer").to_pylist(), got.column("seq").to_pylist())) == \
        [(w, s) for w in range(writers) for s in range(appends)]
    assert not unseen and len(acks) == writers * appends
    history = table.history()
    assert [h.version for h in history] == list(range(writers * appends, -1, -1))
    assert set(acks) <= {(h.version, h.commit_id) for h in history}
    assert writers * appends - _stored_version(store) <= MAX_POINTER_LAG


def test_a_reader_probes_past_the_pointer_only_where_it_may_lag_in_logarithmic_heads(tmp_path):
    uri = str(tmp_path / "t")
    mt.create_table(uri, SCHEMA).append(_row(0, 0))
    plain, limited = CountingStore(store_for_uri(uri)), CountingStore(RateLimitedStore(store_for_uri(uri)))
    # A local directory's pointer may lag too (its rename is not synced: docs/protocol.md,
    # "Durability on a local directory"): one HEAD past it, as under a rate limit.
    assert plain.pointer_may_lag
    for store, heads in ((plain, 1), (limited, 1)):
        assert mt.open_table(uri, store=store).scan().count() == 1
        assert store.reset() == Counter({("get", "pointer"): 1, ("get", "manifest"): 1, ("head", "manifest"): heads})

    now = [0.0]
    writer = mt.open_table(uri, store=RateLimitedStore(store_for_uri(uri), clock=lambda: now[0]))
    for seq in range(1, 41):  # the pointer moves once, to version 2
        writer.append(_row(0, seq))
    lag = 41 - 2
    assert mt.open_table(uri, store=limited).version == 41
    assert limited.counts[("head", "manifest")] <= 2 * math.ceil(math.log2(lag)) + 1 < lag


class _TooManyRequests(http.server.BaseHTTPRequestHandler):
    """Answers every request as GCS answers a write past an object's rate; counts uploads."""

    uploads = 0

    def _refuse(self) -> None:
        if self.path.startswith("/upload/"):
            type(self).uploads += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"code": 429, "message": "The object exceeded the rate limit for object mutation"}}'
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _refuse

    def log_message(self, *args: object) -> None:
        pass


def test_gcs_answers_a_swap_past_the_rate_with_rate_limited_at_once():
    pytest.importorskip("google.cloud.storage")
    from manifest_table.storage.gcs import GcsStore

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TooManyRequests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        store = GcsStore("bucket", "t", endpoint_url=f"http://127.0.0.1:{server.server_address[1]}")
        assert store.pointer_may_lag
        with pytest.raises(RateLimited, match=POINTER_KEY):
            store.put_if_match(POINTER_KEY, b"{}", "1")
        assert _TooManyRequests.uploads == 1  # not retried by the client for two minutes
    finally:
        server.shutdown()

"""Exact S3 requests per operation, counted at the moto server (so pyarrow's data-plane
requests count as well as boto3's), the same calls per operation on every server, and the
manifest's file size treated as untrusted input.
The per-operation table is in docs/benchmarks.md ("S3 requests per operation")."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CorruptTableError
from manifest_table.format.manifest import manifest_key
from manifest_table.storage import LocalStore, MemoryStore
from manifest_table.storage import fileio as files
from manifest_table.testing import FaultyStore
from tests.catalog import assert_rejected
from tests.conftest import store_location
from tests.crafted import commit_raw, latest_doc
from tests.s3_server import take_requests
from tests.stores import kind_of

SCHEMA = pa.schema([("id", pa.int64())])


class Requests:
    """The requests one table's bucket received, as ``"METHOD kind"`` (``kind`` as in
    tests/stores.py; a multipart step adds its query, ``"POST data?uploads"``), and the look
    for a database at the parent (``"GET parent pointer"``: is the table ``DB_URI/NAME``?)."""

    def __init__(self, endpoint: str, uri: str) -> None:
        self.endpoint = endpoint
        bucket, prefix = uri.removeprefix("s3://").split("/", 1)
        self.root = f"/{bucket}/{prefix}/"
        parent = f"/{bucket}/{prefix.rpartition('/')[0]}/".replace("//", "/")
        self.parent = {parent + "_latest_manifest": "parent pointer", parent + manifest_key(0): "parent manifest"}
        take_requests(endpoint)

    def take(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for method, path, query in take_requests(self.endpoint):
            if path in self.parent:
                counts[f"{method} {self.parent[path]}"] += 1
            elif path.startswith(self.root):
                step = query.split("=")[0] if query.startswith(("uploads", "uploadId", "partNumber")) else ""
                counts[f"{method} {kind_of(path[len(self.root):])}{'?' + step if step else ''}"] += 1
        return counts


@pytest.fixture
def requests(s3_uri: str, moto_endpoint: str) -> Requests:
    return Requests(moto_endpoint, s3_uri)


def rows(ids: range) -> pa.Table:
    return pa.table({"id": list(ids)}, schema=SCHEMA)


def test_requests_per_operation(s3_uri: str, requests: Requests) -> None:
    # create and open first look for a database at the parent (is the table DB_URI/NAME?);
    # create also looks for a database whose creator died before its pointer (HEAD version 0)
    mt.create_table(s3_uri, SCHEMA)
    assert requests.take() == {"GET parent pointer": 1, "HEAD parent manifest": 1,
                               "HEAD pointer": 1, "PUT manifest": 1, "PUT pointer": 1}

    # open reads the latest manifest (a database there is an error now, not at the first read),
    # and the first write or read uses it
    writer = mt.open_table(s3_uri)
    assert requests.take() == {"GET parent pointer": 1, "GET pointer": 1, "GET manifest": 1}
    writer.append(rows(range(1)))  # one PUT per object: the data file is not a multipart upload
    assert requests.take() == {"GET pointer": 1, "PUT data": 1, "PUT manifest": 1, "PUT pointer": 1}
    for start in (10, 20):
        writer.append(rows(range(start, start + 3)))
    requests.take()

    deleter = mt.open_table(s3_uri)
    assert requests.take() == {"GET parent pointer": 1, "GET pointer": 1, "GET manifest": 1}
    deleter.delete("id = 11")  # the transaction reads the pointer as of now (docs/protocol.md)
    assert requests.take() == {"GET pointer": 1, "GET data": 1,
                               "PUT tombstone": 1, "PUT manifest": 1, "PUT pointer": 1}

    assert mt.open_table(s3_uri).scan().count() == 6
    assert requests.take() == {"GET parent pointer": 1, "GET pointer": 1, "GET manifest": 1}

    # No HEAD per data file: the manifest gives each file's size; small files are read whole.
    assert mt.open_table(s3_uri).scan().to_arrow().num_rows == 6
    assert requests.take() == {"GET parent pointer": 1, "GET pointer": 1, "GET manifest": 1, "GET data": 3,
                               "GET tombstone": 1}


def test_the_change_feed_costs_writers_no_request(s3_uri: str, requests: Requests) -> None:
    """Issue 33: the change feed is derived from what commits write anyway. An update or an
    upsert records which new row replaces which in its manifest (``parameters.replaced``),
    and, when the same commit also deletes other rows of the file, the positions in the
    tombstone object it writes in any case: one PUT per object, as in release 0.3.0. (The
    handle read the manifest when it was opened; the version has not moved, so the update
    reads only the pointer.)"""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = mt.create_table(s3_uri, schema)
    table.append(pa.table({"id": list(range(10)), "v": ["a"] * 10}, schema=schema))
    writer = mt.open_table(s3_uri)
    requests.take()
    writes = {"PUT data": 1, "PUT tombstone": 1, "PUT manifest": 1, "PUT pointer": 1}
    writer.update(values={"v": "b"}, where="id < 3")
    assert requests.take() == {"GET pointer": 1, "GET data": 1, **writes}
    writer.upsert(pa.table({"id": [1, 20], "v": ["u", "n"]}, schema=schema), on=["id"])
    assert requests.take() == {"GET pointer": 1, "GET data": 2, "GET tombstone": 1, **writes}
    with writer.transaction() as tx:
        tx.update(values={"v": "c"}, where="id = 5")
        tx.delete("id = 6")  # the same file: the update's positions go into the tombstone object
    assert requests.take() == {"GET pointer": 1, "GET data": 4, "GET tombstone": 1, **writes}
    assert [r["_change_type"] for r in writer.changes(3).to_arrow().to_pylist()] == [
        "delete", "update_preimage", "update_postimage"]


def test_ranged_reads_send_no_head(s3_uri: str, requests: Requests, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files too big to be read whole: the footer, then the columns, and still no HEAD. (The
    parent's pointer: ``open_table`` checks that the table is not a database's, issue 28.)"""
    monkeypatch.setattr(files, "WHOLE_READ_BYTES", 0)
    table = mt.create_table(s3_uri, SCHEMA)
    for start in (0, 10):
        table.append(rows(range(start, start + 3)))
    requests.take()
    assert mt.open_table(s3_uri).scan().to_arrow().num_rows == 6
    assert requests.take() == {"GET parent pointer": 1, "GET pointer": 1, "GET manifest": 1, "GET data": 4}


def test_a_large_data_file_streams_as_a_multipart_upload(s3_uri: str, requests: Requests) -> None:
    """Past one part (pyarrow's 10 MiB) the upload streams, so memory stays bounded."""
    schema = pa.schema([("blob", pa.binary())])
    table = mt.create_table(s3_uri, schema, compression="none")
    requests.take()
    table.append(pa.table({"blob": [os.urandom(1 << 20) for _ in range(12)]}, schema=schema))
    counts = requests.take()
    assert counts["POST data?uploads"] == 1 and counts["POST data?uploadId"] == 1
    assert counts["PUT data?partNumber"] >= 2 and counts["PUT data"] == 0
    assert mt.open_table(s3_uri).scan().to_arrow().num_rows == 12


# --- the manifest's size is untrusted ------------------------------------------------------
def _s3_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return mt.storage.store_for_uri(request.getfixturevalue("s3_uri"))


STORES: dict[str, Callable[[pytest.FixtureRequest, Path], Any]] = {
    "memory": lambda request, tmp_path: MemoryStore(),
    "local": lambda request, tmp_path: LocalStore(tmp_path / "t"),
    "s3": _s3_store,
    **{kind: lambda request, tmp_path, kind=kind: mt.storage.store_for_uri(*store_location(kind, request))
       for kind in ("seaweedfs", "gcs", "azure")},
}


@pytest.mark.parametrize("read", ["whole", "ranged"])
@pytest.mark.parametrize("kind", list(STORES))
@pytest.mark.parametrize("wrong", [lambda n: n + 100, lambda n: n - 3, lambda n: n * 1000, lambda n: 0,
                                   lambda n: 5], ids=["+100", "-3", "x1000", "zero", "five"])
def test_a_wrong_size_is_a_corrupt_table(kind: str, read: str, wrong: Callable[[int], int],
                                         request: pytest.FixtureRequest, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from the manifest, not the store, a wrong size must fail typed: never a hang,
    never other bytes. (A local file's size comes from the filesystem on a ranged read, so
    there a wrong size is harmless: the right rows come back. pyarrow's GcsFileSystem, too, reads
    by the object's own size, not the one it is given: there the right rows come back as well.)"""
    if read == "ranged":
        monkeypatch.setattr(files, "WHOLE_READ_BYTES", 0)
    table = mt.create_table(str(tmp_path / "t"), SCHEMA, store=STORES[kind](request, tmp_path))
    table.append(rows(range(10)))
    doc = latest_doc(table)
    size = doc["tail"][0]["size"] = wrong(doc["tail"][0]["size"])  # format v2: the entry is in the root's tail
    doc["totals"]["bytes"] = size  # the root's totals agree with it (they are checked): the data file does not
    commit_raw(table, doc)
    if kind in ("local", "gcs") and size > files.WHOLE_READ_BYTES:
        assert table.scan().to_arrow() == rows(range(10))
    else:
        assert_rejected(table.store, CorruptTableError, lambda: table.scan().to_arrow(),
                        match="size field says|not a readable Parquet file of")


# --- the same calls on every store ----------------------------------------------------------
def _calls(recorder: FaultyStore) -> Counter[str]:
    counts = Counter(f"{call.kind} {kind_of(call.key)}" for call in recorder.plan.calls)
    recorder.plan.calls.clear()
    return counts


@pytest.mark.parametrize("kind", ["s3", "seaweedfs", "gcs", "azure"])
def test_the_same_calls_per_operation_on_every_server(kind: str, request: pytest.FixtureRequest) -> None:
    """Counted at the store interface (control plane and data files), where each call is one
    request to S3, GCS and Azure alike: an append, a delete and an open + scan cost the same
    everywhere, but for GCS's probe past the pointer (one HEAD per pointer read:
    docs/protocol.md, "The pointer under rate limits")."""
    uri, options = store_location(kind, request)
    recorder = FaultyStore(mt.storage.store_for_uri(uri, options))
    probe = Counter({"head manifest": 1}) if recorder.pointer_may_lag else Counter()
    mt.create_table(uri, SCHEMA, store=recorder)
    assert _calls(recorder) == {"head pointer": 1, "put_if_absent manifest": 1, "put_if_absent pointer": 1}

    writer = mt.open_table(uri, store=recorder)
    writer.append(rows(range(1)))
    assert _calls(recorder) == Counter({"get pointer": 2, "get manifest": 1, "fs_open_output data": 1,
                                        "put_if_absent manifest": 1, "put_if_match pointer": 1}) + probe + probe
    for start in (10, 20):
        writer.append(rows(range(start, start + 3)))
    _calls(recorder)

    mt.open_table(uri, store=recorder).delete("id = 11")
    assert _calls(recorder) == Counter({"get pointer": 2, "get manifest": 1, "get data": 1,
                                        "put_if_absent tombstone": 1, "put_if_absent manifest": 1,
                                        "put_if_match pointer": 1}) + probe + probe

    assert mt.open_table(uri, store=recorder).scan().to_arrow().num_rows == 6
    assert _calls(recorder) == Counter({"get pointer": 1, "get manifest": 1, "get data": 3,
                                        "get tombstone": 1}) + probe

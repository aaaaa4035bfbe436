"""A table's whole life on each object service, through the public API and a real server:
create, append (a small file read whole, a large one read by ranges through the pyarrow data
plane), delete, scan from a fresh handle, time travel and gc. The stores' own conformance is
in test_storage.py; this checks that the layers above meet no surprise on any of them."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from manifest_table import create_table, open_table
from manifest_table.storage.fileio import WHOLE_READ_BYTES
from tests.conftest import store_location

SCHEMA = pa.schema([("id", pa.int64()), ("blob", pa.string())])
BIG_ROWS = 80_000


def batch(ids: range, width: int = 8) -> pa.Table:
    """Rows whose ``blob`` is random hex, so compression cannot shrink a big batch below
    ``WHOLE_READ_BYTES`` and its file is read by ranges."""
    return pa.table({"id": list(ids), "blob": [os.urandom(width).hex() for _ in ids]}, schema=SCHEMA)


@pytest.mark.parametrize("kind", ["s3", "seaweedfs", "gcs", "azure"])
def test_table_life(kind: str, request: pytest.FixtureRequest) -> None:
    uri, options = store_location(kind, request)
    t = create_table(uri, SCHEMA, storage_options=options)
    t.append(batch(range(100)))                                   # version 1: a small file
    t.append(batch(range(100, 100 + BIG_ROWS), width=16))         # version 2: a large one
    t.delete("id < 10 OR id >= 70100")                            # version 3
    assert t.version == 3

    fresh = open_table(uri, storage_options=options)
    assert max(f.size for f in fresh.manifest(3).files) > WHOLE_READ_BYTES, "one file must be read by ranges"
    ids = fresh.scan(columns=["id"]).to_arrow().column("id")
    assert sorted(ids.to_pylist()) == list(range(10, 70_100))
    assert fresh.scan(where="id >= 70090", columns=["id"]).count() == 10
    assert fresh.scan(version=1).count() == 100                  # time travel
    assert fresh.scan(version=2).count() == 100 + BIG_ROWS
    assert pc.max(fresh.scan(version=2, columns=["id"]).to_arrow().column("id")).as_py() == 99 + BIG_ROWS

    time.sleep(1.1)  # these stores stamp whole seconds: an object of this second is not older than grace 0
    report = fresh.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert report.versions_expired == range(0, 3)
    assert report.deleted["manifests"].count == 3
    after = open_table(uri, storage_options=options)
    assert after.scan().count() == 70_090
    assert sorted(after.scan(columns=["id"]).to_arrow().column("id").to_pylist()) == list(range(10, 70_100))

"""Hand-crafted objects for a table, written as a careless or hostile writer would: a next
manifest with any content (created, then the pointer moved by compare-and-swap), a raw
pointer, a raw tombstone object. They go through the store's own write primitives, so the
same helpers work on a local directory, in memory and on S3."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa

from manifest_table import Table, create_table
from manifest_table.format.manifest import manifest_key
from manifest_table.format.pointer import POINTER_KEY, encode_pointer
from manifest_table.storage import ObjectStore

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us")),
                    ("d", pa.decimal128(10, 2))])
ROWS = 10
DELETED = 3  # ids 0..2 are deleted by the fixture's second commit


def small_table(store: ObjectStore, uri: str = "crafted") -> Table:
    """Version 1 appends ids 0..9 in one data file; version 2 deletes ids 0..2 (a tombstone).
    Format v1, whose manifest lists every file: the crafted manifests edit that list (v2's
    roots and segments have their own cases in test_corrupt_v2.py)."""
    t = create_table(uri, SCHEMA, store=store, format_version=1)
    t.append(rows(range(ROWS)))
    t.delete(f"id < {DELETED}")
    return t


def rows(ids: range) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids],
                     "ts": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us")),
                     "d": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2))}, schema=SCHEMA)


def latest_doc(t: Table) -> dict[str, Any]:
    """The latest manifest as JSON, renumbered as its successor (ready to mutate and commit)."""
    version = t.version
    doc = json.loads(t.store.get(manifest_key(version)))
    doc.update(version=version + 1, parent_version=version, commit_id=uuid.uuid4().hex,
               timestamp_ms=doc["timestamp_ms"] + 1)
    return doc


def commit_raw(t: Table, doc: dict[str, Any] | bytes, version: int | None = None) -> str:
    """Create manifest ``version`` (default: the next) holding ``doc`` and move the pointer to it."""
    current = t.version
    version = current + 1 if version is None else version
    key = manifest_key(version)
    t.store.put_if_absent(key, doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    set_pointer(t, encode_pointer(version))
    return key


def set_pointer(t: Table, data: bytes) -> None:
    _, etag = t.store.get_with_etag(POINTER_KEY)
    t.store.put_if_match(POINTER_KEY, data, etag)


def put_object(t: Table, prefix: str, suffix: str, data: bytes) -> str:
    key = f"{prefix}{uuid.uuid4().hex}{suffix}"
    t.store.put_if_absent(key, data)
    return key


def data_file_of(t: Table) -> dict[str, Any]:
    """The file entry of the fixture's one data file (with its deletes), from the latest manifest."""
    return latest_doc(t)["files"][0]

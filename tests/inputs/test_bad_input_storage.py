"""Bad-input catalog, issue 8 items 1 and 9: keys that leave the table root, and stored
objects (manifests, the pointer, tombstones, data files) with fields of the wrong type or
range. Each case is one ``assert_rejected``: a typed error naming what is wrong, and every
byte of the table as it was (nothing read from elsewhere, nothing written or deleted).

Stored damage is made by ``tests/crafted.py`` the way a broken writer would make it: a new
version whose manifest holds the damage, then one operation that must refuse it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap

from manifest_table import Table, col, create_table, open_table
from manifest_table.data.tombstones import MAGIC
from manifest_table.errors import CorruptTableError, InvalidArgumentError, ManifestTableError
from manifest_table.format.manifest import DataFile, DeletionVector
from manifest_table.storage import LocalStore, store_for_uri
from tests.catalog import assert_rejected
from tests.conftest import make_store, store_location
from tests.crafted import ROWS, SCHEMA, commit_raw, latest_doc, put_object, rows, set_pointer, small_table

HEX = uuid.UUID(int=7).hex
DROP = object()


@pytest.fixture(params=["memory", "local"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Table:
    return small_table(make_store(request.param, request, tmp_path), str(tmp_path / "t"))


# --- damage: each a function of the table, applied before the rejected call -------------
def _update(target: dict[str, Any], changes: dict[str, Any]) -> None:
    for name, value in changes.items():
        if value is DROP:
            target.pop(name, None)
        else:
            target[name] = value


def top(**changes: Any) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        doc = latest_doc(t)
        _update(doc, changes)
        commit_raw(t, doc)
    return damage


def file(**changes: Any) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        doc = latest_doc(t)
        _update(doc["files"][0], changes)
        commit_raw(t, doc)
    return damage


def deletes(**changes: Any) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        doc = latest_doc(t)
        _update(doc["files"][0]["deletes"], changes)
        commit_raw(t, doc)
    return damage


def stats(column: str, entry: Any) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        doc = latest_doc(t)
        doc["files"][0]["stats"][column] = entry
        commit_raw(t, doc)
    return damage


def rewrites(value: Any) -> Callable[[Table], None]:
    return top(parameters={"rewrites": value})


def raw_manifest(data: bytes) -> Callable[[Table], None]:
    return lambda t: commit_raw(t, data)


def pointer(data: bytes) -> Callable[[Table], None]:
    return lambda t: set_pointer(t, data)


def tombstone(blob: bytes, **ref: Any) -> Callable[[Table], None]:
    """Point the data file's deletes at a new tombstone object holding ``blob``."""
    def damage(t: Table) -> None:
        key = put_object(t, "tombstones/", ".roaring", blob)
        doc = latest_doc(t)
        doc["files"][0]["deletes"] = {"path": key, "offset": len(MAGIC), "length": len(blob) - len(MAGIC),
                                      "cardinality": 1, **ref}
        commit_raw(t, doc)
    return damage


def data_object(blob: bytes) -> Callable[[Table], None]:
    def damage(t: Table) -> None:
        key = put_object(t, "data/", ".parquet", blob)
        doc = latest_doc(t)
        _update(doc["files"][0], {"path": key, "deletes": DROP})
        commit_raw(t, doc)
    return damage


def tx_call(action: Callable[[Any], Any]) -> Callable[[Table], Any]:
    """``action(tx)`` inside a transaction: the error must leave, and the abort it causes
    must delete nothing."""
    def call(t: Table) -> Any:
        with t.transaction() as tx:
            action(tx)
    return call


def dv_file(path: str, **fields: Any) -> DataFile:
    return DataFile(**{"path": path, "rows": 10, "size": 100, **fields})


def scan(t: Table) -> Any:
    return t.scan().to_arrow()


def count(t: Table) -> Any:
    return t.scan().count()


def append(t: Table) -> Any:
    return t.append(rows(range(100, 102)))


def gc(t: Table) -> Any:
    return t.gc(retain_for=None, grace=timedelta(0), force=True)


C, IA = CorruptTableError, InvalidArgumentError
BIG_BITMAP = MAGIC + BitMap([ROWS + 40]).serialize()

CASES: list[tuple[str, Callable[[Table], None] | None, Callable[[Table], Any], type[ManifestTableError], str]] = [
    # item 1: keys from storage -------------------------------------------------------------
    ("path-dotdot-other-table", file(path=f"data/../../other/data/{HEX}.parquet"), scan, C,
     r"files\[0\]\.path holds key .*'\.\.'"),
    ("path-absolute", file(path="/etc/passwd"), scan, C, r"files\[0\]\.path .* is not under data/"),
    ("path-dot-alias", file(path=f"data/./{HEX}.parquet"), scan, C, r"files\[0\]\.path .*'\.'"),
    ("path-empty-segment", file(path=f"data//{HEX}.parquet"), count, C, "empty path segment"),
    ("path-backslash", file(path=f"data/..\\{HEX}.parquet"), scan, C, "backslash"),
    ("path-url", file(path=f"s3://other-bucket/data/{HEX}.parquet"), scan, C, "is not under data/"),
    ("path-file-url", file(path="file:///etc/passwd"), append, C, "is not under data/"),
    ("path-nul", file(path=f"data/{HEX}\x00.parquet"), scan, C, "control character"),
    ("path-wrong-prefix", file(path=f"tombstones/{HEX}.roaring"), scan, C, "is not under data/"),
    ("path-manifest-as-data", file(path="manifest/v00000000000000000000.json"), gc, C, "is not under data/"),
    ("path-not-string", file(path=42), count, C, r"files\[0\]\.path holds key 42"),
    ("path-missing", file(path=DROP), count, C, r"files\[0\]\.path holds key missing"),
    ("deletes-path-dotdot", deletes(path=f"tombstones/../data/{HEX}.parquet"), scan, C,
     r"files\[0\]\.deletes\.path"),
    ("deletes-path-wrong-prefix", deletes(path=f"data/{HEX}.parquet"), scan, C, "is not under tombstones/"),
    ("rewrite-output-dotdot", rewrites([{"output": f"data/../{HEX}.parquet", "sources": []}]), append, C,
     r"parameters\.rewrites\[0\]\.output"),
    ("rewrite-source-absolute", rewrites([{"output": None, "sources": [
        {"path": "/etc/passwd", "rows": 1, "deletes": None}]}]), gc, C, r"rewrites\[0\]\.sources\[0\]\.path"),
    ("rewrite-source-deletes-path", rewrites([{"output": None, "sources": [
        {"path": f"data/{HEX}.parquet", "rows": 5, "deletes": {"path": "../t", "offset": 8, "length": 8,
                                                               "cardinality": 1}}]}]), gc, C,
     r"sources\[0\]\.deletes\.path"),
    ("rewrite-outputs-dotdot", rewrites([{"outputs": [{"path": f"data/../{HEX}.parquet", "rows": 0}], "sources": []}]),
     append, C, r"parameters\.rewrites\[0\]\.outputs\[0\]\.path"),
    ("rewrite-outputs-rows-missing", rewrites([{"outputs": [{"path": f"data/{HEX}.parquet"}], "sources": []}]), gc, C,
     r"outputs\[0\]\.rows is missing"),
    ("rewrite-outputs-rows-not-the-live-rows", rewrites([{
        "outputs": [{"path": f"data/{HEX}.parquet", "rows": 5}],
        "sources": [{"path": f"data/{HEX}.parquet", "rows": 5,
                     "deletes": {"path": f"tombstones/{HEX}.roaring", "offset": 8, "length": 8, "cardinality": 1}}],
    }]), append, C,
     r"rewrites\[0\]\.outputs is .*expected outputs whose rows add up to the sources' 4 live rows"),
    # item 1: keys from callers --------------------------------------------------------------
    ("add-files-dotdot", None, tx_call(lambda tx: tx.add_files([dv_file(f"data/../{HEX}.parquet")])), IA,
     r"add_files: key .*'\.\.'"),
    ("add-files-pointer", None, tx_call(lambda tx: tx.add_files([dv_file("data/../_latest_manifest")])), IA,
     "add_files"),
    ("add-files-absolute", None, tx_call(lambda tx: tx.add_files([dv_file(f"/tmp/{HEX}.parquet")])), IA,
     "is not under data/"),
    ("add-files-url", None, tx_call(lambda tx: tx.add_files([dv_file(f"s3://b/data/{HEX}.parquet")])), IA,
     "is not under data/"),
    ("add-files-not-datafile", None, tx_call(lambda tx: tx.add_files([{"path": f"data/{HEX}.parquet"}])), IA,
     "DataFile objects, not dict"),
    ("add-files-negative-rows", None, tx_call(lambda tx: tx.add_files([dv_file(f"data/{HEX}.parquet", rows=-5)])),
     IA, "rows=-5"),
    ("add-files-with-deletes", None, tx_call(lambda tx: tx.add_files([dv_file(
        f"data/{HEX}.parquet", deletes=DeletionVector(f"tombstones/{HEX}.roaring", 8, 8, 1))])), IA, "has deletes"),
    ("delete-positions-dotdot", None, tx_call(lambda tx: tx.delete_positions({f"data/../{HEX}": BitMap([0])})), IA,
     r"delete_positions: key .*'\.\.'"),
    ("delete-positions-url", None, tx_call(lambda tx: tx.delete_positions({"s3://b/data/x": BitMap([0])})), IA,
     "is not under data/"),
    # item 9: manifest fields ------------------------------------------------------------------
    ("rows-negative", file(rows=-900), count, C, r"files\[0\]\.rows is -900"),
    ("rows-over-32-bits", file(rows=2**32), scan, C, r"files\[0\]\.rows is 4294967296"),
    ("rows-bool", file(rows=True), count, C, r"files\[0\]\.rows is True"),
    ("rows-string", file(rows="10"), count, C, r"files\[0\]\.rows is '10'"),
    ("rows-float", file(rows=10.0), count, C, r"files\[0\]\.rows is 10\.0"),
    ("size-negative", file(size=-1), count, C, r"files\[0\]\.size is -1"),
    ("size-missing", file(size=DROP), count, C, r"files\[0\]\.size is missing"),
    ("file-not-object", top(files=["data/x.parquet"]), count, C, r"files\[0\] is 'data/x.parquet'"),
    ("files-not-list", top(files={}), count, C, "field files is {}"),
    ("file-listed-twice", lambda t: (lambda d: (d["files"].append(dict(d["files"][0])), commit_raw(t, d)))(
        latest_doc(t)), count, C, "lists data/.* more than once"),
    ("version-negative", top(version=-1, parent_version=None), append, C, "field version is -1"),
    ("version-other-than-key", top(version=7, parent_version=6), append, C, "says it is version 7"),
    ("parent-wrong", top(parent_version=0), append, C, r"field parent_version is 0; expected 2"),
    ("parent-bool", top(parent_version=True), append, C, "field parent_version is True"),
    ("format-future", top(format_version=4), append, C, "format version 4.*upgrade"),
    ("format-string", top(format_version="1"), append, C, "field format_version is '1'"),
    ("timestamp-string", top(timestamp_ms="now"), append, C, "field timestamp_ms is 'now'"),
    ("timestamp-overflow", top(timestamp_ms=10**20), append, C, "field timestamp_ms is 100000000000000000000"),
    ("commit-id-int", top(commit_id=5), append, C, "field commit_id is 5"),
    ("operation-missing", top(operation=DROP), append, C, "field operation is missing"),
    ("schema-garbage", top(schema="!!!not base64"), append, C, "field schema"),
    ("schema-not-string", top(schema=5), append, C, "field schema is 5"),
    ("parameters-list", top(parameters=[]), append, C, "field parameters is"),
    ("app-transactions-string", top(app_transactions={"q": "3"}), append, C, r"app_transactions\.q is '3'"),
    ("rewrites-not-list", rewrites({"output": None}), gc, C, "field parameters.rewrites is"),
    ("rewrite-source-rows-negative", rewrites([{"output": None, "sources": [
        {"path": f"data/{HEX}.parquet", "rows": -5, "deletes": None}]}]), gc, C, r"sources\[0\]\.rows is -5"),
    ("manifest-truncated", raw_manifest(b'{"format_version": 1, "vers'), append, C, "is not valid JSON"),
    ("manifest-array", raw_manifest(b"[1, 2]"), append, C, "is not a JSON object"),
    ("manifest-not-utf8", raw_manifest(b'{"a": "\xff"}'), append, C, "is not valid JSON"),
    ("manifest-deep-nesting", raw_manifest(b'{"files": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), append, C,
     "is not valid JSON"),
    # item 9: deletion vectors and tombstones -------------------------------------------------
    ("cardinality-above-rows", deletes(cardinality=ROWS + 1), count, C,
     r"deletes\.cardinality is 11; expected an integer from 1 to the file's 10 rows"),
    ("cardinality-zero", deletes(cardinality=0), count, C, r"deletes\.cardinality is 0"),
    ("offset-negative", deletes(offset=-8), scan, C, r"deletes\.offset is -8"),
    ("length-string", deletes(length="8"), scan, C, r"deletes\.length is '8'"),
    ("deletes-not-object", file(deletes="tombstones/x.roaring"), count, C, r"files\[0\]\.deletes is"),
    ("length-past-object", deletes(length=10**6), scan, C, "does not lie inside"),
    ("offset-inside-header", deletes(offset=0), scan, C, "does not lie inside"),
    ("cardinality-mismatch", deletes(cardinality=2), scan, C, "has 3 positions.*cardinality says 2"),
    ("bitmap-garbage", tombstone(MAGIC + b"\x00garbage-bytes"), scan, C, "does not deserialise"),
    ("bitmap-empty-slice", tombstone(MAGIC + b"x", length=0), scan, C, "does not deserialise"),
    ("bitmap-past-file-end", tombstone(BIG_BITMAP), scan, C, "deletes position 50, past the end of its data file"),
    ("tombstone-no-magic", tombstone(b"NOTMAGIC" + BitMap([1]).serialize()), scan, C, "is not a tombstone object"),
    # item 9: column stats (checked when a filter first uses them) ------------------------------
    ("stats-int-as-string", stats("id", {"min": "0", "max": "9", "null_count": 0}),
     lambda t: t.scan(where="id > 3").to_arrow(), C, r"stats\.id\.min is '0'"),
    ("stats-null-count-negative", stats("id", {"min": 0, "max": 9, "null_count": -1}),
     lambda t: t.scan(where="id > 3").count(), C, r"stats\.id\.null_count is -1"),
    ("stats-entry-not-object", stats("name", ["a", "z"]),
     lambda t: t.scan(where="name = 'n5'").to_arrow(), C, r"stats\.name is \['a', 'z'\]"),
    ("stats-timestamp-out-of-range", stats("ts", {"min": 10**30, "max": 10**30, "null_count": 0}),
     lambda t: t.scan(where=col("ts") > datetime(2020, 1, 1)).to_arrow(), C, r"stats\.ts does not decode"),
    ("stats-decimal-nan", stats("d", {"min": "NaN", "max": "1", "null_count": 0}),
     lambda t: [t.scan(where=w).count() for w in ("d > 1", "d < 1")], C, r"stats\.d is Decimal\('NaN'\)"),
    ("stats-decimal-garbage", stats("d", {"min": "one", "max": "2", "null_count": 0}),
     lambda t: t.scan(where="d > 1").to_arrow(), C, r"stats\.d does not decode"),
    ("stats-not-object", file(stats=[1, 2]), count, C, r"files\[0\]\.stats is \[1, 2\]"),
    # item 9: data files -----------------------------------------------------------------------
    ("rows-disagree-with-footer", file(rows=ROWS + 2), scan, C, "Parquet footer has 10 rows.*says 12"),
    ("data-not-parquet", data_object(b"not parquet at all"), scan, C, "not a readable Parquet file|size field says"),
    # item 9: the pointer ------------------------------------------------------------------------
    ("pointer-version-string", pointer(b'{"format_version": 1, "version": "2"}'), append, C,
     "_latest_manifest: field version is '2'"),
    ("pointer-version-negative", pointer(b'{"format_version": 1, "version": -1}'), append, C,
     "field version is -1"),
    ("pointer-version-huge", pointer(b'{"format_version": 1, "version": 18446744073709551616}'), append, C,
     "field version is 18446744073709551616"),
    ("pointer-version-float", pointer(b'{"format_version": 1, "version": 2.5}'), count, C, "field version is 2.5"),
    ("pointer-version-missing", pointer(b'{"format_version": 1}'), count, C, "field version is missing"),
    ("pointer-format-future", pointer(b'{"format_version": 2, "version": 2}'), append, C,
     "format version 2.*will not overwrite it"),
    ("pointer-not-json", pointer(b"2"), lambda t: open_table(t.uri, store=t.store), C, "is not a JSON object"),
    ("pointer-garbage", pointer(b"\x00\x01"), append, C, "_latest_manifest is not valid JSON"),
]


@pytest.mark.parametrize("name, damage, call, error, match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_and_changes_nothing(table: Table, name: str, damage: Callable[[Table], None] | None,
                                                   call: Callable[[Table], Any], error: type[ManifestTableError],
                                                   match: str) -> None:
    if damage is not None:
        damage(table)
    assert_rejected(table.store, error, lambda: call(table), match=match)


def test_distinct_cases() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


# --- locations --------------------------------------------------------------------------
def test_file_host_uri_writes_nothing_in_the_current_directory(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert_rejected(LocalStore(tmp_path), InvalidArgumentError, lambda: create_table("file://t", SCHEMA),
                    match="names the host 't'")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["s3", "seaweedfs", "gcs", "azure"])
def test_dotdot_location_writes_nothing(kind: str, request: pytest.FixtureRequest) -> None:
    uri, options = store_location(kind, request)
    assert_rejected(store_for_uri(uri, options), InvalidArgumentError,
                    lambda: create_table(f"{uri}/p/x/../y", SCHEMA, storage_options=options), match="'..' segment")

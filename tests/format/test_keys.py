"""The one key check (format/keys.py): which names are keys of a table, which of those our
writers produce (what GC may delete), and the table locations a URI may name."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from pyroaring import BitMap

from manifest_table import create_table
from manifest_table.data.tombstones import write_tombstone
from manifest_table.data.write import DATA_PREFIX as WRITE_DATA_PREFIX
from manifest_table.data.write import new_data_key
from manifest_table.errors import CorruptTableError, InvalidArgumentError
from manifest_table.format.keys import (
    DATA_PREFIX,
    PREFIXES,
    TOMBSTONE_PREFIX,
    caller_key,
    is_database_writer_key,
    is_writer_key,
    key_problem,
    stored_key,
)
from manifest_table.format.manifest import manifest_key, version_of_key
from manifest_table.storage import LocalStore, MemoryStore, store_for_uri
from manifest_table.storage.s3 import S3Store
from tests.crafted import SCHEMA

HEX = "0123456789abcdef" * 2

GOOD = [
    f"data/{HEX}.parquet",
    f"tombstones/{HEX}.roaring",
    "manifest/v00000000000000000042.json",
    f"segments/{HEX}.parquet",
    "data/part-00000-1f2e.snappy.parquet",  # Spark's naming: a valid key, just not ours to delete
    "data/sub/dir/x.parquet",
    "data/...",  # a name made of three dots is a name, not a path step
    "data/.hidden",
    "data/x y ü 😀.parquet",
    "data/" + "x" * 1000,
]

BAD = [
    ("", "is not under"),
    ("x.parquet", "is not under"),
    ("/data/x.parquet", "is not under"),
    ("/etc/passwd", "is not under"),
    ("data", "is not under"),
    ("data/", "empty path segment"),
    ("data//x.parquet", "empty path segment"),
    ("data/x/", "empty path segment"),
    ("data/./x.parquet", r"'\.' or '\.\.'"),
    ("data/../x.parquet", r"'\.' or '\.\.'"),
    ("data/../../other/data/x.parquet", r"'\.' or '\.\.'"),
    ("data/x/..", r"'\.' or '\.\.'"),
    ("Data/x.parquet", "is not under"),
    ("segment/x.parquet", "is not under"),  # close to format v2's segments/, but not it
    ("_latest_manifest", "is not under"),
    ("data\\..\\x.parquet", "is not under"),
    ("data/..\\x.parquet", "backslash"),
    ("s3://bucket/data/x.parquet", "is not under"),
    ("data/s3://bucket/x", "colon"),
    ("data/c:x.parquet", "colon"),
    ("data/x\x00.parquet", "control character"),
    ("data/x\n.parquet", "control character"),
    ("data/x\x7f", "control character"),
    ("data/x\x85", "control character"),
    ("data/\ud800.parquet", "surrogate"),
    ("data/" + "x" * 1100, "longer than 1024 bytes"),
    ("data/" + "é" * 600, "longer than 1024 bytes"),
    (None, "not a string"),
    (5, "not a string"),
    (b"data/x.parquet", "not a string"),
    (["data/x.parquet"], "not a string"),
]


@pytest.mark.parametrize("key", GOOD)
def test_valid_keys(key: str) -> None:
    assert key_problem(key) is None
    assert stored_key(key, key[:key.index("/") + 1], "obj", "field") == key


@pytest.mark.parametrize("key, problem", BAD)
def test_invalid_keys_are_refused_not_normalised(key: object, problem: str) -> None:
    found = key_problem(key)
    assert found is not None
    assert re.search(problem, found), found
    with pytest.raises(CorruptTableError, match=r"manifest/v1\.json: field files\[3\]\.path holds key"):
        stored_key(key, DATA_PREFIX, "manifest/v1.json", "files[3].path")
    with pytest.raises(InvalidArgumentError, match="add_files: key"):
        caller_key(key, DATA_PREFIX, "add_files")


def test_a_key_must_be_under_the_prefix_its_field_asks_for() -> None:
    assert key_problem(f"tombstones/{HEX}.roaring", DATA_PREFIX) == "is not under data/"
    assert key_problem(f"data/{HEX}.parquet", TOMBSTONE_PREFIX) == "is not under tombstones/"
    assert key_problem("manifest/v00000000000000000001.json", DATA_PREFIX) is not None
    assert set(PREFIXES) == {"data/", "tombstones/", "manifest/", "segments/", "roots/", "metadata/", "_delta_log/"}


@pytest.mark.parametrize("key, ours", [
    (f"data/{HEX}.parquet", True),
    (f"tombstones/{HEX}.roaring", True),
    ("manifest/v00000000000000000000.json", True),
    ("manifest/v99999999999999999999.json", True),
    (f"segments/{HEX}.parquet", True),
    (f"segments/{HEX}.json", False),
    (f"roots/{HEX}.json", True),  # a database's table roots (format/database.py)
    (f"roots/{HEX}.parquet", False),
    # The mirrors' objects (docs/mirrors.md)
    (f"tombstones/{HEX}.puffin", True),
    ("tombstones/deletion_vector_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.bin", True),
    ("tombstones/deletion_vector_0f1e2d3c.bin", False),
    ("metadata/v12.metadata.json", True),
    ("metadata/version-hint.text", True),
    (f"metadata/snap-123-{HEX}.avro", True),
    (f"metadata/{HEX}-d-{HEX}.avro", True),
    (f"metadata/{HEX}-x3-{HEX}.avro", True),
    (f"metadata/t-x-{HEX}.avro", True),
    ("metadata/notes.json", False),
    ("_delta_log/00000000000000000007.json", True),
    ("_delta_log/00000000000000000010.checkpoint.parquet", True),
    ("_delta_log/_last_checkpoint", True),
    ("_delta_log/00000000000000000007.crc", False),
    (f"data/{HEX.upper()}.parquet", False),
    (f"data/{HEX[:-1]}.parquet", False),
    (f"data/{HEX}0.parquet", False),
    (f"data/{HEX}.parquet.tmp", False),
    (f"data/{HEX}.roaring", False),
    (f"tombstones/{HEX}.parquet", False),
    (f"data/nested/{HEX}.parquet", False),
    (f"data/other-table/data/{HEX}.parquet", False),
    ("data/notes.txt", False),
    ("data/part-00000-1f2e.snappy.parquet", False),
    (f"data/_spark-{HEX}/part-00000-1f2e-c000.zstd.parquet", True),
    (f"data/_spark-{HEX}/_temporary/0/_temporary/attempt_2026_0001_m_000000_1/part-0.parquet", True),
    (f"data/_spark-{HEX}/group=3/part-00000.zstd.parquet", True),
    (f"data/_spark-{HEX}", False),
    (f"data/_spark-{HEX}/../{HEX}.parquet", False),
    (f"data/_spark-{HEX}/./x.parquet", False),
    (f"data/_spark-{HEX[:-1]}/part-0.parquet", False),
    ("data/_spark-notes/part-0.parquet", False),
    ("manifest/v1.json", False),
    ("manifest/v0000000000000000000١.json", False),  # an Arabic-Indic digit is a digit to str.isdigit
    ("manifest/v00000000000000000000.json.bak", False),
    ("_latest_manifest", False),
    (f"other/{HEX}.parquet", False),
    (f"{HEX}.parquet", False),
])
def test_writer_shapes(key: str, ours: bool) -> None:
    assert is_writer_key(key) is ours


def test_what_our_writers_name_has_the_writer_shapes() -> None:
    assert WRITE_DATA_PREFIX == DATA_PREFIX
    assert is_writer_key(new_data_key())
    refs = write_tombstone(MemoryStore(), {"data/x.parquet": BitMap([1])})
    assert is_writer_key(refs["data/x.parquet"].path)
    assert is_writer_key(manifest_key(0)) and is_writer_key(manifest_key(2**63 - 1))


def test_version_of_key_reads_only_the_exact_manifest_shape() -> None:
    assert version_of_key("manifest/v00000000000000000042.json") == 42
    for key in ("manifest/v0000000000000000000١.json", "manifest/v42.json", "data/v00000000000000000042.json",
                "manifest/v00000000000000000042.json/x"):
        assert version_of_key(key) is None


# --- locations --------------------------------------------------------------------------
@pytest.mark.parametrize("uri, problem", [
    ("s3://bucket/p/x/../y", "'..' segment"),
    ("s3://bucket/p/./y", r"'\.' segment"),
    ("s3://bucket/p//y", "empty segment"),
    ("s3://bucket//p", "empty segment"),
    ("s3://bucket/..", "'..' segment"),
    ("s3a://bucket/p/../../q", "'..' segment"),
    ("s3://bucket/p\\q", "backslash"),
    ("s3://bucket/p\x00q", "control character"),
])
def test_s3_locations_must_be_canonical(uri: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        S3Store.from_uri(uri)


@pytest.mark.parametrize("uri, expected", [
    ("s3://bucket", ""), ("s3://bucket/", ""), ("s3://bucket/a/b", "a/b"), ("s3://bucket/a/b/", "a/b"),
    ("s3://bucket/a.b/..c/...", "a.b/..c/..."),
])
def test_canonical_s3_locations_still_work(uri: str, expected: str) -> None:
    assert S3Store.from_uri(uri).prefix == expected


@pytest.mark.parametrize("uri, problem", [
    ("file://t", "names the host 't'"),
    ("file://tables/t", "names the host 'tables'"),
    ("file:relative/t", "not a file:///absolute/path"),
    ("file:///tmp/a/../b", r"'\.' or '\.\.' segment"),
    ("file:///tmp/./b", r"'\.' or '\.\.' segment"),
    ("file:///tmp/t?x=1", "not a file:///absolute/path"),
])
def test_file_uris_must_name_an_absolute_directory(uri: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        store_for_uri(uri)


def test_file_t_does_not_mean_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="three slashes"):
        create_table("file://t", SCHEMA)
    assert os.listdir(tmp_path) == []


def test_plain_local_paths_and_absolute_file_uris_still_work(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for uri, root in [("rel/t", tmp_path / "rel" / "t"), ("./dot/../t2", tmp_path / "t2"),
                      (f"file://{tmp_path}/t3", tmp_path / "t3"), (f"file://localhost{tmp_path}/t4", tmp_path / "t4"),
                      (str(tmp_path / "t5"), tmp_path / "t5")]:
        store = store_for_uri(uri)
        assert isinstance(store, LocalStore) and store.root == str(root)


@pytest.mark.parametrize("key, ours", [
    ("manifest/v00000000000000000003.json", True),
    (f"tables/{HEX}/roots/{HEX}.json", True),
    (f"tables/{HEX}/data/{HEX}.parquet", True),
    (f"tables/{HEX}/segments/{HEX}.parquet", True),
    (f"tables/{HEX}/tombstones/{HEX}.roaring", True),
    (f"tables/{HEX}/manifest/v00000000000000000003.json", False),  # a table nested in the database
    (f"tables/{HEX}/_latest_manifest", False),
    (f"tables/{HEX.upper()}/data/{HEX}.parquet", False),
    (f"tables/orders/data/{HEX}.parquet", False),
    (f"tables/{HEX}/notes.txt", False),
    (f"data/{HEX}.parquet", False),
    ("_latest_manifest", False),
])
def test_a_database_deletes_only_its_writers_shapes(key: str, ours: bool) -> None:
    assert is_database_writer_key(key) is ours

"""DuckDB's own ``iceberg_scan`` and ``delta_scan`` read our mirrors (docs/mirrors.md).

The extensions on PyPI (``duckdb-ext-iceberg``, ``-avro``, ``-delta``, ``-httpfs``) are built
for DuckDB 1.4.4, and the suite's DuckDB is newer, so the readers run in a subprocess whose
path starts with a directory holding ``duckdb==1.4.4`` and those packages, installed once
(about 30 s) by tests/reader_envs.py. DuckDB 1.5.5 reads the random histories of
tests/mirrors/test_mirror_matrix.py; here, the smallest history that shows its one known misread.

DuckDB 1.4.4's ``delta_scan`` reads the latest version only (it takes no version), so older
versions are checked through ``iceberg_scan`` and the other readers (tests/mirrors/test_mirrors.py)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

import manifest_table as mt
from tests.mirror_canonical import of_arrow
from tests.mirror_matrix import deletion_vectors
from tests.mirror_readers import PROPERTIES, SCHEMA, delta_rows, rows, run_history
from tests.reader_envs import NO_FILE_CACHE, read_duckdb


def _rows(t: mt.Table, version: int | None = None) -> list[list[object]]:
    return of_arrow(t.scan(version=version).to_arrow())


def _check(t: mt.Table, location: str, secret: str | None = None) -> None:
    versions = [info.version for info in t.history()]
    queries = {f"iceberg {v}": f"SELECT * FROM iceberg_scan('{location}/metadata/v{v}.metadata.json')"
               for v in versions}
    queries["iceberg latest"] = f"SELECT * FROM iceberg_scan('{location}')"
    queries["delta latest"] = f"SELECT * FROM delta_scan('{location}')"
    found = read_duckdb("1.4.4", queries, [secret] if secret else [])
    expected = {f"iceberg {v}": _rows(t, v) for v in versions}
    expected["iceberg latest"] = expected["delta latest"] = _rows(t)
    assert {k: v for k, v in found.items() if v != expected[k]} == {}


def test_duckdb_reads_both_mirrors(tmp_path: Path) -> None:
    """With the layout mirrored too (issue 34): Iceberg's sort order, Delta's clustering domain."""
    layout = {"cluster_by": ["small", "id"], "sort_by": ["id"]}
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={**PROPERTIES, **layout},
                        mirrors={"iceberg": {}, "delta": {"checkpoint_interval": 4}})
    run_history(t, 21, 24, widen=False, gc_every=10)
    _check(t, str(tmp_path / "t"))


def test_duckdb_reads_both_mirrors_on_s3(s3_uri: str, moto_endpoint: str) -> None:
    t = mt.create_table(s3_uri, SCHEMA, properties=PROPERTIES,
                        mirrors={"iceberg": {}, "delta": {"checkpoint_interval": 4}})
    run_history(t, 22, 12, widen=False)
    endpoint = urlparse(moto_endpoint).netloc
    secret = (f"CREATE SECRET moto (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
              f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)")
    _check(t, s3_uri, secret)


def test_duckdb_reads_widened_columns(tmp_path: Path) -> None:
    """Iceberg follows a widening; a Delta mirror turned on after one reads the older files'
    narrower types too (deltalake as well)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties=PROPERTIES, mirrors=["iceberg"])
    run_history(t, 3, 8, widen=True)
    with t.update_schema() as s:
        s.widen("small", pa.int64())
    run_history(t, 4, 6, widen=True)
    t.set_mirrors(["iceberg", "delta"])
    assert delta_rows(t.uri) == rows(t.to_arrow())
    _check(t, str(tmp_path / "t"))


def test_duckdb_1_5_5_file_cache_misreads_a_later_puffin_blob(tmp_path: Path) -> None:
    """The shape the reader matrix excuses for DuckDB 1.5.5 (tests/mirror_matrix.py), in the
    smallest history and the read order that always show it (duckdb-iceberg#1182). Version
    4 deletes a row in each of three files: one Puffin file of three vectors of equal length,
    P1, P2, P3 in its order. Reading version 6 (P3 alone from that file) caches P3's range;
    version 5 (P1 and P3 from it) grows P1's read over the gap up to P3's, so the range holds
    P2 too; version 4 then takes P2 from the start of that range: P1's bitmap, applied to
    P2's file. pyiceberg and DuckDB 1.4.4 read all three right, and so does 1.5.5 with its
    file cache off."""
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, pa.schema([("id", pa.int64())]), mirrors=["iceberg"])
    for first in (0, 10, 20):
        t.append(pa.table({"id": pa.array(range(first, first + 10), pa.int64())}))
    t.delete("id IN (0, 11, 22)")  # the file of ids 10k.. loses its row at position k
    vectors = deletion_vectors(f"{uri}/metadata/v4.metadata.json")
    assert len(vectors) == 3 and len({puffin for puffin, _ in vectors.values()}) == 1
    by_offset = sorted(vectors, key=lambda path: vectors[path][1])
    p1, p2, _ = (pq.read_table(path.removeprefix("file://"))["id"][0].as_py() for path in by_offset)
    t.delete(f"id = {p2 + 9}")
    t.delete(f"id = {p1 + 9}")
    queries = {f"v{v}": f"SELECT * FROM iceberg_scan('{uri}/metadata/v{v}.metadata.json')" for v in (6, 5, 4)}
    expected = {f"v{v}": _rows(t, v) for v in (6, 5, 4)}
    assert {k: of_arrow(StaticTable.from_metadata(q.split("'")[1]).scan().to_arrow()) for k, q in queries.items()} \
        == expected
    assert read_duckdb("1.4.4", queries) == expected
    assert read_duckdb("1.5.5", queries, [NO_FILE_CACHE]) == expected
    misread = read_duckdb("1.5.5", queries)
    assert {k: v for k, v in misread.items() if v != expected[k]}.keys() == {"v4"}
    in_p2 = sorted(int(r[0]) for r in misread["v4"] if p2 <= int(r[0]) < p2 + 10)  # type: ignore[index]
    assert in_p2 == [p2 + k for k in range(10) if k != p1 // 10], "DuckDB fixed #1182? then drop its excuse"

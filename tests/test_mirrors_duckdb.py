"""DuckDB's own ``iceberg_scan`` and ``delta_scan`` read our mirrors (docs/mirrors.md).

The extensions on PyPI (``duckdb-ext-iceberg``, ``-avro``, ``-delta``, ``-httpfs``) are built
for DuckDB 1.4.4, and the suite's DuckDB is newer, so the readers run in a subprocess whose
path starts with a directory holding ``duckdb==1.4.4`` and those packages, installed once
(about 30 s) by tests/reader_envs.py. DuckDB 1.5.5 reads the random histories of
tests/test_mirror_matrix.py.

DuckDB 1.4.4's ``delta_scan`` reads the latest version only (it takes no version), so older
versions are checked through ``iceberg_scan`` and the other readers (tests/test_mirrors.py)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa

import manifest_table as mt
from tests.mirror_canonical import of_arrow
from tests.reader_envs import DUCKDB_1_4, installed, run_reader
from tests.mirror_readers import PROPERTIES, SCHEMA, delta_rows, rows, run_history


def _duckdb(queries: dict[str, str], secret: str | None = None) -> dict[str, object]:
    request = json.dumps({"secret": secret, "queries": queries})
    found = json.loads(run_reader("duckdb_mirror_reader.py", installed("duckdb-1.4.4", DUCKDB_1_4), request))
    assert found.pop("duckdb") == "1.4.4"
    return found


def _rows(t: mt.Table, version: int | None = None) -> list[list[object]]:
    return of_arrow(t.scan(version=version).to_arrow())


def _check(t: mt.Table, location: str, secret: str | None = None) -> None:
    versions = [info.version for info in t.history()]
    queries = {f"iceberg {v}": f"SELECT * FROM iceberg_scan('{location}/metadata/v{v}.metadata.json')"
               for v in versions}
    queries["iceberg latest"] = f"SELECT * FROM iceberg_scan('{location}')"
    queries["delta latest"] = f"SELECT * FROM delta_scan('{location}')"
    found = _duckdb(queries, secret)
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

"""DuckDB's own ``iceberg_scan`` and ``delta_scan`` read our mirrors (docs/mirrors.md).

The extensions on PyPI (``duckdb-ext-iceberg``, ``-avro``, ``-delta``, ``-httpfs``) are built
for DuckDB 1.4.4, and the suite's DuckDB is newer, so the readers run in a subprocess whose
path starts with a directory holding ``duckdb==1.4.4`` and those packages. The test installs
it there with ``pip --target`` on first use (about 30 s, once) and reuses it afterwards:
``$MT_DUCKDB_ENV``, default ``~/.cache/manifest_table/duckdb-1.4.4-<hash of the packages>``.

DuckDB 1.4.4's ``delta_scan`` reads the latest version only (it takes no version), so older
versions are checked through ``iceberg_scan`` and the other readers (tests/test_mirrors.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa

import manifest_table as mt
from tests.cached_env import cache_dir, installed
from tests.duckdb_mirror_reader import canonical
from tests.mirror_readers import PROPERTIES, SCHEMA, delta_rows, rows, run_history

PACKAGES = ["duckdb==1.4.4", "pytz",
            *(f"duckdb-ext-{name}==1.4.4.20260205" for name in ("iceberg", "avro", "delta", "httpfs"))]
"""(pytz: DuckDB 1.4.4's Python client needs it to return zoned timestamps.)"""
ENV = Path(os.environ.get("MT_DUCKDB_ENV", cache_dir("duckdb-1.4.4", PACKAGES)))
READER = Path(__file__).with_name("duckdb_mirror_reader.py")


def _environment() -> Path:
    """The directory holding DuckDB 1.4.4 and its extensions, installed once."""
    return installed(ENV, PACKAGES)


def _duckdb(queries: dict[str, str], secret: str | None = None) -> dict[str, object]:
    env_dir = _environment()
    request = json.dumps({"extensions": str(env_dir / "duckdb_ext"), "secret": secret, "queries": queries})
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(env_dir), str(Path(__file__).parents[1])])}
    done = subprocess.run([sys.executable, str(READER)], input=request, capture_output=True, text=True,
                          env=environ, check=True, timeout=300)
    found = json.loads(done.stdout)
    assert found.pop("duckdb") == "1.4.4"
    return found


def _rows(t: mt.Table, version: int | None = None) -> list[list[object]]:
    table = t.scan(version=version).to_arrow()
    return canonical(table.column_names, list(zip(*(c.to_pylist() for c in table.columns))))


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
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties=PROPERTIES,
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

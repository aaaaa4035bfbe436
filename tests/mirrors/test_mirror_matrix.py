"""The reader matrix: every retained version of random differential histories, mirrored to
Iceberg and Delta, read by the readers others wrote must equal our own rows
(tests/mirror_matrix.py builds the cases and says what is excused, and why).

- in this process: deltalake (``scan()``; ``to_pyarrow_table()`` where the version's protocol
  has no feature its pyarrow path refuses), pyiceberg (by each version's metadata file, by
  ``version-hint.text``, and by each snapshot id the newest metadata lists), Polars
  (``scan_iceberg``, ``scan_delta``);
- DuckDB 1.4.4 and 1.5.5 with their ``iceberg`` and ``delta`` extensions from PyPI
  (``iceberg_scan`` of every version, the hint, ``delta_scan`` of the latest, and
  ``IS NULL`` counts of every column through both);
- the reference JVM readers: Spark 4.1 with ``delta-spark`` 4.4.0 (``versionAsOf`` and
  ``timestampAsOf``) and with ``iceberg-spark-runtime`` 1.12.0 (by metadata file), jars from
  Maven Central cached under ``$MT_READER_ENVS/ivy``.

Each test prints its matrix (``pytest -s``). Lengths: see tests/mirror_matrix.py."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from tests.mirror_canonical import of_arrow
from tests.mirror_matrix import Case, Outcome, build_cases, metadata_file, null_counts, quoted, spark_sample
from tests.reader_envs import DUCKDB, NO_FILE_CACHE, PYSPARK_4_1, ROOT, installed, read_duckdb, run_reader

SPARK_PACKAGES = ["io.delta:delta-spark_4.1_2.13:4.4.0", "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"]
REFUSED_BY_PYARROW_PATH = {"columnMapping", "deletionVectors"}
"""Reader features deltalake's ``to_pyarrow_table`` refuses (its pyarrow dataset path)."""


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return build_cases(tmp_path_factory.mktemp("matrix"))


def _read(outcome: Outcome, case: Case, version: int, label: str, read: Callable[[], Any], expected: Any) -> None:
    try:
        got = read()
    except Exception as exc:  # any error of a reader is a finding
        got = f"error: {type(exc).__name__}: {str(exc)[:300]}"
    outcome.check(case, version, label, got, expected)


def _report(outcomes: list[Outcome]) -> None:
    print("\n" + "\n".join(o.summary() for o in outcomes))
    failures = [f for o in outcomes for f in o.failures]
    assert not failures, "\n".join(failures[:40])


def test_python_readers_read_every_retained_version(cases: list[Case]) -> None:
    import polars as pl
    from deltalake import DeltaTable
    from pyiceberg.table import StaticTable

    deltalake, pyiceberg, polars = Outcome("deltalake"), Outcome("pyiceberg"), Outcome("polars")
    for case in cases:
        latest = max(case.versions)
        for version, expected in case.versions.items():
            table = DeltaTable(case.uri, version=version)
            protocol = table.protocol()
            case.protocols[version] = {"readerFeatures": protocol.reader_features or []}
            _read(deltalake, case, version, "scan()", lambda: of_arrow(table.scan().read_all()), expected)
            if not REFUSED_BY_PYARROW_PATH & set(protocol.reader_features or []):
                _read(deltalake, case, version, "to_pyarrow_table()", lambda: of_arrow(table.to_pyarrow_table()),
                      expected)
            _read(pyiceberg, case, version, "metadata file",
                  lambda: of_arrow(StaticTable.from_metadata(metadata_file(case, version)).scan().to_arrow()), expected)
            _read(polars, case, version, "scan_iceberg",
                  lambda: of_arrow(pl.scan_iceberg(metadata_file(case, version)).collect().to_arrow()), expected)
            _read(polars, case, version, "scan_delta",
                  lambda: of_arrow(pl.scan_delta(case.uri, version=version).collect().to_arrow()), expected)
        _read(pyiceberg, case, latest, "version-hint.text",
              lambda: of_arrow(StaticTable.from_metadata(case.uri).scan().to_arrow()), case.versions[latest])
        newest = StaticTable.from_metadata(metadata_file(case, latest))
        for snapshot in newest.metadata.snapshots:
            version = int(snapshot.summary["manifest-table.version"])
            _read(pyiceberg, case, version, "snapshot id",
                  lambda: of_arrow(newest.scan(snapshot_id=snapshot.snapshot_id).to_arrow()),
                  case.versions.get(version, "a retained version"))
    _report([deltalake, pyiceberg, polars])


@pytest.mark.parametrize("release", sorted(DUCKDB))
def test_duckdb_reads_every_retained_version(cases: list[Case], release: str) -> None:
    """Reads that come back wrong are read again with DuckDB's file cache off (what one
    excuse needs to know: tests/mirror_matrix.py)."""
    queries: dict[str, str] = {}
    expected: dict[str, tuple[Case, int, Any]] = {}
    for case in cases:
        latest = max(case.versions)
        for version, rows in case.versions.items():
            key = f"{case.seed}/{version}/iceberg"
            queries[key] = f"SELECT * FROM iceberg_scan('{metadata_file(case, version)}')"
            expected[key] = (case, version, rows)
        for source, scan in (("iceberg hint", f"iceberg_scan('{case.uri}')"), ("delta", f"delta_scan('{case.uri}')")):
            key = f"{case.seed}/{latest}/{source}"
            queries[key] = f"SELECT * FROM {scan}"
            expected[key] = (case, latest, case.versions[latest])
            nulls = null_counts(case.versions[latest], case.columns)
            for name in case.columns:
                key = f"{case.seed}/{latest}/{source.split()[0]} IS NULL {name}"
                queries[key] = f"SELECT count(*) FROM {scan} WHERE {quoted(name)} IS NULL"
                expected[key] = (case, latest, [[str(nulls[name])]])
    found = read_duckdb(release, queries)
    outcome = Outcome(f"duckdb {release}")
    wrong = {key: sql for key, sql in queries.items() if found[key] != expected[key][2]}
    again = read_duckdb(release, wrong, [NO_FILE_CACHE]) if wrong else {}
    for key, rows in again.items():
        case, version, _ = expected[key]
        if rows == expected[key][2]:
            case.exact_without_file_cache.add((outcome.reader, version, key.split("/", 2)[2]))
    for key, (case, version, rows) in expected.items():
        outcome.check(case, version, key.split("/", 2)[2], found[key], rows)
    _report([outcome])


def test_spark_reads_every_sampled_version(cases: list[Case]) -> None:
    """Spark with delta-spark and with iceberg-spark-runtime: the first case's newest version
    and older ones drawn from every case (tests/mirror_matrix.py ``spark_sample``; a Delta
    read replays the log in Spark jobs: seconds each, half a minute for the first)."""
    queries: dict[str, dict[str, Any]] = {}
    expected: dict[str, tuple[Case, int, Any]] = {}
    for case, version in spark_sample(cases, random.Random(31)):
        reads = {"delta versionAsOf": {"format": "delta", "path": case.uri, "options": {"versionAsOf": version}},
                 "delta timestampAsOf": {"format": "delta", "path": case.uri,
                                         "options": {"timestampAsOf": case.timestamps[version]}},
                 "iceberg metadata file": {"format": "iceberg", "path": metadata_file(case, version)}}
        for label, query in reads.items():
            queries[f"{case.seed}/{version}/{label}"] = query
            expected[f"{case.seed}/{version}/{label}"] = (case, version, case.versions[version])
    env = installed("pyspark-4.1.4", PYSPARK_4_1)
    request = {"ivy": str(ROOT / "ivy"), "packages": SPARK_PACKAGES, "queries": queries}
    found = json.loads(run_reader("spark_mirror_reader.py", env, json.dumps(request), timeout=900))
    print(f"\nSpark {found.pop('spark')}: session in {found.pop('started')} s, all reads in {found.pop('seconds')} s")
    delta, iceberg = Outcome("spark delta-spark"), Outcome("spark iceberg-spark-runtime")
    for key, (case, version, rows) in expected.items():
        label = key.split("/", 2)[2]
        (delta if label.startswith("delta") else iceberg).check(case, version, label, found[key], rows)
    _report([delta, iceberg])

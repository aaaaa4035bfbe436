"""Spark's own Parquet path on gs:// (fake-gcs-server, through Google's gcs-connector) and az://
(Azurite, through hadoop-azure's ABFS over the Blob API): ``read``, ``write``, ``delete`` and
``compact`` run natively, with the table's storage options passed as the connectors'
settings, and give the Python API's rows. The connectors come from Maven Central through the
test set-up (tests/maven_jars.py, cached); without them these tests skip."""

from __future__ import annotations

import logging
from datetime import timedelta

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.spark import compact, delete, native_location, read, write
from manifest_table.spark.options import TableLocation
from tests.conftest import store_location
from tests.spark import fixtures
from tests.spark.fixtures import sorted_rows

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(start: int, stop: int) -> pa.Table:
    return pa.table({"id": list(range(start, stop)), "name": [f"n{i}" for i in range(start, stop)]}, schema=SCHEMA)


@pytest.mark.parametrize("kind, scheme", [("gcs", "gs://"), ("azure", "abfs://")])
def test_native_read_write_delete_and_compact_on_cloud_storage(spark, kind: str, scheme: str,
                                                               request: pytest.FixtureRequest,
                                                               caplog: pytest.LogCaptureFixture):
    if fixtures.CLOUD_JARS_MISSING:
        pytest.skip(fixtures.CLOUD_JARS_MISSING)
    uri, options = store_location(kind, request)
    table = mt.create_table(uri, SCHEMA, storage_options=options)
    table.append(rows(0, 20))
    table.delete("id IN (3, 4)")
    native_location._reported.clear()
    with caplog.at_level(logging.WARNING, logger="manifest_table.spark"):
        df = read(spark, uri, storage_options=options)
        assert scheme in df._jdf.queryExecution().executedPlan().toString()  # Spark's own FileScan
        assert sorted_rows(df) == sorted_rows(table.to_arrow())
        info = write(spark.range(20, 30).selectExpr("id", "concat('n', id) AS name"), uri, storage_options=options)
        assert info is not None and info.metrics["rows_added"] == 10  # None: through the data source
        assert delete(spark, uri, "id >= 25 OR id = 0", storage_options=options).metrics["rows_deleted"] == 6
        assert compact(spark, uri, min_deleted_fraction=0.05, storage_options=options).metrics["files_added"] == 1
    assert "Python data source" not in caplog.text
    table = mt.open_table(uri, storage_options=options)
    table.append(rows(40, 41))  # the Python API writes on after Spark's connector made its folders
    table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    expected = [i for i in range(25) if i not in (0, 3, 4)] + [40]
    assert sorted(table.to_arrow().column("id").to_pylist()) == expected
    assert sorted(r.id for r in read(spark, uri, storage_options=options).select("id").collect()) == expected


@pytest.mark.parametrize("uri, options, root, settings", [
    ("gs://b/t", {"endpoint_url": "http://127.0.0.1:4443"}, "gs://b/t",
     {"fs.gs.storage.root.url": "http://127.0.0.1:4443/", "fs.gs.auth.type": "UNAUTHENTICATED"}),
    ("az://c/p/t", {"account_name": "acct", "account_key": "a2V5"}, "abfss://c@acct.dfs.core.windows.net/p/t",
     {"fs.azure.account.auth.type": "SharedKey", "fs.azure.account.key.acct.dfs.core.windows.net": "a2V5"}),
    ("az://c/t", {"connection_string": "AccountName=devstoreaccount1;AccountKey=a2V5;"
                  "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1"},
     "abfs://c@devstoreaccount1.dfs.core.windows.net/t",
     {"fs.azure.abfs.endpoint": "127.0.0.1:10000", "fs.azure.fns.account.service.type": "BLOB",
      "fs.azure.always.use.https": "false"}),
])
def test_storage_options_become_the_connectors_settings(uri: str, options: dict, root: str, settings: dict):
    location = TableLocation(uri, options)
    assert native_location.hadoop_root(location) == root
    assert settings.items() <= native_location.hadoop_options(location).items()

"""manifest_table.spark.upsert equals the Python upsert (rows and metrics) and commits once;
a source with a key twice commits nothing. Few and small: each Spark job costs seconds."""

from __future__ import annotations

import importlib
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import DuplicateKeyError, NotSupportedError
from tests.spark.fixtures import sorted_rows

pytest_plugins = ["tests.spark.fixtures"]

from manifest_table.spark import upsert  # noqa: E402 - after spark_fixtures' importorskip

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())])


def rows(ids, v, name="a") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [name if i % 3 else None for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


def twin_tables(tmp_path: Path) -> tuple[mt.Table, mt.Table]:
    tables = []
    for name in ("spark", "python"):
        table = mt.create_table(tmp_path / name, SCHEMA)
        table.append(rows(range(0, 40), 0.0))
        table.append(rows(range(40, 80), 0.0))
        table.delete("id = 5")
        tables.append(table)
    return tables[0], tables[1]


@pytest.mark.parametrize("when_matched, when_not_matched, by_source, in_limit", [
    ("update", "insert", "ignore", 1024), ("ignore", "insert", "ignore", 1024), ("update", "insert", "ignore", 2),
    ("delete", "insert", "delete", 1024)],
    ids=["update-insert", "ignore-insert", "key-range-filter", "delete-matched-and-missing"])
def test_spark_upsert_equals_the_python_upsert(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               when_matched, when_not_matched, by_source, in_limit):
    # Past IN_LIMIT distinct keys the filter is their range (the package's name `upsert` is the function).
    monkeypatch.setattr(importlib.import_module("manifest_table.spark.upsert"), "IN_LIMIT", in_limit)
    ours, reference = twin_tables(tmp_path)
    source = pa.concat_tables([rows([3, 5, 45, 200, 201], 1.5, "new"),
                               pa.table({"id": [None], "name": ["null key"], "v": [2.0]}, schema=SCHEMA)])
    options = {"when_matched": when_matched, "when_not_matched": when_not_matched,
               "when_not_matched_by_source": by_source}
    info = upsert(spark, ours.uri, spark.createDataFrame(source).repartition(2), ["id"], **options)
    expected = reference.upsert(source, ["id"], **options)
    assert info.operation == "upsert" and info.version == expected.version == 4
    for metric in ("rows_updated", "rows_inserted", "rows_deleted", "rows_removed"):
        assert info.metrics.get(metric) == expected.metrics.get(metric), metric
    key = lambda r: (r["id"] is None, r["id"] or 0)  # noqa: E731
    assert sorted(ours.to_arrow().to_pylist(), key=key) == sorted(reference.to_arrow().to_pylist(), key=key)


def test_spark_upsert_with_a_duplicate_key_commits_nothing(spark, tmp_path: Path):
    table, _ = twin_tables(tmp_path)
    data = {o.key for o in table.store.list("data/")}
    source = spark.createDataFrame(rows([7, 7, 300], 1.0))
    with pytest.raises(DuplicateKeyError, match="more than once"):
        upsert(spark, table.uri, source, ["id"])
    assert table.version == 3 and {o.key for o in table.store.list("data/")} == data
    assert sorted_rows(table.to_arrow())[0]["v"] == 0.0


def test_spark_upsert_inserts_in_the_tables_column_order_whatever_the_key(spark, tmp_path: Path):
    """A join on keys puts them first: an insert-only upsert keyed on columns that do not lead
    the schema wrote its file in that order and was refused ("the table's files have ['id',
    'name', 'v']"); docs/spark.md's example found it."""
    ours, reference = twin_tables(tmp_path)
    source = rows([3, 4, 200], 1.5, "new")
    info = upsert(spark, ours.uri, spark.createDataFrame(source), ["name", "id"], when_matched="ignore")
    expected = reference.upsert(source, ["name", "id"], when_matched="ignore")
    assert info.metrics.get("rows_inserted") == expected.metrics.get("rows_inserted") == 3
    assert sorted_rows(ours.to_arrow()) == sorted_rows(reference.to_arrow())


def test_spark_upsert_refuses_a_partial_update_before_reading(spark, tmp_path: Path):
    table, _ = twin_tables(tmp_path)
    with pytest.raises(NotSupportedError, match="does not support columns="):
        upsert(spark, table.uri, spark.createDataFrame(rows([1], 1.0)), ["id"], columns=["v"])
    assert table.version == 3

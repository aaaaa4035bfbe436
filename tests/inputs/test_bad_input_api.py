"""Bad-input catalog: mistakes in the arguments of the public API (Table, Transaction,
create_table / open_table and their options, data passed to writes). Each case raises a
typed error naming what is wrong and leaves every byte of the table as it was."""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyroaring import BitMap

import manifest_table as mt
from manifest_table.errors import (
    DuplicateKeyError,
    InvalidArgumentError,
    InvalidFilterError,
    ManifestTableError,
    SchemaMismatchError,
    StoreError,
    TableExistsError,
)
from manifest_table.format.manifest import DataFile
from manifest_table.storage import LocalStore, MemoryStore
from tests.catalog import assert_rejected

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", "UTC")),
        ("tags", pa.list_(pa.int32())),
    ]
)


def _rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "d": [Decimal(i) / 4 for i in ids],
            "day": [date(2024, 1, 1 + i % 28) for i in ids],
            "ts": [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=i) for i in ids],
            "tags": [[i] for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture(params=["local", "memory"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> mt.Table:
    store = LocalStore(tmp_path / "t") if request.param == "local" else MemoryStore()
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, store=store)
    t.append(_rows(0, 50))
    t.append(_rows(50, 100))
    t.delete("id < 5")
    return t


def _in_tx(t: mt.Table, operation: Callable[[mt.Transaction], Any]) -> None:
    with t.transaction() as tx:
        operation(tx)


def _first_file(t: mt.Table) -> str:
    return t.manifest().files[0].path


def _failing_stream(t: mt.Table) -> pa.RecordBatchReader:
    """Two good batches, then one that breaks the table's schema (a null id)."""
    nullable = pa.schema([f.with_nullable(True) for f in SCHEMA])

    def batches():
        yield from _rows(200, 210).cast(nullable).to_batches()
        yield from _rows(210, 220).cast(nullable).to_batches()
        bad = _rows(220, 230).cast(nullable).set_column(0, pa.field("id", pa.int64()), pa.nulls(10, pa.int64()))
        yield from bad.to_batches()

    return pa.RecordBatchReader.from_batches(nullable, batches())


def _small_files(t: mt.Table) -> mt.Table:
    """A handle that writes one file per row group, so a failing stream has written several."""
    return mt.open_table(t.uri, store=t.store, target_file_size=1, row_group_size=64)


def _frame(**columns: Any) -> pd.DataFrame:
    """Two rows of the table as pandas would hold them, with ``columns`` replaced."""
    frame = _rows(0, 2).to_pandas()
    for name, values in columns.items():
        frame[name] = values
    return frame


def _arrow(**columns: Any) -> pa.Table:
    """Two rows of the table, with ``columns`` replaced by other Arrow arrays."""
    data = _rows(0, 2)
    for name, values in columns.items():
        data = data.set_column(data.schema.get_field_index(name), name, pa.array(values))
    return data


Case = tuple[str, type[ManifestTableError], Callable[[mt.Table], Any], str]

CASES: list[Case] = [
    # --- garbage collection arguments ---------------------------------------------------
    (
        "gc-retain-for-list",
        InvalidArgumentError,
        lambda t: t.gc(retain_for=[3600]),
        "retain_for must be a datetime.timedelta",
    ),
    (
        "gc-retain-for-bool",
        InvalidArgumentError,
        lambda t: t.gc(retain_for=True),
        "retain_for must be a datetime.timedelta",
    ),
    ("gc-retain-for-seconds-below-grace", InvalidArgumentError, lambda t: t.gc(retain_for=3600), "shorter than grace"),
    ("gc-grace-nan", InvalidArgumentError, lambda t: t.gc(grace=float("nan")), "grace must be a finite number"),
    ("gc-grace-negative-seconds", InvalidArgumentError, lambda t: t.gc(grace=-1), "grace cannot be negative"),
    ("gc-grace-str", InvalidArgumentError, lambda t: t.gc(grace="one day"), "not a duration: 'one day'"),
    ("gc-retain-for-huge", InvalidArgumentError, lambda t: t.gc(retain_for=1e300), "retain_for is too long"),
    ("gc-grace-huge-text", InvalidArgumentError, lambda t: t.gc(grace="9" * 20 + "d"), "is too long"),
    ("property-gc-grace-huge", InvalidArgumentError, lambda t: t.set_properties({"gc_grace": 1e300}), "too long"),
    (
        "gc-retain-versions-str",
        InvalidArgumentError,
        lambda t: t.gc(retain_versions="3"),
        "retain_versions must be an integer",
    ),
    (
        "gc-retain-versions-zero",
        InvalidArgumentError,
        lambda t: t.gc(retain_versions=0),
        "retain_versions must be at least 1",
    ),
    (
        "gc-retain-for-negative",
        InvalidArgumentError,
        lambda t: t.gc(retain_for=timedelta(days=-1)),
        "retain_for cannot be negative",
    ),
    ("gc-dry-run-str", InvalidArgumentError, lambda t: t.gc(dry_run="no"), "dry_run must be True or False"),
    ("gc-force-int", InvalidArgumentError, lambda t: t.gc(force=1), "force must be True or False"),
    (
        "gc-retention-below-grace",
        InvalidArgumentError,
        lambda t: t.gc(retain_for=timedelta(hours=1)),
        "shorter than grace",
    ),
    # --- compaction arguments -----------------------------------------------------------
    (
        "compact-size-str",
        InvalidArgumentError,
        lambda t: t.compact(target_file_size="big"),
        "not a positive size: 'big'",
    ),
    (
        "compact-size-zero",
        InvalidArgumentError,
        lambda t: t.compact(target_file_size=0),
        "target_file_size must be at least 1",
    ),
    (
        "compact-size-bool",
        InvalidArgumentError,
        lambda t: t.compact(target_file_size=True),
        "target_file_size must be an integer",
    ),
    (
        "compact-fraction-str",
        InvalidArgumentError,
        lambda t: t.compact(min_deleted_fraction="0.2"),
        "min_deleted_fraction must be a finite number",
    ),
    (
        "compact-fraction-above-one",
        InvalidArgumentError,
        lambda t: t.compact(min_deleted_fraction=1.5),
        r"min_deleted_fraction must be in \[0, 1\] \(0: any deleted row\)",
    ),
    (
        "compact-fraction-nan",
        InvalidArgumentError,
        lambda t: t.compact(min_deleted_fraction=float("nan")),
        "min_deleted_fraction must be a finite number",
    ),
    # --- reads ----------------------------------------------------------------------------
    (
        "scan-columns-str",
        InvalidArgumentError,
        lambda t: t.scan(columns="id"),
        r"columns must be a list of column names, not 'id'.*\['id'\]",
    ),
    (
        "scan-columns-repeated",
        InvalidArgumentError,
        lambda t: t.scan(columns=["id", "id"]),
        r"columns are repeated: \['id'\]",
    ),
    ("scan-columns-set", InvalidArgumentError, lambda t: t.scan(columns={"id", "name"}), "columns must be a list"),
    ("scan-columns-not-names", InvalidArgumentError, lambda t: t.scan(columns=[0]), "column names must be strings"),
    ("scan-columns-unknown", InvalidArgumentError, lambda t: t.scan(columns=["nope"]), r"unknown columns \['nope'\]"),
    ("scan-version-str", InvalidArgumentError, lambda t: t.scan(version="3"), "version must be an integer, not '3'"),
    ("scan-version-float", InvalidArgumentError, lambda t: t.scan(version=1.0), "version must be an integer"),
    ("scan-version-negative", InvalidArgumentError, lambda t: t.scan(version=-1), "version must be at least 0"),
    (
        "scan-as-of-date",
        InvalidArgumentError,
        lambda t: t.scan(as_of=date(2024, 1, 1)),
        "as_of must be a datetime, not a date",
    ),
    ("scan-as-of-garbage", InvalidArgumentError, lambda t: t.scan(as_of="yesterday"), "as_of is not an ISO 8601 time"),
    (
        "scan-as-of-number",
        InvalidArgumentError,
        lambda t: t.scan(as_of=1700000000),
        "as_of must be a datetime or an ISO 8601 string",
    ),
    (
        "changes-start-as-of-garbage",
        InvalidArgumentError,
        lambda t: t.changes(start_as_of="yesterday"),
        "start_as_of is not an ISO 8601 time",
    ),
    (
        "changes-end-as-of-date",
        InvalidArgumentError,
        lambda t: t.changes(0, end_as_of=date(2024, 1, 1)),
        "end_as_of must be a datetime, not a date",
    ),
    ("scan-version-and-as-of", InvalidArgumentError, lambda t: t.scan(version=1, as_of=datetime.now(UTC)), "not both"),
    ("scan-where-number", InvalidFilterError, lambda t: t.scan(where=5), "a filter must be a string or an Expr"),
    (
        "tx-scan-columns-str",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.scan(columns="name")),
        "columns must be a list",
    ),
    ("manifest-version-str", InvalidArgumentError, lambda t: t.manifest("0"), "version must be an integer"),
    ("history-limit-str", InvalidArgumentError, lambda t: t.history("3"), "limit must be an integer"),
    ("history-limit-negative", InvalidArgumentError, lambda t: t.history(-1), "limit must be at least 0"),
    # --- data passed to append --------------------------------------------------------------
    (
        "dicts-fraction-into-int",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1.5}]),
        r"column 'id' has type int64 but row 0 holds 1.5",
    ),
    (
        "dicts-bool-into-int",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1}, {"id": True}]),
        r"column 'id' .* row 1 holds True",
    ),
    ("dicts-str-into-int", SchemaMismatchError, lambda t: t.append([{"id": "7"}]), r"column 'id' .* holds '7'"),
    (
        "dicts-int-into-str",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "name": 5}]),
        r"column 'name' .* holds 5",
    ),
    (
        "dicts-datetime-into-date",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "day": datetime(2024, 1, 1, 12)}]),
        r"column 'day'",
    ),
    (
        "dicts-date-into-timestamp",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "ts": date(2024, 1, 1)}]),
        r"column 'ts'",
    ),
    (
        "dicts-fraction-in-list",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "tags": [1, 2.5]}]),
        r"column 'tags' .* holds 2.5",
    ),
    (
        "dicts-decimal-too-precise",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "d": Decimal("1.234")}]),
        r"column 'd'",
    ),
    ("dicts-int-out-of-range", SchemaMismatchError, lambda t: t.append([{"id": 2**64}]), r"column 'id'"),
    (
        "dicts-unknown-column",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "nope": 2}]),
        r"unknown columns \['nope'\]",
    ),
    ("dicts-non-str-key", SchemaMismatchError, lambda t: t.append([{"id": 1, 3: 2}]), r"unknown columns \[3\]"),
    (
        "dicts-lone-surrogate",
        SchemaMismatchError,
        lambda t: t.append([{"id": 1, "name": "a\ud800"}]),
        r"column 'name' holds a string that is not valid Unicode: 'a\\ud800'",
    ),
    (
        "pandas-lone-surrogate",
        SchemaMismatchError,
        lambda t: t.append(_frame(name=pd.Series(["a", "\udcff"], dtype=object))),
        "the DataFrame holds a string that is not valid Unicode",
    ),
    (
        "upsert-lone-surrogate",
        SchemaMismatchError,
        lambda t: t.upsert([{"id": 7, "name": "\ud800"}], ["id"]),
        "not valid Unicode",
    ),
    ("list-of-non-dicts", SchemaMismatchError, lambda t: t.append([1, 2]), "must hold dicts"),
    (
        "list-of-non-dicts-merged",
        SchemaMismatchError,
        lambda t: t.append([{"id": 7}, 2], schema_mode="merge"),
        "must hold dicts",
    ),
    ("upsert-list-of-non-dicts", SchemaMismatchError, lambda t: t.upsert([{"id": 7}, 2], ["id"]), "must hold dicts"),
    (
        "arrow-duplicate-columns",
        SchemaMismatchError,
        lambda t: t.append(pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"])),
        "duplicate column names",
    ),
    (
        "reader-of-another-schema-without-batches",
        SchemaMismatchError,
        lambda t: t.append(pa.RecordBatchReader.from_batches(pa.schema([("ident", pa.int64())]), [])),
        r"unknown columns \['ident'\]",
    ),
    ("dicts-null-in-required", SchemaMismatchError, lambda t: t.append([{"name": "x"}]), "'id' is not nullable"),
    ("append-str", SchemaMismatchError, lambda t: t.append("id=1"), "cannot write a str"),
    (
        "pandas-duplicate-columns",
        SchemaMismatchError,
        lambda t: t.append(pd.DataFrame([[1, 2]], columns=["id", "id"])),
        r"duplicate column names \['id'\]",
    ),
    (
        "pandas-fraction-into-int",
        SchemaMismatchError,
        lambda t: t.append(_frame(id=[1.0, 1.5])),
        r"column 'id'.*whole numbers",
    ),
    (
        "pandas-nan-into-required-int",
        SchemaMismatchError,
        lambda t: t.append(_frame(id=[1.0, np.nan])),
        "'id' is not nullable",
    ),
    (
        "arrow-float-into-int",
        SchemaMismatchError,
        lambda t: t.append(_arrow(id=[1.0, 2.0])),
        "column 'id' has type double",
    ),
    (
        "stream-fails-midway",
        SchemaMismatchError,
        lambda t: _small_files(t).append(_failing_stream(t)),
        "'id' is not nullable",
    ),
    ("overwrite-bad-data", SchemaMismatchError, lambda t: t.overwrite([{"id": 0.5}], where="id < 10"), "column 'id'"),
    ("overwrite-all-bad-data", SchemaMismatchError, lambda t: t.overwrite(pa.table({"x": [1]})), "unknown columns"),
    # --- issue 30 -----------------------------------------------------------------------------
    (
        "overwrite-rows-outside-where",
        InvalidArgumentError,
        lambda t: t.overwrite(_rows(300, 303), where="id < 10"),
        r"^3 of the 3 new rows do not satisfy the overwrite's condition id < 10 \(e.g. the row with id = 300\)",
    ),
    (
        "overwrite-null-outside-where",
        InvalidArgumentError,
        lambda t: t.overwrite(_rows(5, 7).set_column(2, "d", pa.nulls(2, pa.decimal128(10, 2))), where="d < 100"),
        r"2 of the 2 new rows do not satisfy .*d = NULL",
    ),
    (
        "tx-overwrite-rows-outside-where",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: (tx.append(_rows(300, 310)), tx.overwrite(_rows(400, 401), "id < 50"))),
        "1 of the 1 new row does not satisfy",
    ),
    (
        "overwrite-require-match-str",
        InvalidArgumentError,
        lambda t: t.overwrite(_rows(300, 301), where="id < 10", require_match="no"),
        "require_match must be True or False",
    ),
    (
        "schema-mode-bogus",
        InvalidArgumentError,
        lambda t: t.append(_rows(300, 302), schema_mode="bogus"),
        "schema_mode must be None or 'merge', not 'bogus'",
    ),
    (
        "upsert-schema-mode-bogus",
        InvalidArgumentError,
        lambda t: t.upsert(_rows(0, 2), ["id"], schema_mode="add"),
        "schema_mode must be None or 'merge'",
    ),
    (
        "merge-lone-surrogate",
        SchemaMismatchError,
        lambda t: t.append([{"id": 300, "note": "a\ud800"}], schema_mode="merge"),
        r"column 'note' .*lone surrogate",
    ),
    (
        "merge-int-beyond-int64",
        SchemaMismatchError,
        lambda t: t.append([{"id": 300, "big": 2**64}], schema_mode="merge"),
        "column 'big' holds the integer 18446744073709551616, beyond int64",
    ),
    (
        "upsert-keys-only-surrogate",
        SchemaMismatchError,
        lambda t: t.upsert([{"id": 7, "note": "\udfff"}], ["id"], when_matched="delete", when_not_matched="ignore"),
        "lone surrogate",
    ),
    (
        "upsert-keys-only-int-beyond-int64",
        SchemaMismatchError,
        lambda t: t.upsert([{"id": 2**63}], ["id"], when_matched="delete", when_not_matched="ignore"),
        "beyond int64",
    ),
    (
        "update-values-nan-into-decimal",
        InvalidArgumentError,
        lambda t: t.update(values={"d": float("nan")}),
        r"update cannot store values\['d'\] = nan",
    ),
    (
        "update-values-str-into-int",
        InvalidArgumentError,
        lambda t: t.update(values={"id": "7"}),
        r"update cannot store values\['id'\] = '7'",
    ),
    # --- deletes and transactions -----------------------------------------------------------
    ("delete-without-where", InvalidFilterError, lambda t: t.delete(None), "delete needs a condition"),
    ("delete-where-number", InvalidFilterError, lambda t: t.delete(5), "a filter must be a string"),
    (
        "tx-positions-past-end",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.delete_positions({_first_file(t): BitMap([3, 1000])})),
        r"positions \[1000\] are past the end",
    ),
    (
        "tx-positions-list",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.delete_positions([_first_file(t)])),
        "positions must be a dict",
    ),
    (
        "tx-positions-set",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.delete_positions({_first_file(t): {1, 2}})),
        "must be a pyroaring BitMap",
    ),
    (
        "tx-add-files-not-a-list",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.add_files(None)),
        "files must be a list of DataFile",
    ),
    (
        "tx-add-files-of-paths",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.add_files([_first_file(t)])),
        "takes DataFile objects, not str",
    ),
    (
        "tx-add-files-negative-rows",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.add_files([DataFile("data/x.parquet", -900, 10)])),
        r"data/x.parquet has rows=-900",
    ),
    (
        "tx-add-files-with-deletes",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.add_files([t.manifest().files[0]])),
        "has deletes; a new data file has none",
    ),
    (
        "tx-overwrite-fails-after-append",
        SchemaMismatchError,
        lambda t: _in_tx(t, lambda tx: (tx.append(_rows(300, 310)), tx.overwrite([{"id": "x"}], "id < 50"))),
        "column 'id'",
    ),
    (
        "tx-app-id-empty",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.set_app_transaction("", 1)),
        "app_id must be a non-empty string",
    ),
    (
        "tx-app-id-surrogate",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.set_app_transaction("app\ud800", 1)),
        "app_id is not valid Unicode",
    ),
    (
        "add-column-surrogate",
        InvalidArgumentError,
        lambda t: t.update_schema().add_column("c\ud800", pa.int64()),
        "a column name is not valid Unicode",
    ),
    (
        "storage-option-surrogate",
        InvalidArgumentError,
        lambda t: mt.open_table("s3://bucket/t", storage_options={"region": "\ud800"}),
        "storage option 'region' is not valid Unicode",
    ),
    (
        "tx-batch-id-str",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.set_app_transaction("app", "1")),
        "batch_id must be an integer",
    ),
    (
        "tx-batch-id-negative",
        InvalidArgumentError,
        lambda t: _in_tx(t, lambda tx: tx.set_app_transaction("app", -1)),
        "batch_id must be at least 0",
    ),
    # --- table options ---------------------------------------------------------------------
    (
        "option-compression",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, compression="bogus"),
        "compression must be one of",
    ),
    (
        "option-compression-type",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, compression=3),
        "compression must be one of",
    ),
    (
        "option-target-size-str",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, target_file_size="huge"),
        "not a positive size: 'huge'",
    ),
    (
        "option-row-group-zero",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, row_group_size=0),
        "row_group_size must be at least 1",
    ),
    (
        "option-max-attempts-zero",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, max_attempts=0),
        "max_attempts must be at least 1",
    ),
    (
        "option-backoff-negative",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, backoff_base=-1),
        "backoff_base must be at least 0",
    ),
    (
        "option-recheck-str",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, recheck_after="later"),
        "not a duration: 'later'",
    ),
    (
        "option-deadline-str",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, deadline="5").append(_rows(300, 310)),
        "not a duration: '5'",
    ),
    (
        "option-deadline-nan",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, deadline=float("nan")).append(_rows(300, 310)),
        "deadline must be a finite number, not nan",
    ),
    (
        "option-deadline-inf",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, deadline=float("inf")),
        "deadline must be a finite number",
    ),
    (
        "option-deadline-zero",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, deadline=0),
        "deadline must be above 0",
    ),
    (
        "option-backoff-cap-inf",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, backoff_cap=float("inf")),
        "backoff_cap must be a finite number",
    ),
    (
        "option-recheck-nan",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, recheck_after=float("nan")),
        "recheck_after must be a finite number",
    ),
    (
        "option-unknown",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, compresion="zstd"),
        r"unknown table options \['compresion'\]",
    ),
    (
        "open-store-wrong-type",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store="memory"),
        "store must be an ObjectStore",
    ),
    (
        "open-uri-wrong-type",
        InvalidArgumentError,
        lambda t: mt.open_table(42, store=t.store),
        "the table location must be a string or a path",
    ),
    (
        "open-storage-options-type",
        InvalidArgumentError,
        lambda t: mt.open_table(t.uri, store=t.store, storage_options={"region": 1}),
        "storage_options must be a dict of strings",
    ),
    (
        "create-over-existing",
        TableExistsError,
        lambda t: mt.create_table(t.uri, SCHEMA, store=t.store),
        "a table already exists",
    ),
    # --- update and upsert ---------------------------------------------------------------
    ("update-set-not-dict", InvalidArgumentError, lambda t: t.update(["name"]), "set must be a dict"),
    ("update-unknown-column", InvalidArgumentError, lambda t: t.update({"nope": 1}), "unknown columns"),
    ("update-string-arithmetic", InvalidFilterError, lambda t: t.update({"name": "name + 1"}), "cannot apply"),
    ("update-bad-term-syntax", InvalidFilterError, lambda t: t.update({"id": "id +"}), "expected a column name"),
    (
        "update-null-into-not-null",
        SchemaMismatchError,
        lambda t: t.update({"id": None}, where="id = 7"),
        "not nullable",
    ),
    ("update-fraction-into-integer", InvalidArgumentError, lambda t: t.update({"id": "id / 2"}), "cannot store"),
    ("update-divide-by-zero", InvalidArgumentError, lambda t: t.update({"d": "d / 0"}), "(?i)divide by zero"),
    ("update-number-into-string", InvalidArgumentError, lambda t: t.update({"name": 5}), "cannot store"),
    (
        "upsert-duplicate-key",
        DuplicateKeyError,
        lambda t: t.upsert(pa.concat_tables([_rows(7, 8), _rows(7, 8)]), ["id"]),
        "more than once",
    ),
    ("upsert-no-keys", InvalidArgumentError, lambda t: t.upsert(_rows(0, 2), []), "at least one key"),
    ("upsert-key-string", InvalidArgumentError, lambda t: t.upsert(_rows(0, 2), "id"), "list of column names"),
    ("upsert-key-list-type", InvalidArgumentError, lambda t: t.upsert(_rows(0, 2), ["tags"]), "keys must be"),
    (
        "upsert-when-matched",
        InvalidArgumentError,
        lambda t: t.upsert(_rows(0, 2), ["id"], when_matched="remove"),
        "when_matched must be one of",
    ),
    ("upsert-wrong-schema", SchemaMismatchError, lambda t: t.upsert(pa.table({"id": [1]}), ["id"]), "missing columns"),
    (
        "tx-upsert-duplicate-key",
        DuplicateKeyError,
        lambda t: _in_tx(t, lambda tx: tx.upsert(pa.concat_tables([_rows(7, 8), _rows(7, 8)]), ["id"])),
        "more than once",
    ),
]


@pytest.mark.parametrize("name, error, call, match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_and_changes_nothing(
    table: mt.Table, name: str, error: type[ManifestTableError], call: Callable[[mt.Table], Any], match: str
) -> None:
    assert_rejected(table.store, error, lambda: call(table), match=match)
    assert table.scan().count() == 95  # still opens and scans


BAD_SCHEMAS = [
    ("float16", pa.schema([("h", pa.float16())]), "column 'h' has type halffloat"),
    (
        "interval",
        pa.schema([("i", pa.month_day_nano_interval())]),
        "column 'i' has type month_day_nano_interval, which tables do not support: Parquet cannot store intervals",
    ),
    ("empty-struct", pa.schema([("s", pa.struct([]))]), r"column 's' has type struct<>, which Parquet cannot store"),
    ("duplicate-names", pa.schema([("a", pa.int8()), ("a", pa.int8())]), "unique and non-empty"),
    ("empty-name", pa.schema([("", pa.int8())]), "unique and non-empty"),
]


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("name, schema, match", BAD_SCHEMAS, ids=[c[0] for c in BAD_SCHEMAS])
def test_create_table_refuses_unstorable_schemas(
    tmp_path: Path, kind: str, name: str, schema: pa.Schema, match: str
) -> None:
    store = LocalStore(tmp_path / "new") if kind == "local" else MemoryStore()
    assert_rejected(
        store, InvalidArgumentError, lambda: mt.create_table(str(tmp_path / "new"), schema, store=store), match=match
    )
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "location, match",
    [
        ("", "is empty"),
        (" ", "is blank"),
        ("\t\n", "is blank"),
        (" /data/t", "starts or ends with blanks"),
        ("t ", "starts or ends with blanks"),
        ("a\0b", "NUL character"),
        ("t\ud800", "lone surrogate"),
    ],
)
def test_a_location_that_means_no_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str, match: str
) -> None:
    """The empty path is the current directory: ``create_table("")`` made a table wherever
    the process ran. Refused wherever a location enters, with or without a store."""
    from manifest_table.maintenance.job import find_tables
    from manifest_table.storage import store_for_uri

    monkeypatch.chdir(tmp_path)
    for call in (
        lambda: mt.create_table(location, SCHEMA),
        lambda: mt.open_table(location),
        lambda: mt.create_table(location, SCHEMA, store=MemoryStore()),
        lambda: store_for_uri(location),
        lambda: find_tables(location),
    ):
        with pytest.raises(InvalidArgumentError, match=f"the table location .*{match}"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_create_table_rejects_a_schema_that_is_not_one(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "new")
    assert_rejected(
        store,
        InvalidArgumentError,
        lambda: mt.create_table(str(tmp_path / "new"), {"id": "int64"}),
        match="schema must be a pyarrow.Schema",
    )


def test_create_table_over_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"not a table")
    store = LocalStore(path)
    assert_rejected(store, StoreError, lambda: mt.create_table(str(path), SCHEMA), match=f"{path}.*Not a directory")
    assert path.read_bytes() == b"not a table"


def _raise_on(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, code: int, under: str) -> None:
    """Make ``module.name`` fail with ``code`` for paths under ``under`` (an OS error, not our code)."""
    real = getattr(module, name)

    def failing(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else None
        if isinstance(target, int) or str(target).startswith(under):
            raise OSError(code, os.strerror(code), str(target))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)


def test_full_disk_on_a_commit_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows(0, 10))
    _raise_on(monkeypatch, os, "fsync", errno.ENOSPC, str(tmp_path))  # fsync of the temp file
    assert_rejected(t.store, StoreError, lambda: t.delete("id < 3"), match="No space left on device")


def test_full_disk_on_a_transactions_manifest_fails_at_its_first_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a transaction (its objects synced as they are written), a full disk that fails
    only the manifest's temp file fails the commit at once, the table unchanged: nothing was
    linked, so the outcome is known, and every retry would fail the same way (the commit
    loop retried it 200 times, about a minute)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows(0, 10))
    real, refused = builtins.open, []

    def full(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and f"{os.sep}manifest{os.sep}" in str(file):
            refused.append(file)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full)
    with pytest.raises(StoreError, match="No space left on device.*nothing was written"):
        with t.transaction() as tx:
            tx.delete("id < 3")
    monkeypatch.undo()
    assert len(refused) == 1
    after = mt.open_table(str(tmp_path / "t"))
    assert after.version == t.version and after.scan().count() == 10


def test_unreadable_table_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows(0, 10))
    _raise_on(monkeypatch, builtins, "open", errno.EACCES, str(tmp_path / "t" / "_latest_manifest"))
    with pytest.raises(StoreError, match="Permission denied"):
        mt.open_table(str(tmp_path / "t")).version

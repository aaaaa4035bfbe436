"""Mirrors at a realistic size: two million rows in several files, deletes spread over every
file, an update, a compaction and a garbage collection, each version read through pyiceberg
and deltalake (readers no one here wrote) and compared with ``scan()`` by aggregates that
any lost or resurrected row changes; then the table moves, and is read the same there
(docs/mirrors.md)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyiceberg.table import StaticTable

import manifest_table as mt

ROWS = 2_000_000
BATCHES = 4
SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.int32()), ("amount", pa.float64()), ("tag", pa.string())])


def batch(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "grp": (ids % 97).astype(np.int32),
            "amount": (ids % 1000) / 10.0,
            "tag": pa.array(np.char.add("t", (ids % 50).astype(str))),
        },
        schema=SCHEMA,
    )


def summary(table: pa.Table) -> tuple[int, int, float, int]:
    """Row count, sum of ids, sum of amounts (rounded), distinct tags: any row lost, added
    twice or changed moves one of them."""
    if table.num_rows == 0:
        return (0, 0, 0.0, 0)
    return (
        table.num_rows,
        pc.sum(table["id"]).as_py(),
        round(pc.sum(table["amount"]).as_py(), 3),
        pc.count_distinct(table["tag"].cast(pa.string())).as_py(),
    )


def check(t: mt.Table) -> None:
    expected = summary(t.scan(columns=SCHEMA.names).to_arrow())
    iceberg = StaticTable.from_metadata(f"{t.uri}/metadata/v{t.version}.metadata.json").scan().to_arrow()
    delta = pa.table(DeltaTable(t.uri, version=t.version).scan().read_all())
    assert summary(iceberg.select(SCHEMA.names)) == expected, f"iceberg, version {t.version}"
    assert summary(delta.select(SCHEMA.names)) == expected, f"delta, version {t.version}"


def test_two_million_rows_with_deletes_update_compaction_and_gc_read_the_same_through_both_mirrors(
    tmp_path: Path,
) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg", "delta"], target_file_size="8MiB")
    per = ROWS // BATCHES
    for i in range(BATCHES):
        t.append(batch(i * per, per))
    assert t.manifest().totals.files >= BATCHES
    check(t)
    t.delete("id % 10 = 3")  # a deletion vector in every file
    check(t)
    t.delete("grp = 5 OR id < 1000")  # a second vector for every file, replacing the first
    check(t)
    t.update(values={"tag": "changed"}, where="id % 100000 = 7")
    check(t)
    t.compact(min_deleted_fraction=0.1)
    check(t)
    t.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    check(t)
    t.delete("id % 10 = 4")  # vectors again, then the table moves: its Puffin files name the old place
    shutil.move(tmp_path / "t", tmp_path / "moved-elsewhere")
    moved = mt.open_table(str(tmp_path / "moved-elsewhere"))
    moved.append(batch(ROWS, 10))
    check(moved)
    assert moved.scan().count() == 10 + ROWS - sum(
        1 for i in range(ROWS) if i % 10 in (3, 4) or i % 97 == 5 or i < 1000
    )

"""Writes tests/data/table_written_by_0.2.0 (format version 2) and what 0.2.0 reads at each
version into ...expected/v{N}.parquet. Run once, by release 0.2.0; tests/format/test_old_tables.py
then checks that every later release reads the table the same way.

Limits are tiny so that the table holds everything format v2 has: segments, a tail, a
``deletes`` map, merged and rewritten segments, and a compaction's rewrites."""

from __future__ import annotations

import shutil
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import manifest_table as mt

HERE = Path(__file__).parent
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                    ("amount", pa.decimal128(9, 2)), ("ts", pa.timestamp("us", tz="Europe/Berlin"))])


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": ids,
        "name": [None if i % 7 == 0 else f"n{i}" for i in ids],
        "score": [float("nan") if i % 11 == 0 else i / 4 for i in ids],
        "amount": [Decimal(i) / 100 for i in ids],
        "ts": pa.array([1_729_990_800_000_000 + i * 60_000_000 for i in ids], pa.timestamp("us", tz="UTC")),
    }).cast(SCHEMA)


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    t = mt.create_table(str(root), SCHEMA, properties={"tail_limit": 2, "deletes_limit": 2,
                                                        "segment_target_files": 3, "max_small_segments": 2})
    for i in range(3):
        t.append(batch(i * 10, 10))
    t.delete("id = 3 OR id = 14")
    t.compact(target_file_size=10_000_000, min_deleted_fraction=0.05)
    for i in range(3, 10):
        t.append(batch(i * 10, 10))
    t.delete("id = 25 OR id = 36")
    t.delete("id = 47 OR id = 58 OR id = 69")
    t.overwrite(batch(100, 5), where="id >= 70 AND id < 80")
    t.delete("id = 91")
    expected = root.parent / f"{root.name}.expected"
    shutil.rmtree(expected, ignore_errors=True)
    expected.mkdir()
    for version in range(t.version + 1):
        pq.write_table(t.scan(version=version).to_arrow().sort_by("id"), expected / f"v{version}.parquet")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "table_written_by_0.2.0")

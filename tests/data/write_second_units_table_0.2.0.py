"""Writes tests/data/table_with_second_units_by_0.2.0 (format version 2) and the rows of each
of its versions into ...expected/v{N}.arrow (Arrow IPC: exact types). Run once, by the code
of release 0.2.0 (main before issue 24); tests/format/test_old_tables.py checks that later releases
read it.

Its columns are the types 0.2.0 wrote segments of that no other handle could decode:
second-unit timestamps (naive and zoned) and date64, whose segment statistics Parquet gave
back as milliseconds and date32; and time32[s], whose data files read back as time32[ms].
Limits are tiny so the files sit in segments, one of them rewritten by a delete. The
expected rows come from the script's own model: release 0.2.0 could not read them back."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import manifest_table as mt

HERE = Path(__file__).parent
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("s")), ("utc", pa.timestamp("s", "UTC")),
                    ("day", pa.date64()), ("clock", pa.time32("s"))])


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": ids,
        "ts": pa.array([1_729_990_800 + i * 3_601 for i in ids], pa.timestamp("s")),
        "utc": pa.array([None if i % 6 == 0 else 1_729_990_800 - i * 86_399 for i in ids], pa.timestamp("s", "UTC")),
        "day": pa.array([(19_000 + i) * 86_400_000 for i in ids], pa.date64()),
        "clock": pa.array([i * 61 for i in ids], pa.int32()).cast(pa.time32("s")),
    }, schema=SCHEMA)


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    t = mt.create_table(str(root), SCHEMA, properties={"tail_limit": 2, "deletes_limit": 1,
                                                        "segment_target_files": 4, "max_small_segments": 2})
    versions = [SCHEMA.empty_table()]
    for i in range(6):
        t.append(batch(i * 5, 5))
        versions.append(pa.concat_tables([versions[-1], batch(i * 5, 5)]))
    for gone in ((3, 12), (21, 22, 28)):
        t.delete(" OR ".join(f"id = {i}" for i in gone))
        versions.append(versions[-1].filter(pc.invert(pc.is_in(versions[-1].column("id"), pa.array(gone)))))
    assert t.version == len(versions) - 1 and t.manifest().index.segments
    expected = root.parent / f"{root.name}.expected"
    shutil.rmtree(expected, ignore_errors=True)
    expected.mkdir()
    for version, rows in enumerate(versions):
        with pa.ipc.new_file(expected / f"v{version}.arrow", SCHEMA) as sink:
            sink.write_table(rows)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "table_with_second_units_by_0.2.0")

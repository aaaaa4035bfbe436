"""Writes tests/data/table_with_updates_by_0.3.0: a table whose commits hold every kind of write
of release 0.3.0, updates and upserts included, written before commits recorded which new row
replaces which (``parameters.replaced``, 0.4.0). Run once, by release 0.3.0;
tests/format/test_old_tables.py then checks that the change feed reads it, its updates and upserts as
deletes and inserts, each commit's rows the difference of the versions around it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa

import manifest_table as mt

HERE = Path(__file__).parent
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int32())])


def rows(ids: list[int], name: str) -> pa.Table:
    return pa.table({"id": ids, "name": [f"{name}{i}" for i in ids], "qty": [i % 5 for i in ids]}, schema=SCHEMA)


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    t = mt.create_table(str(root), SCHEMA, properties={"tail_limit": 2, "deletes_limit": 2,
                                                        "segment_target_files": 3, "max_small_segments": 2})
    t.append(rows(list(range(10)), "a"))                                   # 1
    t.update({"qty": "qty + 10"}, where="id < 3")                           # 2
    t.upsert(rows([4, 5, 20], "u"), on=["id"])                              # 3
    t.delete("id = 6")                                                      # 4
    with t.transaction() as tx:                                             # 5
        tx.update(values={"name": "twice"}, where="id = 7")
        tx.update(values={"qty": 99}, where="id = 7")
        tx.delete("id = 8")
    t.compact(min_deleted_fraction=0.01)                                    # 6
    t.overwrite(rows([30, 31], "o"), where="id >= 20")                      # 7
    with t.update_schema() as s:                                            # 8
        s.rename_column("name", "label")
    t.update(values={"label": "late"}, where="id = 9")                      # 9


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "table_with_updates_by_0.3.0")

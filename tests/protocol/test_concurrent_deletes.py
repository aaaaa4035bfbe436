"""Deleters on overlapping key ranges racing appenders: no acknowledged delete or append
is lost, and concurrent deletes on one file are unioned into its single bitmap."""

from __future__ import annotations

import multiprocessing

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import CommitConflictError

SCHEMA = pa.schema([("k", pa.int64())])
INITIAL = range(200)
DELETE_RANGES = [range(0, 90, 3), range(30, 150, 2)]  # overlapping, same files
APPEND_RANGES = [range(1000, 1015), range(2000, 2015)]


def _deleter(uri: str, keys: range, queue) -> None:
    table = mt.open_table(uri)
    for i in range(0, len(keys), 3):
        chunk = list(keys[i:i + 3])
        info = table.delete(f"k IN ({', '.join(map(str, chunk))})")
        queue.put(("delete", chunk, info.version))


def _appender(uri: str, keys: range, queue) -> None:
    table = mt.open_table(uri)
    for k in keys:
        info = table.append(pa.table({"k": [k]}, schema=SCHEMA))
        queue.put(("append", [k], info.version))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_concurrent_deletes_and_appends(where, tmp_path, request):
    uri = str(tmp_path / "t") if where == "local" else request.getfixturevalue("s3_uri")
    table = mt.create_table(uri, SCHEMA)
    table.append(pa.table({"k": list(INITIAL)[:100]}, schema=SCHEMA))
    table.append(pa.table({"k": list(INITIAL)[100:]}, schema=SCHEMA))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_deleter, args=(uri, r, queue)) for r in DELETE_RANGES]
    procs += [ctx.Process(target=_appender, args=(uri, r, queue)) for r in APPEND_RANGES]
    for p in procs:
        p.start()
    expected_acks = sum((len(r) + 2) // 3 for r in DELETE_RANGES) + sum(len(r) for r in APPEND_RANGES)
    acks = [queue.get(timeout=300) for _ in range(expected_acks)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0

    deleted = {k for kind, keys, _ in acks if kind == "delete" for k in keys}
    appended = {k for kind, keys, _ in acks if kind == "append" for k in keys}
    expected = sorted((set(INITIAL) - deleted) | appended)
    assert sorted(table.scan().to_arrow().column("k").to_pylist()) == expected
    assert table.scan().count() == len(expected)
    # One live bitmap per data file, whatever the interleaving was.
    manifest = table.manifest()
    assert all(f.deletes is None or f.deletes.cardinality <= f.rows for f in manifest.files)
    assert sum(f.deleted_rows for f in manifest.files) == len(deleted)
    assert [h.version for h in table.history()] == list(range(table.version, -1, -1))



def _segment_table(path, deletes_limit: int) -> mt.Table:
    props = {"tail_limit": 1, "deletes_limit": deletes_limit}
    table = mt.create_table(str(path), SCHEMA, properties=props)
    for start in (0, 100, 200):
        table.append(pa.table({"k": list(range(start, start + 100))}, schema=SCHEMA))
    assert [f.stats["k"].min for f in table.manifest().tail] == [200]  # the others: in a segment
    return table


# A winner deleting from two files of a segment: with ``deletes_limit`` 1 the segment is
# rewritten, with 64 both versions list it and only the roots' ``deletes`` maps show the
# change (log/version.py, ``diff``).
@pytest.mark.parametrize("deletes_limit", [1, 64])
def test_a_delete_rebased_onto_one_of_the_same_segment_file_keeps_both(tmp_path, deletes_limit):
    table = _segment_table(tmp_path / "t", deletes_limit)
    with mt.open_table(str(tmp_path / "t")).transaction() as tx:
        tx.delete("k IN (5, 150)")
        table.delete("k IN (7, 151)")  # the winner, on the same two files
    assert sorted(set(range(300)) - set(table.scan().to_arrow().column("k").to_pylist())) == [5, 7, 150, 151]
    assert table.version == 5


@pytest.mark.parametrize("deletes_limit", [1, 64])
def test_an_update_of_a_row_a_winner_deleted_from_a_segment_file_conflicts(tmp_path, deletes_limit):
    table = _segment_table(tmp_path / "t", deletes_limit)
    with pytest.raises(CommitConflictError, match="changed rows this commit read"):
        with mt.open_table(str(tmp_path / "t")).transaction() as tx:
            tx.update(values={"k": -5}, where="k = 5")
            table.delete("k IN (5, 151)")
    assert table.scan(where="k IN (5, -5, 151)").count() == 0 and table.version == 4

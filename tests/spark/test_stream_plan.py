"""Planning the streaming source's micro-batches (manifest_table/spark/stream_plan.py), without
Spark: the units of successive batches, under any rate limit, are exactly the files that
append-only commits added, each once and in commit order; planning a batch again gives the same
units; where a stream starts; and the typed errors for change commits, schema changes and
versions garbage collection removed."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.errors import (
    ChangeCommitError,
    InvalidArgumentError,
    SchemaMismatchError,
    VersionExpiredError,
    VersionNotFoundError,
)
from manifest_table.operations.compaction import commit_compaction, plan_compaction, rewrite_group
from manifest_table.spark.stream_plan import (
    AFTER_LATEST,
    LATEST,
    Limit,
    Position,
    StreamPlanner,
    appended_rows,
    changed_rows,
)

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(start: int, stop: int) -> pa.Table:
    return pa.table({"id": list(range(start, stop)), "v": [f"v{i}" for i in range(start, stop)]}, schema=SCHEMA)


def planner(table: mt.Table, skip: bool = True) -> StreamPlanner:
    latest = table.manifest()
    return StreamPlanner(table, latest.fields, latest.version, appended_rows(skip))


def batches(p: StreamPlanner, start: Position, limit: Limit | None) -> list[list[str]]:
    """Every micro-batch until caught up: the paths of its units. Each batch is planned twice
    (as after a restart) and must come out the same."""
    out = []
    while True:
        end = p.latest(start, limit)
        if end == start:
            return out
        assert end.order > start.order
        units = p.units(start, end)
        assert units == p.units(start, end)
        if limit is not None and limit.max_files is not None:
            assert 1 <= len(units) <= limit.max_files
        out.append([u.file.path for u in units])
        start = end


def appended_or_not(table: mt.Table, version: int) -> str:
    """What version did to the rows, from the rows alone: kept them all and added some
    ("append"), moved them ("rewrite", a compaction), or deleted or replaced one ("change")."""

    def rows_of(v: int) -> set[tuple]:
        return set(zip(*table.scan(version=v).to_arrow().to_pydict().values()))

    before, after = rows_of(version - 1), rows_of(version)
    if not before <= after:
        return "change"
    return "rewrite" if table.manifest(version).operation == "compact" else "append"


def test_batches_under_any_limit_read_each_appended_file_once_in_commit_order(tmp_path: Path):
    rng = random.Random(7)
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, target_file_size=2_000)
    next_id, appended, seen = 0, [], set()
    for _ in range(14):
        kind = rng.choice(["append", "append", "append", "delete", "compact", "upsert"])
        before = t.version
        if kind == "append":
            count = rng.choice([1, 40, 300])
            t.append(rows(next_id, next_id + count))
            next_id += count
        elif kind == "delete":
            t.delete(f"id = {rng.randrange(max(next_id, 1))}")
        elif kind == "compact":
            t.compact(min_deleted_fraction=0.01)
        else:  # replaces the newest row (if still there) with new values, adds two
            t.upsert(rows(next_id - 1, next_id + 2).set_column(1, "v", pa.array(["new"] * 3)), ["id"])
            next_id += 2
        for v in range(before + 1, t.version + 1):
            kind = appended_or_not(t, v)
            seen.add(kind)
            if kind == "append":
                old = {f.path for f in t.manifest(v - 1).files}
                appended += [f.path for f in t.manifest(v).files if f.path not in old and f.live_rows]
    assert seen == {"append", "rewrite", "change"}
    sizes = sorted(f.size for f in t.manifest().files)
    for limit in (None, Limit(max_files=1), Limit(max_files=3), Limit(max_bytes=sizes[0]), Limit(2, 3 * sizes[-1])):
        got = batches(planner(t), Position(1), limit)
        assert [path for batch in got for path in batch] == appended, limit


def test_the_snapshot_comes_first_then_later_commits(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    t.append(rows(10, 20))
    t.delete("id = 3")
    p = planner(t)
    assert p.initial(None, None) == LATEST
    snapshot = [f.path for f in t.manifest().files]
    t.append(rows(20, 30))
    added = [f.path for f in t.manifest(4).files if f.path not in snapshot]
    assert batches(p, LATEST, Limit(max_files=1)) == [[snapshot[0]], [snapshot[1]], [added[0]]]
    assert Position.of_offset(Position(4, 1, True).to_offset()) == Position(4, 1, True)


@pytest.mark.parametrize("limit", [None, Limit(max_files=1)])
def test_a_first_batch_planned_again_after_more_commits_reads_the_same_rows(tmp_path: Path, limit):
    """Spark replays an unfinished first batch from the initial offset it asks for again and
    the end it logged: both starts mean the latest version *when first planned*."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    t.append(rows(10, 20))
    p = planner(t)
    ends = {start: p.latest(start, limit) for start in (LATEST, AFTER_LATEST)}
    units = {start: p.units(start, end) for start, end in ends.items()}
    t.append(rows(20, 30))
    t.compact()
    replayed = planner(t)
    assert {start: replayed.units(start, end) for start, end in ends.items()} == units
    assert ends[AFTER_LATEST] == Position(3) and units[AFTER_LATEST] == []
    assert [u.file.path for u in units[LATEST]] == [f.path for f in t.manifest(2).files][: 1 if limit else 2]


def test_where_a_stream_starts(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    infos = [t.append(rows(10 * k, 10 * k + 10)) for k in range(3)]  # versions 1, 2, 3
    p = planner(t)
    assert p.initial(2, None) == Position(2)
    assert p.initial("latest", None) == AFTER_LATEST
    assert p.initial(None, infos[1].timestamp) == Position(2)  # committed at that instant
    assert p.initial(None, infos[1].timestamp + timedelta(microseconds=1)) == Position(3)
    assert p.initial(None, infos[0].timestamp - timedelta(days=1)) == Position(0)
    assert p.initial(None, infos[2].timestamp + timedelta(microseconds=1)) == Position(4)
    with pytest.raises(VersionNotFoundError, match="startingVersion 9 does not exist"):
        p.initial(9, None)
    with pytest.raises(InvalidArgumentError, match="is in the future"):
        p.initial(None, infos[2].timestamp + timedelta(days=1))


def test_a_change_commit_fails_the_stream_after_the_rows_before_it_unless_skipped(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    t.update({"v": "'four'"}, "id = 4")  # version 2: deletes a row and adds its new image
    t.append(rows(10, 20))
    failing = planner(t, skip=False)
    for limit in (None, Limit(max_bytes=10**9)):  # what comes before it is read first, whatever the limit
        assert failing.latest(Position(1), limit) == Position(2)
    with pytest.raises(ChangeCommitError, match=r"version 2 \(update\).*skipChangeCommits"):
        failing.latest(Position(2), None)
    p = planner(t, skip=True)
    assert [u.version for u in p.units(Position(1), p.latest(Position(1), None))] == [1, 3]


def test_a_schema_change_after_the_query_started_fails_it(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    p = planner(t)  # the query's schema: version 1's
    with t.update_schema() as update:
        update.add_column("w", pa.int32())
    with pytest.raises(SchemaMismatchError, match="changed at version 2.*restart the query"):
        p.latest(Position(2), None)
    restarted = planner(t)  # a restarted query reads on under the new schema
    assert restarted.latest(Position(2), None) == Position(3)


def test_a_version_garbage_collection_removed_fails_with_what_to_do(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    for k in range(4):
        t.append(rows(10 * k, 10 * k + 10))
    t.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)  # versions 3 and 4 remain
    with pytest.raises(VersionExpiredError, match="needs version 3.*startingVersion at a retained version"):
        planner(t).initial(3, None)  # version 3's changes need version 2
    assert planner(t).initial(4, None) == Position(4)
    with pytest.raises(VersionExpiredError, match="needs version 1"):
        planner(t).latest(Position(1), None)


def test_a_database_table_streams_from_any_version_of_its_database(tmp_path: Path):
    """A database's table has the database's versions: before its creation it holds no rows
    (a start there reads it from its creation), and commits to other tables add none."""
    db = mt.create_database(str(tmp_path / "db"))
    db.create_table("other", SCHEMA)  # version 1
    t = db.create_table("t", SCHEMA)  # version 2
    t.append(rows(0, 10))  # version 3
    db.table("other").append(rows(0, 5))  # version 4
    t.append(rows(10, 20))  # version 5
    files = [f.path for f in t.manifest().files]
    p = planner(t)
    for start in (0, 1, 2, 3):
        assert p.initial(start, None) == Position(start)
        assert [path for batch in batches(p, Position(start), None) for path in batch] == files
    assert batches(p, Position(4), Limit(max_files=1)) == [[files[1]]]


def test_the_change_feed_plans_each_commit_that_changed_rows_as_one_unit(tmp_path: Path):
    """One unit per commit with change rows, never split by a limit (the files it touched
    count against it); a compaction has none, nor does a commit to another table."""
    db = mt.create_database(str(tmp_path / "db"))
    t = db.create_table("t", SCHEMA)  # version 1
    t.append(rows(0, 10))  # version 2
    t.append(rows(10, 20))  # version 3
    t.delete("id IN (3, 15)")  # version 4: two files
    t.compact(min_deleted_fraction=0.01)  # version 5
    db.create_table("other", SCHEMA)  # version 6
    t.update({"v": "'x'"}, "id = 4")  # version 7
    latest = t.manifest()
    p = StreamPlanner(t, latest.fields, latest.version, changed_rows)
    assert [len(u.files) for u in p.units(Position(0), p.latest(Position(0), None))] == [1, 1, 2, 2]
    assert [[u.version for u in p.units(start, end)] for start, end in ends(p, Position(0), Limit(max_files=1))] == [
        [2], [3], [4], [7]]
    assert [[u.version for u in p.units(start, end)] for start, end in ends(p, Position(0), Limit(max_files=3))] == [
        [2, 3], [4], [7]]
    feed = t.changes(0).to_arrow()
    assert sorted(set(feed.column("_commit_version").to_pylist())) == [2, 3, 4, 7]


def ends(p: StreamPlanner, start: Position, limit: Limit) -> list[tuple[Position, Position]]:
    """The (start, end) of each micro-batch until caught up."""
    out = []
    while (end := p.latest(start, limit)) != start:
        out.append((start, end))
        start = end
    return out


def test_a_purge_is_a_change_commit_a_compaction_is_not(tmp_path: Path):
    """A purge rewrites files like a compaction, but drops rows of its own: the change feed
    plans its deletes (one unit, the files it dropped rows of) and the append stream fails on
    it or skips it; a compaction after it has no unit in either. (Both streams took a purge
    for a compaction: a change-feed consumer never saw an erased row's delete.)"""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))  # version 1
    t.append(rows(10, 20))  # version 2
    t.purge(where="id = 3")  # version 3: rewrites the first file
    t.delete("id = 12")  # version 4
    t.compact(min_deleted_fraction=0.01)  # version 5
    t.append(rows(20, 30))  # version 6
    latest = t.manifest()
    feed = StreamPlanner(t, latest.fields, latest.version, changed_rows)
    units = feed.units(Position(0), feed.latest(Position(0), None))
    assert [u.version for u in units] == [1, 2, 3, 4, 6] and len(units[2].files) == 1
    assert sorted(set(t.changes(0).to_arrow().column("_commit_version").to_pylist())) == [1, 2, 3, 4, 6]
    with pytest.raises(ChangeCommitError, match=r"version 3 \(purge\)"):
        planner(t, skip=False).latest(Position(3), None)
    p = planner(t, skip=True)
    assert [u.version for u in p.units(Position(1), p.latest(Position(1), None))] == [1, 2, 6]


def test_a_compaction_a_delete_raced_is_no_change_commit(tmp_path: Path):
    """A compaction's record holds its sources' deletes as it read them; a delete committed
    meanwhile is remapped onto its outputs, so the parent's entry holds more deletes than the
    record. That is no row the compaction dropped: neither stream plans it (the append
    stream failed on it with ChangeCommitError, the change feed planned an empty unit)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))  # version 1
    t.append(rows(10, 20))  # version 2
    t.delete("id = 1")  # version 3
    base, pointer = t.log.latest()
    results = [rewrite_group(t, g, DeletionVectors(t.store)) for g in plan_compaction(base, 1 << 30, 0)]
    t.delete("id = 2")  # version 4, while the compaction rewrites
    assert commit_compaction(t, base, pointer, results, {}).version == 5
    t.append(rows(20, 30))  # version 6
    latest = t.manifest()
    feed = StreamPlanner(t, latest.fields, latest.version, changed_rows)
    assert [u.version for u in feed.units(Position(0), feed.latest(Position(0), None))] == [1, 2, 3, 4, 6]
    assert sorted(set(t.changes(0).to_arrow().column("_commit_version").to_pylist())) == [1, 2, 3, 4, 6]
    p = planner(t, skip=False)
    assert [u.version for u in p.units(Position(5), p.latest(Position(5), None))] == [6]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, *range(3, 30)]

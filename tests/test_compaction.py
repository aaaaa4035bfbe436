"""Compaction: planning, rewriting, and its commits racing deletes, appends and other
rewrites. The interleavings are driven step by step (stage the compaction on version N, let
another writer commit, then commit the compaction, and the reverse), so they are exact."""

from __future__ import annotations

import time

import pickle
from collections import Counter
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifest_table import Table, create_table
from manifest_table.changes import Rewrite
from manifest_table.errors import CommitConflictError, InvalidArgumentError
from manifest_table.format.manifest import DataFile, DeletionVector, Manifest
from manifest_table.maintenance import CompactionGroup, commit_compaction, plan_compaction, rewrite_group
from manifest_table.storage import MemoryStore, ObjectStore
from manifest_table.tombstones import DeletionVectors
from manifest_table.write import MAX_FILE_ROWS
from tests.conftest import make_store
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.int64())])
TARGET = 1 << 20  # every test file (~1 KiB) is small against it


def new_table(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Table:
    return create_table(str(tmp_path / "t"), SCHEMA, store=make_store(store_kind, request, tmp_path))


@pytest.fixture(params=["memory", "local"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Table:
    return new_table(request.param, request, tmp_path)


def append(t: Table, start: int, n: int) -> None:
    """Rows ``start .. start+n-1`` with ``g = id % 5``."""
    ids = list(range(start, start + n))
    t.append(pa.table({"id": ids, "g": [i % 5 for i in ids]}, schema=SCHEMA))


def rows(t: Table, version: int | None = None) -> Counter[tuple[int, int]]:
    data = t.scan(version=version).to_arrow()
    return Counter(zip(data.column("id").to_pylist(), data.column("g").to_pylist()))


def stage(t: Table, target: int = TARGET) -> tuple[Manifest, object, list[tuple[DataFile | None, Rewrite]]]:
    """Plan and rewrite a compaction of the latest version, without committing it."""
    base, pointer = t._log.latest()
    dvs = DeletionVectors(t.store)
    return base, pointer, [rewrite_group(t, g, dvs) for g in plan_compaction(base, target, 0.2)]


def filled(t: Table, files: int = 6, per_file: int = 10) -> None:
    for i in range(files):
        append(t, i * per_file, per_file)


# --- planning (manifest only) -----------------------------------------------------------
def manifest_of(*files: DataFile) -> Manifest:
    return Manifest(1, 0, 0, "c", "append", SCHEMA, files)


def file(name: str, size: int, rows: int = 100, deleted: int = 0) -> DataFile:
    dv = DeletionVector("tombstones/x", 0, 1, deleted) if deleted else None
    return DataFile(f"data/{name}", rows, size, deletes=dv)


def names(groups: list[CompactionGroup]) -> list[list[str]]:
    return [[f.path.removeprefix("data/") for f in g.files] for g in groups]


def test_plan_packs_small_files_in_manifest_order_and_skips_big_ones() -> None:
    m = manifest_of(file("a", 10), file("b", 10), file("big", 90), file("c", 10))
    assert names(plan_compaction(m, 100, 0.2)) == [["a", "b", "c"]]


def test_plan_fills_groups_up_to_the_target_and_skips_a_lone_clean_file() -> None:
    m = manifest_of(*(file(str(i), 40) for i in range(5)))
    assert names(plan_compaction(m, 100, 0.2)) == [["0", "1"], ["2", "3"]]


def test_plan_counts_live_bytes_only() -> None:
    # 60 bytes with half the rows deleted counts as 30: three fit in 100.
    m = manifest_of(*(file(str(i), 60, deleted=50) for i in range(3)))
    assert names(plan_compaction(m, 100, 0.9)) == [["0", "1", "2"]]


def test_plan_rewrites_heavily_deleted_files_alone_and_drops_fully_deleted_ones() -> None:
    m = manifest_of(file("big", 500, deleted=30), file("ok", 500, deleted=10), file("gone", 500, deleted=100),
                    file("lone", 10, deleted=5))
    assert names(plan_compaction(m, 100, 0.2)) == [["big"], ["gone", "lone"]]  # gone weighs nothing
    assert names(plan_compaction(m, 100, 0.05)) == [["big"], ["ok"], ["gone", "lone"]]
    assert names(plan_compaction(manifest_of(file("gone", 500, deleted=100)), 100, 0.2)) == [["gone"]]


def test_plan_keeps_groups_addressable_with_32_bit_positions() -> None:
    half = (MAX_FILE_ROWS + 1) // 2
    m = manifest_of(file("a", 1, rows=half - 1), file("b", 1, rows=half), file("c", 1, rows=2))
    groups = plan_compaction(m, 100, 0.2)
    assert names(groups) == [["a", "b"]] and groups[0].live_rows <= MAX_FILE_ROWS


@pytest.mark.parametrize("target, fraction", [(0, 0.2), (100, 0.0), (100, 1.5)])
def test_plan_rejects_nonsense(target: int, fraction: float) -> None:
    with pytest.raises(InvalidArgumentError):
        plan_compaction(manifest_of(), target, fraction)


def test_groups_travel_to_other_processes(table: Table) -> None:
    """What a distributed engine ships to its workers must pickle and still rewrite."""
    filled(table, files=2)
    (group,) = plan_compaction(table.manifest(), TARGET, 0.2)
    shipped = pickle.loads(pickle.dumps(group))
    assert shipped == group and shipped.schema == SCHEMA
    output, rewrite = rewrite_group(table, shipped, DeletionVectors(table.store))
    assert output.rows == 20 and [s.path for s in rewrite.sources] == [f.path for f in group.files]


# --- compacting a table -----------------------------------------------------------------
def test_compact_merges_files_purges_deletes_and_is_idempotent(table: Table) -> None:
    filled(table)
    table.delete("g = 1")
    before, version = rows(table), table.version
    info = table.compact(TARGET)
    assert info.committed and info.operation == "compact" and info.version == version + 1
    assert info.metrics["files_removed"] == 6 and info.metrics["files_added"] == 1
    assert info.metrics["rows_rewritten"] == 48 and info.metrics["rows_dropped"] == 12
    (output,) = table.manifest().files
    assert output.rows == 48 and output.deletes is None
    assert rows(table) == before and table.scan().count() == 48
    assert rows(table, version) == before  # time travel to before the compaction

    again = table.compact(TARGET)
    assert not again.committed and again.version == table.version == version + 1


def test_compact_defaults_to_the_table_target_size(tmp_path: Path) -> None:
    t = create_table(str(tmp_path / "t"), SCHEMA, target_file_size=TARGET)
    filled(t, files=3)
    assert t.compact().committed and len(t.manifest().files) == 1


def test_compact_leaves_big_clean_files_alone(table: Table) -> None:
    filled(table, files=3)
    table.delete("id = 0")  # 10% of the first file
    size = min(f.size for f in table.manifest().files)
    assert not table.compact(size).committed
    table.delete("id < 5")  # now 50%: rewritten alone
    info = table.compact(size)
    assert info.committed and info.metrics["files_removed"] == 1 and info.metrics["rows_rewritten"] == 5


def test_fully_deleted_file_is_removed_without_an_output(table: Table) -> None:
    filled(table, files=2)
    table.delete("id < 10")
    size = max(f.size for f in table.manifest().files)
    before = rows(table)
    info = table.compact(size)  # the surviving file is not small against its own size
    assert info.metrics == {**info.metrics, "files_removed": 1, "files_added": 0, "rows_dropped": 10}
    assert [f.rows for f in table.manifest().files] == [10] and rows(table) == before
    assert [rw["output"] for rw in info.parameters["rewrites"]] == [None]


# --- concurrent writers -----------------------------------------------------------------
def test_delete_committed_during_compaction_is_remapped(table: Table) -> None:
    filled(table)
    table.delete("g = 1")
    base, pointer, results = stage(table)
    table.delete("g = 2")
    table.delete("id >= 55")  # a second winner: the retry must carry both deletes
    info = commit_compaction(table, base, pointer, results, {})
    assert info.committed and info.version == base.version + 3
    expected = Counter((i, i % 5) for i in range(55) if i % 5 not in (1, 2))
    assert rows(table) == expected
    (output,) = table.manifest().files
    assert output.deletes is not None and output.live_rows == sum(expected.values())


class HookedStore(WrappedStore):
    """Runs the queued hooks one per manifest create, just before it: a deterministic way
    to let another writer win exactly when this one retries."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.hooks: list[Callable[[], object]] = []

    def _before(self, op: str, key: str) -> None:
        if op == "put" and key.startswith("manifest/") and self.hooks:
            self.hooks.pop(0)()


def test_deletes_winning_each_retry_of_a_compaction_all_survive(table: Table) -> None:
    filled(table)
    store = HookedStore(table.store)
    compactor = Table(table.uri, store)
    base, pointer, results = stage(compactor)
    table.delete("g = 2")
    # While the compaction retries on top of that delete, another one wins the next version.
    store.hooks = [lambda: None, lambda: table.delete("id >= 55")]
    # A fresh snapshot time: the compaction learns of each winner by losing its create race.
    info = commit_compaction(compactor, base, pointer, results, {}, time.monotonic())
    assert info.version == base.version + 3
    assert rows(table) == Counter((i, i % 5) for i in range(55) if i % 5 != 2)


def test_delete_staged_before_compaction_commits_after_it(table: Table) -> None:
    filled(table)
    table.delete("g = 1")
    with table.transaction() as tx:
        tx.delete("g = 2 OR id = 3")  # id 3 has g = 3: positions in several sources
        table.compact(TARGET)
    expected = Counter((i, i % 5) for i in range(60) if i % 5 not in (1, 2) and i != 3)
    assert rows(table) == expected
    assert table.history()[0].operation == "delete" and len(table.manifest().files) == 1


def test_delete_staged_before_two_compactions_follows_both_rewrites(table: Table) -> None:
    filled(table, files=3)
    with table.transaction() as tx:
        tx.delete("g = 4")
        table.compact(TARGET)  # 3 files -> 1
        append(table, 100, 10)
        table.delete("id = 0")
        table.compact(TARGET)  # that output + the new file -> 1, dropping id 0
    # The delete read only the first three files: rows appended since are not its business.
    expected = Counter((i, i % 5) for i in [*(i for i in range(1, 30) if i % 5 != 4), *range(100, 110)])
    assert rows(table) == expected and len(table.manifest().files) == 1


def test_appends_never_conflict_with_compaction(table: Table) -> None:
    filled(table, files=3)
    base, pointer, results = stage(table)
    append(table, 100, 5)
    assert commit_compaction(table, base, pointer, results, {}).committed
    with table.transaction() as tx:
        tx.append(pa.table({"id": [200], "g": [0]}, schema=SCHEMA))
        table.compact(TARGET)
    expected = Counter((i, i % 5) for i in [*range(30), *range(100, 105)]) + Counter({(200, 0): 1})
    assert rows(table) == expected


def test_concurrent_compactions_conflict_and_the_loser_cleans_up(table: Table) -> None:
    filled(table, files=3)
    first, second = stage(table), stage(table)
    commit_compaction(table, *first, {})
    with pytest.raises(CommitConflictError, match="removed files this commit replaces"):
        commit_compaction(table, *second, {})
    (loser_output,) = [out for out, _ in second[2]]
    assert table.store.head(loser_output.path) is None
    assert sum(rows(table).values()) == 30


def test_overwrite_and_compaction_conflict_in_either_order(table: Table) -> None:
    filled(table, files=3)
    staged = stage(table)
    table.overwrite(pa.table({"id": [1], "g": [1]}, schema=SCHEMA))
    with pytest.raises(CommitConflictError):
        commit_compaction(table, *staged, {})
    append(table, 10, 10)
    tx = table.transaction()
    tx.overwrite(pa.table({"id": [2], "g": [2]}, schema=SCHEMA), "g = 1")
    table.compact(TARGET)
    with pytest.raises(CommitConflictError):
        tx.commit()
    assert rows(table) == Counter([(1, 1)]) + Counter((i, i % 5) for i in range(10, 20))


# --- equivalence: a property test over random histories ---------------------------------
_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 25)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("compact"), st.sampled_from([0.1, 0.5, 1.0])),
    st.tuples(st.just("stage"), st.just(0)),
    st.tuples(st.just("commit_staged"), st.just(0)),
), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_compaction_never_changes_what_any_version_reads(ops: list[tuple[str, float]]) -> None:
    t = create_table("memory://t", SCHEMA, store=MemoryStore())
    live: Counter[tuple[int, int]] = Counter()
    model = {0: Counter()}
    staged: list[tuple[Manifest, object, list]] = []
    next_id = 0

    def g(i: int) -> int:
        return i * 7919 % 7

    for op, arg in ops:
        if op == "append":
            ids = list(range(next_id, next_id + int(arg)))
            next_id += int(arg)
            t.append(pa.table({"id": ids, "g": [g(i) for i in ids]}, schema=SCHEMA))
            live.update((i, g(i)) for i in ids)
        elif op == "delete":
            t.delete(f"g = {arg}")
            live = Counter({row: n for row, n in live.items() if row[1] != arg})
        elif op == "compact":
            t.compact(4096, arg)
        elif op == "stage":
            staged.append(stage(t, 4096))
        elif staged:
            try:
                commit_compaction(t, *staged.pop(0), {})
            except CommitConflictError:
                pass  # another compaction rewrote the same files first
        model[t.version] = live.copy()
    for version, expected in model.items():
        assert rows(t, version) == expected, version
        assert t.scan(version=version).count() == sum(expected.values())

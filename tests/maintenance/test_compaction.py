"""Compaction: planning, rewriting, and its commits racing deletes, appends and other
rewrites. The interleavings are driven step by step (stage the compaction on version N, let
another writer commit, then commit the compaction, and the reverse), so they are exact."""

from __future__ import annotations

import pickle
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifest_table import Table, create_table, open_table
from manifest_table.clock import Stamp
from manifest_table.commit.changes import Rewrite
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.data.write import MAX_FILE_ROWS
from manifest_table.errors import CommitConflictError, CorruptTableError, InvalidArgumentError
from manifest_table.format.manifest import DataFile, DeletionVector, Manifest
from manifest_table.format.stored_schema import StoredSchema
from manifest_table.log.version import Version
from manifest_table.operations.compaction import (
    CompactionGroup,
    commit_compaction,
    plan_compaction,
    rewrite_group,
    rewrite_record,
)
from manifest_table.storage import MemoryStore, ObjectStore
from tests.conftest import make_store
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.int64())])
OLD_TABLE = Path(__file__).parents[1] / "data" / "table_written_by_0.2.0"
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


def stage(t: Table, target: int = TARGET) -> tuple[Manifest, object, list[tuple[list[DataFile], Rewrite]]]:
    """Plan and rewrite a compaction of the latest version, without committing it."""
    base, pointer = t.log.latest()
    dvs = DeletionVectors(t.store)
    return base, pointer, [rewrite_group(t, g, dvs) for g in plan_compaction(base, target, 0.2)]


def filled(t: Table, files: int = 6, per_file: int = 10) -> None:
    for i in range(files):
        append(t, i * per_file, per_file)


# --- planning (manifest only) -----------------------------------------------------------
def manifest_of(*files: DataFile) -> Version:
    return Version(1, 0, 0, "c", "append", StoredSchema.of(SCHEMA), files)


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


def test_plan_with_min_deleted_fraction_0_rewrites_every_file_with_a_deleted_row() -> None:
    """Issue 34: 0 means any deleted row (0.3.0 refused it); files without deletes stay."""
    m = manifest_of(file("one", 500, rows=10_000, deleted=1), file("clean", 500), file("half", 500, deleted=50))
    assert names(plan_compaction(m, 100, 0)) == [["one"], ["half"]]


def test_plan_keeps_groups_addressable_with_32_bit_positions() -> None:
    half = (MAX_FILE_ROWS + 1) // 2
    m = manifest_of(file("a", 1, rows=half - 1), file("b", 1, rows=half), file("c", 1, rows=2))
    groups = plan_compaction(m, 100, 0.2)
    assert names(groups) == [["a", "b"]] and groups[0].live_rows <= MAX_FILE_ROWS


@pytest.mark.parametrize("target, fraction", [(0, 0.2), (100, -0.1), (100, 1.5)])
def test_plan_rejects_nonsense(target: int, fraction: float) -> None:
    with pytest.raises(InvalidArgumentError):
        plan_compaction(manifest_of(), target, fraction)


def test_groups_travel_to_other_processes(table: Table) -> None:
    """What a distributed engine ships to its workers must pickle and still rewrite."""
    filled(table, files=2)
    (group,) = plan_compaction(table.manifest(), TARGET, 0.2)
    shipped = pickle.loads(pickle.dumps(group))
    assert shipped == group and shipped.schema == SCHEMA
    (output,), rewrite = rewrite_group(table, shipped, DeletionVectors(table.store))
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


def test_a_big_file_with_deletes_is_rewritten_into_outputs_near_the_target(table: Table) -> None:
    """Before, every group became one file whatever its size (the writer was given a target
    no file reaches), and failed when the writer split it anyway."""
    append(table, 0, 3000)
    table.delete("g = 1 OR g = 2")  # 40% of the file
    (source,) = table.manifest().files
    info = table.compact(source.size // 4)  # 0.6 of the file live: outputs of about 0.3, near 0.25
    outputs = table.manifest().files
    assert info.metrics["files_added"] == len(outputs) == 2 and [f.rows for f in outputs] == [900, 900]
    assert info.parameters["rewrites"] == [{"outputs": [{"path": f.path, "rows": 900} for f in outputs],
                                            "sources": info.parameters["rewrites"][0]["sources"]}]
    assert rows(table) == Counter((i, i % 5) for i in range(3000) if i % 5 not in (1, 2))
    assert not table.compact(source.size // 4).committed


def two_files_with_deletes(t: Table) -> None:
    """Two files of 1,000 rows with 30% deleted (``gone_after_staging``)."""
    append(t, 0, 1000)
    append(t, 1000, 1000)
    t.delete("g = 1 OR id < 100 OR id >= 1900")


def several_outputs(t: Table) -> tuple[Manifest, object, list[tuple[list[DataFile], Rewrite]]]:
    """``two_files_with_deletes``, staged into outputs of about 230 rows."""
    target = min(f.size for f in t.manifest().files) // 4
    staged = stage(t, target)
    assert [len(outputs) for outputs, _ in staged[2]] == [3, 3]
    return staged


def gone_after_staging(i: int) -> bool:
    return i % 5 == 1 or i < 100 or i >= 1900


def test_deletes_committed_during_a_compaction_with_several_outputs_are_remapped(table: Table) -> None:
    two_files_with_deletes(table)
    base, pointer, results = several_outputs(table)
    table.delete("g = 3 OR id = 150 OR id = 999 OR id = 1000 OR id = 1899")  # rows in every output
    info = commit_compaction(table, base, pointer, results, {})
    assert info.committed and len(table.manifest().files) == 6
    expected = Counter((i, i % 5) for i in range(2000)
                       if not gone_after_staging(i) and i % 5 != 3 and i not in (150, 999, 1000, 1899))
    assert rows(table) == expected
    assert all(f.deletes is not None for f in table.manifest().files)


def test_a_delete_staged_before_a_compaction_with_several_outputs_follows_it(table: Table) -> None:
    two_files_with_deletes(table)
    with table.transaction() as tx:
        tx.delete("g = 4 OR id = 100 OR id = 1898")
        base, pointer, results = several_outputs(table)
        assert commit_compaction(table, base, pointer, results, {}).committed
    expected = Counter((i, i % 5) for i in range(2000) if not gone_after_staging(i) and i % 5 != 4
                       and i not in (100, 1898))
    assert rows(table) == expected and table.history()[0].operation == "delete"


def test_outputs_not_holding_the_live_rows_are_refused_and_only_damage_is_called_corrupt(table: Table) -> None:
    """The check every engine's rewrite ends in. Once it raised ``CorruptTableError`` when
    the table was fine and the writer had merely split the output."""
    filled(table, files=2)
    table.delete("id = 3")
    (group,) = plan_compaction(table.manifest(), TARGET, 0.2)
    outputs, rewrite = rewrite_group(table, group, DeletionVectors(table.store))
    assert [(out.path, out.rows) for out in rewrite.outputs] == [(outputs[0].path, 19)]
    with pytest.raises(RuntimeError, match="wrote 18 rows into 2 files, but the manifest counts 19 live rows"):
        rewrite_record(table.io, group, [replace(outputs[0], rows=9), replace(outputs[0], rows=9)])
    source = group.files[1]
    table.store.delete_unreferenced([source.path])
    with table.io.create(source.path) as sink:  # a damaged source: one row short
        pq.write_table(pa.table({"id": list(range(9)), "g": [0] * 9}, schema=SCHEMA), sink)
    damaged = CompactionGroup((group.files[0], replace(source, size=table.store.head(source.path).size)),
                              group.fields, group.version, TARGET)
    with pytest.raises(CorruptTableError, match=f"{source.path}: its Parquet footer has 9 rows, the manifest's rows"):
        rewrite_record(table.io, damaged, [replace(outputs[0], rows=18)])


def test_a_delete_rebases_through_a_compaction_recorded_by_0_2_0(tmp_path: Path) -> None:
    """Releases 0.1.0 and 0.2.0 record one ``output`` per rewrite: a delete staged before such a
    compaction and committed after it is remapped onto that output (formats are forever)."""
    root = tmp_path / "t"
    shutil.copytree(OLD_TABLE, root)
    compaction = root / "manifest" / "v00000000000000000005.json"
    assert '"output":"data/' in compaction.read_text()
    held = compaction.read_bytes()
    for later in (root / "manifest").glob("v*.json"):
        if int(later.stem[1:]) >= 5:
            later.unlink()
    (root / "_latest_manifest").write_text('{"format_version": 1, "version": 4}')
    table = open_table(str(root))
    with table.transaction() as tx:
        tx.delete("id = 5 OR id = 17 OR id = 29")  # a row of each source of that compaction
        compaction.write_bytes(held)  # 0.2.0's compaction wins version 5
    compacted = pq.read_table(OLD_TABLE.parent / "table_written_by_0.2.0.expected" / "v5.parquet")
    assert table.version == 6 and table.manifest().operation == "delete"
    assert sorted(table.to_arrow().column("id").to_pylist()) == sorted(
        set(compacted.column("id").to_pylist()) - {5, 17, 29})


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
    info = commit_compaction(compactor, base, pointer, results, {}, Stamp.now())
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
    (loser_output,) = [out for outs, _ in second[2] for out in outs]
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
    tx.overwrite(pa.table({"id": [2], "g": [1]}, schema=SCHEMA), "g = 1")
    table.compact(TARGET)
    with pytest.raises(CommitConflictError):
        tx.commit()
    assert rows(table) == Counter([(1, 1)]) + Counter((i, i % 5) for i in range(10, 20))


# --- equivalence: a property test over random histories ---------------------------------
_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 25)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("compact"), st.sampled_from([0.1, 0.5, 1.0, -0.1])),  # < 0: a target that splits files
    st.tuples(st.just("stage"), st.sampled_from([4096, 300])),
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
            t.compact(4096 if arg > 0 else 300, abs(arg))
        elif op == "stage":
            staged.append(stage(t, int(arg)))
        elif staged:
            try:
                commit_compaction(t, *staged.pop(0), {})
            except CommitConflictError:
                pass  # another compaction rewrote the same files first
        model[t.version] = live.copy()
    for version, expected in model.items():
        assert rows(t, version) == expected, version
        assert t.scan(version=version).count() == sum(expected.values())

"""A model-based test: random appends, deletes, overwrites, updates, upserts, transactions,
schema changes, properties (the layout's ``cluster_by`` and ``sort_by`` too), compaction
(clustering when ``cluster_by`` is set), purge, a lost file repaired, and time travel against
a plain in-memory model of the rows at every version."""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError
from manifest_table.storage import MemoryStore

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
KEYS = st.integers(0, 40)
ROWS = st.lists(st.tuples(KEYS, st.sampled_from(["a", "b", None])), max_size=12)
# Conditions on k (an int) and v (a nullable string), with the Python meaning of each.
CONDITIONS = st.one_of(
    st.builds(lambda x: (f"k < {x}", lambda k, v: k < x), KEYS),
    st.builds(lambda x: (f"k = {x}", lambda k, v: k == x), KEYS),
    st.builds(lambda x, y: (f"k BETWEEN {x} AND {y}", lambda k, v: x <= k <= y), KEYS, KEYS),
    st.builds(lambda s: (f"v = '{s}'", lambda k, v: v == s), st.sampled_from(["a", "b"])),
    st.just(("v IS NULL", lambda k, v: v is None)),
    st.builds(lambda x: (f"k >= {x} OR v IS NULL", lambda k, v: k >= x or v is None), KEYS),
    st.builds(lambda x: (f"NOT (k > {x}) AND v <> 'a'", lambda k, v: not k > x and v is not None and v != "a"), KEYS),
)


def as_table(rows: list[tuple[int, str | None]]) -> pa.Table:
    return pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=SCHEMA)


def multiset(table: pa.Table) -> Counter:
    """By position: a version read mid schema change has other names (see ``evolve``)."""
    return Counter(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))


class TableModel(RuleBasedStateMachine):
    """Over a format-v1 table that the ``upgrade`` rule may move to v2 mid-history, so time
    travel crosses the boundary.

    What a rule draws, and whether it may run, depends only on the rules before it, never on
    the table's layout: how a write cuts its files follows its encoding threads' timing
    (data/write.py), so the files, and whether a compaction commits, differ between replays
    of one example (Hypothesis calls such a test flaky)."""

    create: dict = {"format_version": 1}

    def __init__(self) -> None:
        super().__init__()
        # Small files and row groups, so pruning, several files and several row groups all happen.
        self.table = mt.create_table("mem://model", SCHEMA, store=MemoryStore(),
                                     target_file_size=2_000, row_group_size=64, **self.create)
        self.versions: list[list[tuple[int, str | None]]] = [[]]
        self.damaged: set[int] = set()
        """Versions listing a file this test deleted by hand (``repair``): they read as corrupt."""

    @property
    def rows(self) -> list[tuple[int, str | None]]:
        return self.versions[-1]

    def committed(self, info: mt.CommitInfo, rows: list) -> None:
        if info.committed:
            assert info.version == len(self.versions)
            self.versions.append(rows)
        else:
            assert Counter(rows) == Counter(self.rows)

    @rule(rows=ROWS)
    def append(self, rows):
        self.committed(self.table.append(as_table(rows)), self.rows + rows)

    @rule(condition=CONDITIONS)
    def delete(self, condition):
        text, matches = condition
        keep = [r for r in self.rows if not matches(*r)]
        info = self.table.delete(text)
        assert info.metrics["rows_deleted"] == len(self.rows) - len(keep)
        self.committed(info, keep)

    @rule(rows=ROWS, condition=st.one_of(st.none(), CONDITIONS), require_match=st.booleans())
    def overwrite(self, rows, condition, require_match):
        """With a condition, every new row must satisfy it unless ``require_match=False``."""
        keep = [] if condition is None else [r for r in self.rows if not condition[1](*r)]
        outside = [] if condition is None else [r for r in rows if not condition[1](*r)]
        text = None if condition is None else condition[0]
        if outside and require_match:
            with pytest.raises(InvalidArgumentError, match=f"^{len(outside)} of the"):
                self.table.overwrite(as_table(rows), text)
            return
        info = self.table.overwrite(as_table(rows), text, require_match=require_match)
        self.committed(info, keep + rows)

    @rule(condition=st.one_of(st.none(), CONDITIONS), value=st.sampled_from(["a", "b", None]),
          shift=st.integers(-3, 3))
    def update(self, condition, value, shift):
        matches = (lambda k, v: True) if condition is None else condition[1]
        rows = [(k + shift, value) if matches(k, v) else (k, v) for k, v in self.rows]
        assignments = {"k": f"k + {shift}", "v": "NULL" if value is None else f"'{value}'"}
        info = self.table.update(assignments, None if condition is None else condition[0])
        assert info.metrics["rows_updated"] == sum(matches(*r) for r in self.rows)
        self.committed(info, rows)

    @rule(source=st.lists(st.tuples(KEYS, st.sampled_from(["a", "b", None])), max_size=8,
                          unique_by=lambda r: r[0]),
          when_matched=st.sampled_from(["update", "ignore"]), when_not_matched=st.sampled_from(["insert", "ignore"]))
    def upsert(self, source, when_matched, when_not_matched):
        keys = {k for k, _ in source}
        present = {k for k, _ in self.rows}
        replaced = [r for r in self.rows if r[0] in keys]
        rows = [r for r in self.rows if r[0] not in keys or when_matched == "ignore"]
        if when_matched == "update":
            rows += [next(s for s in source if s[0] == k) for k, _ in replaced]
        if when_not_matched == "insert":
            rows += [s for s in source if s[0] not in present]
        info = self.table.upsert(as_table(source), on=["k"], when_matched=when_matched,
                                 when_not_matched=when_not_matched)
        self.committed(info, rows)

    @rule(first=ROWS, condition=CONDITIONS, second=ROWS)
    def transaction(self, first, condition, second):
        text, matches = condition
        with self.table.transaction() as tx:
            tx.append(as_table(first))
            tx.delete(text)
            expected = [r for r in self.rows + first if not matches(*r)]
            assert multiset(tx.scan().to_arrow()) == Counter(expected)
            tx.append(as_table(second))
        info = self.table.history(limit=1)[0]
        self.committed(info if info.version == len(self.versions) else
                       mt.CommitInfo(-1, "", info.timestamp, None, committed=False), expected + second)

    @rule()
    def failed_transaction(self):
        try:
            with self.table.transaction() as tx:
                tx.append(as_table([(1, "a")]))
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        assert self.table.version == len(self.versions) - 1

    @precondition(lambda self: self.table.manifest().format_version == 1)
    @rule()
    def upgrade(self):
        info = self.table.upgrade()
        assert info.committed and self.table.manifest().format_version == 2
        self.committed(info, self.rows)

    @precondition(lambda self: self.table.manifest().format_version == 2)
    @rule(rows=ROWS)
    def evolve(self, rows):
        """Append with a new column (``schema_mode="merge"``), rename ``v`` away while dropping
        that column, rename it back: three versions of the same columns by field id, whose
        files old and new time travel and later commits must resolve."""
        extra = as_table(rows).append_column("extra", pa.array(range(len(rows)), pa.int64()))
        info = self.table.append(extra, schema_mode="merge")  # adds the column even without rows
        assert info.committed and "extra" in self.table.schema.names
        self.committed(info, self.rows + rows)
        with self.table.update_schema() as s:
            s.rename_column("v", "v_renamed")
            s.drop_column("extra")
        self.committed(s.result, self.rows)
        with self.table.update_schema() as s:
            s.rename_column("v_renamed", "v")
        self.committed(s.result, self.rows)
        assert self.table.schema == SCHEMA

    @precondition(lambda self: self.table.manifest().format_version >= 2)
    @rule(name=st.sampled_from(["tail_limit", "deletes_limit", "gc_grace"]), data=st.data())
    def set_properties(self, name, data):
        value = data.draw(st.sampled_from([1, 2, 64] if name != "gc_grace" else ["90m", "2d", None]))
        self.committed(self.table.set_properties({name: value}), self.rows)
        assert self.table.properties[name] == ("24h" if value is None else value)

    @precondition(lambda self: self.table.manifest().format_version >= 2)
    @rule(name=st.sampled_from(["cluster_by", "sort_by", "bloom_filter_columns"]),
          columns=st.sampled_from([None, ["k"], ["v"], ["k", "v"], ["v", "k"]]))
    def set_layout(self, name, columns):
        self.committed(self.table.set_properties({name: columns}), self.rows)
        assert self.table.properties[name] == (columns or [])

    @rule(size=st.sampled_from([300, 2_000, 20_000]), fraction=st.sampled_from([0, 0.2, 1]))
    def compact(self, size, fraction):
        """Compaction (on a table with ``cluster_by``, clustering) reads the same rows; with
        ``min_deleted_fraction=0`` no file it leaves holds a deleted row."""
        self.committed(self.table.compact(size, fraction), self.rows)
        if fraction == 0:
            assert not [f.path for f in self.table.manifest().files if f.deleted_rows]

    @rule(condition=st.one_of(st.none(), CONDITIONS))
    def purge(self, condition):
        keep = [r for r in self.rows if not condition[1](*r)] if condition else self.rows
        info = self.table.purge(condition[0] if condition else None)
        if info.committed and condition:
            assert info.metrics["rows_deleted"] == len(self.rows) - len(keep)
        self.committed(info, keep)
        assert not [f.path for f in self.table.manifest().files if f.deleted_rows]

    @rule(choice=st.integers(0, 10**6))
    def lose_a_file_and_repair(self, choice):
        """A data file deleted by hand, then ``repair``: its live rows are gone, and every
        version listing it reads as ``CorruptTableError`` naming it."""
        files = [f.path for f in self.table.manifest().files]
        if not files:
            return
        victim = files[choice % len(files)]
        lost = Counter()
        for f, rows in self.table.scan().matching_rows():
            if f.path == victim:
                lost.update(zip(rows.column("k").to_pylist(), rows.column("v").to_pylist()))
        for v in set(range(len(self.versions))) - self.damaged:  # a scan reads the file if it has live rows
            entry = self.table.manifest(v).file_map().get(victim)
            if entry is not None and entry.live_rows:
                self.damaged.add(v)
        self.table.store.delete(victim)
        if lost:
            with pytest.raises(mt.errors.CorruptTableError, match=victim):
                self.table.scan().to_arrow()
        report = self.table.repair()
        assert [(f.path, f.rows) for f in report.lost] == [(victim, sum(lost.values()))]
        self.committed(report.commit, list((Counter(self.rows) - lost).elements()))

    @rule(choice=st.integers(0, 10**6))
    def time_travel(self, choice):
        version = choice % len(self.versions)
        if version in self.damaged:
            with pytest.raises(mt.errors.CorruptTableError, match=f"version {version} of"):
                self.table.scan(version=version).to_arrow()
            return
        assert multiset(self.table.scan(version=version).to_arrow()) == Counter(self.versions[version])
        assert self.table.scan(version=version).count() == len(self.versions[version])

    @rule(condition=CONDITIONS)
    def filtered_scan(self, condition):
        text, matches = condition
        expected = Counter(r for r in self.rows if matches(*r))
        scan = self.table.scan(where=text)
        assert multiset(scan.to_arrow()) == expected
        assert scan.count() == sum(expected.values())

    @invariant()
    def latest_matches(self):
        assert self.table.version == len(self.versions) - 1
        assert self.table.scan().count() == len(self.rows)
        assert multiset(self.table.scan().to_arrow()) == Counter(self.rows)


class TinySegmentsModel(TableModel):
    """Format v2 with limits so small that nearly every commit flushes the tail, rewrites a
    segment for the deletes map, or merges segments."""

    create = {"properties": {"tail_limit": 1, "deletes_limit": 1, "segment_target_files": 3,
                             "max_small_segments": 2}}


class DefaultV2Model(TableModel):
    create: dict = {}


for model, examples in ((TableModel, 40), (TinySegmentsModel, 60), (DefaultV2Model, 20)):
    model.TestCase.settings = settings(max_examples=examples, stateful_step_count=25, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
test_table_model = TableModel.TestCase
test_tiny_segments_model = TinySegmentsModel.TestCase
test_default_v2_model = DefaultV2Model.TestCase

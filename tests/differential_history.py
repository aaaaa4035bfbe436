"""Random histories of the differential read-path test: each step changes the table and the
model (tests/differential_model.py) alike and checks what the library says it did (rows
deleted, updated, inserted) against the model.

Steps: append, delete, update, upsert (also of keys alone, deleting matches) and overwrite
(with and without a condition), the same inside transactions (whose own scans are checked)
and racing a second handle, ``write_table`` appending or overwriting, compaction with small
targets (files merge and split; clustering once ``cluster_by`` is set, also racing a delete
both ways), purge (with and without a condition), the layout properties ``cluster_by`` and
``sort_by``, schema changes (add, rename, drop, widen, a name renamed away or dropped taken
again, append with ``schema_mode="merge"``), upgrade from format v1, garbage collection,
properties set (the table's, or its database's ``gc_grace``), a data file lost and repaired,
and adding a NOT NULL column while another handle appends (issue 18 item 4: that must
conflict). Writes go through the writer's handle or a fresh one. A table of a database (issue
28) is also written through ``db.table``, ``mt.open_table("DB/T")`` and database transactions
that write a second table too, and commits to other tables and catalog changes interleave
(database versions at which the table is unchanged)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import manifest_table as mt
from manifest_table.data.tombstones import DeletionVectors
from manifest_table.errors import CommitConflictError, InvalidArgumentError
from manifest_table.expressions import lit
from manifest_table.format.bloom_filter import probed_type
from manifest_table.format.stats import has_stats
from manifest_table.operations.compaction import commit_compaction, plan_compaction, rewrite_group
from tests.differential_model import BEFORE, Oracle, State, new_values
from tests.differential_reads import compare_count, compare_own, shrink
from tests.differential_types import AWKWARD_NAMES, Column, Kind, random_rows
from tests.filter_generator import Text, random_filter

TINY = {"tail_limit": 2, "deletes_limit": 2, "segment_target_files": 3, "max_small_segments": 2}
"""Format v2 limits under which files sit in segments and segments merge every few commits."""
FLAVORS: dict[str, dict[str, Any]] = {"v1": {"format_version": 1}, "v2-tiny": {"properties": TINY}, "v2": {},
                                      "db": {"properties": TINY}}
"""How a case's table is made; "db": as table "t" of a database, next to table "other"."""
OTHER = pa.schema([("k", pa.int64())])
"""The database's other table: its commits are versions that leave "t" as it was."""


@dataclass(frozen=True)
class Change:
    """One write, planned against the model: what to call on a table or a transaction, and
    what it does to the model's rows."""

    text: str
    run: Callable[[Any], Any]
    apply: Callable[[State], State]
    metrics: dict[str, int]
    returns: Any = None
    """What the transaction's method returns (None: not checked)."""
    gone: frozenset[int] = frozenset()
    """The row versions it deletes (model uids)."""


@dataclass
class History:
    uri: str
    table: Any
    oracle: Oracle
    versions: list[State | None]
    kinds: list[Kind]
    """The types new columns may have."""
    steps: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Wrong outcomes the history could carry on after (the model follows what happened)."""
    damaged: set[int] = field(default_factory=set)
    """Versions that list a file deleted by hand: they read as ``CorruptTableError``."""
    repaired: int = -1
    """The version of the last repair (the change feed reads no commit before it)."""
    next_id: int = 0
    next_uid: int = 0
    names: int = 0
    freed: list[str] = field(default_factory=list)
    """Names a committed schema change renamed away or dropped: a later column may take one,
    while the files keep the old column under it (format/field_ids.py, physical names)."""
    database: Any = None
    """The database holding the table as ``t`` (flavor "db"), else None."""
    first: int = 0
    """The first version holding the table (a database's: after the database's own)."""
    other: dict[int, list[int]] = field(default_factory=dict)
    """Version -> the rows (``k``) it appended to the database's other table."""
    replaced_by: dict[int, int] = field(default_factory=dict)
    """Row version (uid) -> the one an update or upsert replaced with it: the change feed's
    pairs (tests/differential_changes.py)."""

    @property
    def state(self) -> State:
        state = self.versions[-1]
        assert state is not None
        return state

    def layout(self, name: str) -> list[str]:
        """The columns the table's ``cluster_by``, ``sort_by`` or ``bloom_filter_columns`` names now."""
        names: list[str] = mt.open_table(self.uri).properties[name]
        return names

    def note(self, text: str) -> None:
        """Record a step before it runs (numbered with the version it would commit)."""
        self.steps.append(f"v{len(self.versions)}: {text}")

    def writer(self, rng: random.Random) -> Any:
        """The writer's handle, or now and then a fresh one (a new process's view); for a
        database's table also ``db.table`` and database transactions."""
        if self.database is not None and rng.random() < 0.5:
            return rng.choice([self.database.table("t"), ThroughDatabase(self, "t", rng)])
        return mt.open_table(self.uri) if rng.random() < 0.3 else self.table

    def other_rows(self, rng: random.Random) -> list[int]:
        """New keys for the database's other table (its rows are the change feed's too)."""
        ks = [self.next_id + i for i in range(rng.randint(1, 3))]
        self.next_id += len(ks)
        return ks

    def unchanged(self, info: Any) -> None:
        """Another table's commit (or a catalog change) made a database version at which this
        table is as it was."""
        assert info.committed and info.version == len(self.versions), \
            f"committed version {info.version}, expected {len(self.versions)}"
        self.versions.append(self.state)

    def new_rows(self, rng: random.Random, columns: tuple[Column, ...], count: int,
                 ids: list[int] | None = None) -> tuple[Any, list[int]]:
        if ids is None:
            ids = list(range(self.next_id, self.next_id + count))
            self.next_id += count
        uids = list(range(self.next_uid, self.next_uid + len(ids)))
        self.next_uid += len(ids)
        return random_rows(rng, list(columns), ids), uids

    def new_name(self, rng: random.Random, state: State) -> str:
        taken = {c.name.lower() for c in state.columns}
        self.names += 1
        free = [n for n in self.freed if n.lower() not in taken]
        if free and rng.random() < 0.3:
            return rng.choice(free)
        name = rng.choice(AWKWARD_NAMES) if rng.random() < 0.3 else f"n{self.names}"
        return name if name.lower() not in taken else f"n{self.names}"

    def committed(self, info: Any, state: State) -> None:
        """Move the model to ``state`` if ``info`` committed; a write that commits nothing must
        leave the rows as they were."""
        if info.committed:
            assert info.version == len(self.versions), \
                f"committed version {info.version}, expected {len(self.versions)}"
            self.versions.append(state)
        else:
            assert sorted(state.uids.to_pylist()) == sorted(self.state.uids.to_pylist()) and \
                state.schema == self.state.schema, "committed nothing, but the model expects a change"

    def commit(self, rng: random.Random, change: Change) -> None:
        self.note(change.text)
        info = change.run(self.writer(rng))
        check_metrics(info.metrics, change.metrics)
        self.committed(info, change.apply(self.state))


class ThroughDatabase:
    """A database's table whose writes are database transactions that also append rows to
    the table ``other``: what ``append``, ``delete``, ... and ``transaction()`` return is about
    this table (its manifest at the committed version), as a ``Table``'s would be. Anything
    else (``compact``, ``update_schema``) goes to a fresh ``db.table``."""

    def __init__(self, history: History, name: str, rng: random.Random) -> None:
        self.history, self.db, self.name, self.rng = history, history.database, name, rng

    def transaction(self) -> TableOfDatabaseTransaction:
        return TableOfDatabaseTransaction(self.history, self.name, self.rng)

    def _one(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        tx = self.transaction()
        try:
            getattr(tx, operation)(*args, **kwargs)
        except BaseException:
            tx.abort()
            raise
        return tx.commit()

    def __getattr__(self, name: str) -> Any:
        if name in ("append", "delete", "update", "upsert", "overwrite"):
            return lambda *args, **kwargs: self._one(name, *args, **kwargs)
        return getattr(self.db.table(self.name), name)


class TableOfDatabaseTransaction:
    """``db.transaction()`` seen as one table's transaction (the other table it writes,
    ``other``, gets new rows at commit, recorded in ``History.other``)."""

    def __init__(self, history: History, name: str, rng: random.Random) -> None:
        self.history, self.db, self.name, self.rng = history, history.database, name, rng
        self.tx = self.db.transaction()
        self.table = self.tx.table(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    def commit(self) -> Any:
        ks = [] if self.table.staging.changes.is_empty() else self.history.other_rows(self.rng)
        if ks:
            self.tx.table("other").append(pa.table({"k": ks}, schema=OTHER))
        info = self.tx.commit()
        if not info.committed:
            return info
        if ks:
            self.history.other[info.version] = ks
        return mt.CommitInfo.of(self.db.table(self.name).manifest(info.version))

    def abort(self) -> None:
        self.tx.abort()


def check_metrics(metrics: dict[str, int], expected: dict[str, int]) -> None:
    wrong = {k: metrics.get(k, 0) for k, v in expected.items() if metrics.get(k, 0) != v}
    assert not wrong, f"metrics say {wrong}, the model {expected}"


# --- planned writes ---------------------------------------------------------------------------
def plan_append(h: History, rng: random.Random, state: State, least: int = 0) -> Change:
    count = max(least, rng.choice([0, 1, 2, 5, 20, 60, 150]))
    rows, uids = h.new_rows(rng, state.columns, count)
    return Change(f"append {count} rows", lambda w: w.append(rows), lambda s: s.append(rows, uids),
                  {"rows_added": count}, count)


def plan_delete(h: History, rng: random.Random, state: State) -> Change:
    where = random_filter(rng, state.filter_columns())
    gone = frozenset(h.oracle.uids(state, where))
    return Change(f"delete where {where.ours}  (model: {len(gone)} rows)", lambda w: w.delete(where.ours),
                  lambda s: s.without(gone), {"rows_deleted": len(gone)}, len(gone), gone)


def update_value(rng: random.Random, column: Column) -> Any:
    """A value ``update`` takes as a literal: finite, microseconds at most."""
    values = [v for v in column.pool if not (isinstance(v, float) and (v != v or abs(v) == float("inf")))]
    if column.kind.literal is None or not values or (column.nullable and rng.random() < 0.2):
        return None
    value = rng.choice(values)
    return value.floor("us").to_pydatetime() if isinstance(value, pd.Timestamp) else value


def plan_update(h: History, rng: random.Random, state: State) -> Change:
    where = None if rng.random() < 0.15 else random_filter(rng, state.filter_columns())
    targets = [c for c in state.columns[1:] if c.kind.scalar and (c.nullable or c.kind.literal)]
    if not targets:
        return plan_append(h, rng, state)
    values = {c.name: update_value(rng, c) for c in rng.sample(targets, min(len(targets), rng.randint(1, 2)))}
    mask = h.oracle.mask(state, where)
    rows = new_values(state, mask, values)
    replaced = state.uids.filter(mask).to_pylist()
    gone = frozenset(replaced)
    uids = list(range(h.next_uid, h.next_uid + rows.num_rows))
    h.next_uid += rows.num_rows
    h.replaced_by.update(zip(uids, replaced))
    assignments = {name: lit(v) if v is not None else None for name, v in values.items()}
    text = f"update set {values} where {None if where is None else where.ours}  (model: {len(gone)} rows)"
    return Change(text, lambda w: w.update(assignments, None if where is None else where.ours),
                  lambda s: s.without(gone).append(rows, uids), {"rows_updated": len(gone)}, len(gone), gone)


def plan_upsert(h: History, rng: random.Random, state: State) -> Change:
    present = state.ids
    matched_ids = rng.sample(present, min(len(present), rng.randint(0, 4)))
    new_ids = list(range(h.next_id, h.next_id + rng.randint(0, 4)))
    h.next_id += len(new_ids)
    source, uids = h.new_rows(rng, state.columns, 0, matched_ids + new_ids)
    when_matched, when_not_matched = rng.choice(["update", "ignore"]), rng.choice(["insert", "ignore"])
    matched = set(matched_ids)
    gone = frozenset(u for u, i in zip(state.uids.to_pylist(), present) if i in matched) \
        if when_matched == "update" else frozenset()
    keep = [i in matched and when_matched == "update" or i not in matched and when_not_matched == "insert"
            for i in matched_ids + new_ids]
    added = source.filter(pa.array(keep, pa.bool_()))
    added_uids = [u for u, k in zip(uids, keep) if k]
    if when_matched == "update":
        target = dict(zip(present, state.uids.to_pylist()))
        h.replaced_by.update((u, target[i]) for u, i in zip(uids, matched_ids))
    updated = len(matched_ids) if when_matched == "update" else 0
    inserted = len(new_ids) if when_not_matched == "insert" else 0
    text = (f"upsert ids {matched_ids} (present) + {new_ids} (new) on id, when_matched={when_matched}, "
            f"when_not_matched={when_not_matched}")
    return Change(text, lambda w: w.upsert(source, ["id"], when_matched=when_matched,
                                           when_not_matched=when_not_matched),
                  lambda s: s.without(gone).append(added, added_uids),
                  {"rows_updated": updated, "rows_inserted": inserted}, (updated, inserted), gone)


def plan_overwrite(h: History, rng: random.Random, state: State) -> Change:
    """With a condition, every new row must satisfy it: when the oracle says some do not, the
    overwrite must be refused (changing nothing), and then goes through with
    ``require_match=False``."""
    where = None if rng.random() < 0.4 else random_filter(rng, state.filter_columns())
    gone = frozenset(h.oracle.uids(state, where))
    count = rng.choice([0, 3, 20])
    rows, uids = h.new_rows(rng, state.columns, count)
    fresh = State.empty(state.columns, state.format_version).append(rows, uids)
    outside = count - len(h.oracle.uids(fresh, where))
    text = (f"overwrite with {count} rows ({outside} outside the condition) where "
            f"{None if where is None else where.ours}  (model: {len(gone)} rows)")

    def run(w: Any) -> Any:
        condition = None if where is None else where.ours
        if not outside:
            return w.overwrite(rows, condition)
        with pytest.raises(InvalidArgumentError, match=f"^{outside} of the .* not satisfy"):
            w.overwrite(rows, condition)
        return w.overwrite(rows, condition, require_match=False)

    return Change(text, run, lambda s: s.without(gone).append(rows, uids),
                  {"rows_deleted": len(gone), "rows_added": count})


def plan_upsert_keys(h: History, rng: random.Random, state: State) -> Change:
    """An upsert of keys alone: the matches are deleted (``when_matched="delete"``), nothing
    is inserted."""
    present = state.ids
    keys = rng.sample(present, min(len(present), rng.randint(0, 4))) + [h.next_id + n for n in range(rng.randint(0, 2))]
    source = pa.table({"id": pa.array(keys, pa.int64())})
    wanted = set(keys)
    gone = frozenset(u for u, i in zip(state.uids.to_pylist(), present) if i in wanted)
    return Change(f"upsert keys {keys} on id, when_matched=delete", lambda w: w.upsert(
        source, ["id"], when_matched="delete", when_not_matched="ignore"), lambda s: s.without(gone),
        {"rows_deleted": len(gone)}, None, gone)


PLANS = [plan_append, plan_delete, plan_update, plan_upsert, plan_overwrite, plan_upsert_keys]


# --- steps ----------------------------------------------------------------------------------------
def step_write(plan: Callable[..., Change]) -> Callable[[History, random.Random], None]:
    def step(h: History, rng: random.Random) -> None:
        h.commit(rng, plan(h, rng, h.state))
    step.__name__ = plan.__name__.replace("plan_", "step_")
    return step


def step_compact(h: History, rng: random.Random) -> None:
    target, fraction = rng.choice([None, 1_000, 4_000, 30_000]), rng.choice([0, 0.05, 0.2, 0.5])
    clustered = f" (clustering by {h.layout('cluster_by')})" if h.layout("cluster_by") else ""
    h.note(f"compact(target_file_size={target}, min_deleted_fraction={fraction}){clustered}")
    h.committed(h.writer(rng).compact(target_file_size=target, min_deleted_fraction=fraction), h.state)


def step_purge(h: History, rng: random.Random) -> None:
    """A purge, with a condition now and then: the rows matching it go, and no live file of the
    new version holds a deleted row."""
    where = random_filter(rng, h.state.filter_columns()) if rng.random() < 0.6 else None
    gone = frozenset(h.oracle.uids(h.state, where)) if where is not None else frozenset()
    h.note(f"purge(where={None if where is None else where.ours})  (model: {len(gone)} rows)")
    info = h.writer(rng).purge(None if where is None else where.ours)
    if info.committed and where is not None:
        check_metrics(info.metrics, {"rows_deleted": len(gone)})
    h.committed(info, h.state.without(gone))
    held = [f.path for f in h.table.manifest().files if f.deleted_rows]
    assert not held, f"after purge, live files hold deleted rows: {held}"


def step_layout(h: History, rng: random.Random) -> None:
    """``cluster_by`` or ``sort_by`` set to columns that have an order, or
    ``bloom_filter_columns`` to columns bloom filters are kept for (or reset): later
    compactions cluster, later appends sort, later files keep bloom filters that filtered
    reads prune row groups by; no row changes."""
    name = rng.choice(["cluster_by", "sort_by", "bloom_filter_columns"])
    kept = probed_type if name == "bloom_filter_columns" else has_stats
    orderable = [c.name for c in h.state.columns if kept(c.type)]
    value = None if rng.random() < 0.2 else rng.sample(orderable, rng.randint(1, min(len(orderable), 3)))
    h.note(f"set_properties({{{name!r}: {value!r}}})")
    h.committed(h.writer(rng).set_properties({name: value}), h.state)
    assert h.layout(name) == (value or [])


def step_race_compaction(h: History, rng: random.Random) -> None:
    """A compaction (clustering, once ``cluster_by`` is set) plans and rewrites; a delete
    commits meanwhile; the compaction's commit carries the delete onto its outputs."""
    table = mt.open_table(h.uri)
    base, pointer = table.log.latest()
    groups = plan_compaction(base, rng.choice([1_000, 4_000, 30_000]), rng.choice([0, 0.2]))
    h.note(f"race: handle B rewrites {len(groups)} compaction groups "
           f"({sum(bool(g.order) for g in groups)} clustering) of version {base.version}")
    results = [rewrite_group(table, group, DeletionVectors(table.store)) for group in groups]
    h.commit(rng, plan_delete(h, rng, h.state))
    h.note("race: handle B commits its compaction (rebasing)")
    h.committed(commit_compaction(table, base, pointer, results, {}), h.state)


def step_transaction(h: History, rng: random.Random) -> None:
    """Two or three writes in one transaction, its own scans checked after each; sometimes
    aborted (nothing may commit)."""
    abort = rng.random() < 0.15
    both = h.database is not None and rng.random() < 0.5
    h.note(("database transaction (with an append to other)" if both else "transaction")
           + (" (aborted at the end)" if abort else ""))
    state = h.state
    outer = h.database.transaction() if both else h.writer(rng).transaction()
    tx = outer.table("t") if both else outer
    ks = h.other_rows(rng) if both else []
    try:
        if ks:
            outer.table("other").append(pa.table({"k": ks}, schema=OTHER))
        for _ in range(rng.randint(2, 3)):
            change = rng.choice(PLANS)(h, rng, state)
            h.note(f"  tx.{change.text}")
            returned = change.run(tx)
            assert change.returns is None or returned == change.returns, \
                f"the transaction returned {returned}, the model {change.returns}"
            state = change.apply(state)
            check_transaction_scan(h, rng, tx, state)
    except BaseException:
        outer.abort()
        raise
    if abort:
        outer.abort()
        assert h.table.version == len(h.versions) - 1, "an aborted transaction committed"
        return
    info = outer.commit()
    if ks and info.committed:
        h.other[info.version] = ks
    h.committed(info, state)


def check_transaction_scan(h: History, rng: random.Random, tx: Any, state: State) -> None:
    """The transaction's own scan, with a random filter (shrunk if it fails), and its count."""
    message = compare_count(tx.scan().count(), h.oracle.rows(state, None))
    assert message is None, f"transaction scan().count(): {message}"

    def fails(where: Text) -> str | None:
        return compare_own(tx.scan(where=where.ours).to_arrow(), h.oracle.rows(state, where))
    where = random_filter(rng, state.filter_columns())
    message = fails(where)
    if message is not None:
        where, message = shrink(where, message, fails)
        raise AssertionError(f"transaction scan where {where.ours}: {message}")


def step_race(h: History, rng: random.Random) -> None:
    """A second handle stages an append or a delete on the current version; the writer
    commits another write first; the second handle's commit must rebase onto it."""
    other = mt.open_table(h.uri).transaction()
    base = h.state
    loser = rng.choice([plan_append, plan_delete])(h, rng, base)
    h.note(f"race: handle B stages {loser.text}")
    loser.run(other)
    if rng.random() < 0.25:
        step_compact(h, rng)
    else:
        h.commit(rng, rng.choice([plan_append, plan_delete, plan_update, plan_upsert])(h, rng, base))
    h.note("race: handle B commits (rebasing)")
    info = other.commit()
    if loser.gone:
        check_metrics(info.metrics, {"rows_deleted": len(loser.gone & set(h.state.uids.to_pylist()))})
    h.committed(info, loser.apply(h.state))


def step_required_column(h: History, rng: random.Random) -> None:
    """Adding a NOT NULL column to an empty table while another handle appends must conflict
    (issue 18 item 4): otherwise the committed column holds nulls."""
    kind = rng.choice([k for k in h.kinds if k.scalar])
    column = kind.column(rng, h.new_name(rng, h.state), h.kinds)
    h.note(f"race: handle B adds NOT NULL column {column.name!r} {column.type} to the empty table while "
           "handle A appends (expect CommitConflictError)")
    try:
        with mt.open_table(h.uri).update_schema() as schema:
            schema.add_column(column.name, column.type, nullable=False)
            h.commit(rng, plan_append(h, rng, h.state, least=1))
    except CommitConflictError:
        return
    h.problems.append(f"add_column({column.name!r}, nullable=False) committed over a concurrent append: "
                      f"version {schema.result.version} holds nulls in a NOT NULL column")
    h.committed(schema.result, h.state.add_column(replace(column, nullable=False)))  # and go on


def step_evolve(h: History, rng: random.Random) -> None:
    state = h.state
    layout = set(h.layout("cluster_by") + h.layout("sort_by") + h.layout("bloom_filter_columns")) if is_v2(h) else set()
    freed: list[str] = []
    with h.writer(rng).update_schema() as schema:
        for _ in range(rng.randint(1, 3)):
            others = list(state.columns[1:])
            droppable = [c for c in others if c.name not in layout]  # a layout property names it
            widenable = [c for c in others if c.kind.widen(c.type)]
            choice = rng.choice(["add", "add"] + ["rename"] * bool(others) + ["drop"] * bool(droppable)
                                + ["widen"] * bool(widenable))
            if choice == "add":
                column = rng.choice(h.kinds).column(rng, h.new_name(rng, state), h.kinds)
                h.note(f"update_schema: add_column {column.name!r} {column.type}")
                schema.add_column(column.name, column.type)
                state = state.add_column(column)
            elif choice == "rename":
                old, new = rng.choice(others).name, h.new_name(rng, state)
                h.note(f"update_schema: rename_column {old!r} -> {new!r}")
                schema.rename_column(old, new)
                state = state.rename_column(old, new)
                freed.append(old)
                layout = {new if n == old else n for n in layout}
            elif choice == "drop":
                name = rng.choice(droppable).name
                h.note(f"update_schema: drop_column {name!r}")
                schema.drop_column(name)
                state = state.drop_column(name)
                freed.append(name)
            else:
                column = rng.choice(widenable)
                new_type = rng.choice(column.kind.widen(column.type))
                h.note(f"update_schema: widen {column.name!r} {column.type} -> {new_type}")
                schema.widen(column.name, new_type)
                state = state.widen(column.name, new_type)
    if schema.result is None:  # the changes undid each other (a column added, then dropped)
        assert state.schema == h.state.schema, "update_schema committed nothing, but the model expects a change"
        return
    h.committed(schema.result, state)
    if schema.result.committed:
        h.freed += freed


def step_append_merge(h: History, rng: random.Random) -> None:
    column = rng.choice(h.kinds).column(rng, h.new_name(rng, h.state), h.kinds)
    state = h.state.add_column(column)
    rows, uids = h.new_rows(rng, state.columns, rng.choice([0, 1, 10]))
    h.note(f"append {rows.num_rows} rows with a new column {column.name!r} {column.type} (schema_mode='merge')")
    h.committed(h.writer(rng).append(rows, schema_mode="merge"), state.append(rows, uids))


def step_upgrade(h: History, rng: random.Random) -> None:
    properties = rng.choice([None, TINY])
    h.note(f"upgrade(properties={properties})")
    h.committed(h.writer(rng).upgrade(properties=properties), h.state.upgraded())


def step_write_table(h: History, rng: random.Random) -> None:
    """``mt.write_table`` of an existing table: append, or overwrite every row."""
    mode = rng.choice(["append", "append", "overwrite"])
    count = rng.choice([0, 1, 20])
    rows, uids = h.new_rows(rng, h.state.columns, count)
    h.note(f"write_table(mode={mode!r}) of {count} rows")
    before = h.table.version
    table = mt.write_table(h.uri, rows, mode=mode)
    state = h.state.append(rows, uids) if mode == "append" else h.state.without(h.state.uids.to_pylist()).append(
        rows, uids)
    if table.version == before:
        h.committed(mt.CommitInfo(before, "", h.table.history(limit=1)[0].timestamp, None, committed=False), state)
    else:
        h.committed(table.history(limit=1)[0], state)


def step_other_table(h: History, rng: random.Random) -> None:
    """A database version that leaves the table as it is: another table written, or one
    created, renamed or dropped."""
    db = h.database
    scratch = sorted(set(db.tables()) - {"t", "other"})
    kind = rng.choice(["write", "create", "rename", "drop"])
    if kind in ("rename", "drop") and not scratch:
        kind = "create"
    h.note(f"database: {kind} another table")
    if kind == "write":
        ks = h.other_rows(rng)
        info = db.table("other").append(pa.table({"k": ks}, schema=OTHER))
        h.other[info.version] = ks
    elif kind == "create":
        h.names += 1
        db.create_table(f"s{h.names}", pa.schema([("n", pa.int64())]))
        info = db.history(limit=1)[0]
    elif kind == "rename":
        h.names += 1
        info = db.rename_table(scratch[0], f"s{h.names}")
    else:
        info = db.drop_table(scratch[0])
    h.unchanged(info)


def step_gc(h: History, rng: random.Random) -> None:
    keep = rng.randint(1, 4)
    h.note(f"gc(retain_versions={keep}, retain_for=None, grace=0)" + (" of the database" if h.database else ""))
    (h.database or h.table).gc(retain_versions=keep, retain_for=None, grace=timedelta(0), force=True)
    latest = len(h.versions) - 1
    for version in range(latest - keep + 1):
        h.versions[version] = None
        h.damaged.discard(version)  # expired now


def step_set_properties(h: History, rng: random.Random) -> None:
    """A property set (or reset): a commit that changes no row, then seen by a fresh handle.
    ``gc_grace`` of a database's table is its database's: a database version that leaves the
    table as it was."""
    name, value = rng.choice([("gc_grace", rng.choice(["6h", "2d", "90m", None])),
                              ("tail_limit", rng.choice([1, 2, 32])), ("deletes_limit", rng.choice([1, 2, 64]))])
    shown = "24h" if value is None else value
    if name == "gc_grace" and h.database is not None:
        h.note(f"database set_properties({{{name!r}: {value!r}}})")
        h.unchanged(h.database.set_properties({name: value}))
        assert mt.open_database(h.database.uri).properties[name] == shown
        return
    h.note(f"set_properties({{{name!r}: {value!r}}})")
    h.committed(h.writer(rng).set_properties({name: value}), h.state)
    assert mt.open_table(h.uri).properties[name] == shown


def step_repair(h: History, rng: random.Random) -> None:
    """A data file deleted by hand, then ``repair``: the rows of that file are lost, and every
    version that listed it reads as corrupt (the model stops reading them)."""
    victim = rng.choice(list(h.table.manifest().files)).path
    lost = [t.column("id") for f, t in h.table.scan(columns=["id"]).matching_rows() if f.path == victim]
    ids = pa.concat_arrays([c.combine_chunks() for c in lost]) if lost else pa.array([], pa.int64())
    h.note(f"delete {victim} by hand ({len(ids)} live rows), then repair()")
    listing = [v for v, state in enumerate(h.versions)  # the versions whose scans read the file
               if state is not None and state is not BEFORE and (entry := h.table.manifest(v).file_map().get(victim))
               and entry.live_rows]
    h.table.store.delete(victim)
    report = h.writer(rng).repair()
    assert [(f.path, f.rows) for f in report.lost] == [(victim, len(ids))], str(report)
    state = h.state
    for version in listing:
        h.versions[version] = None
        h.damaged.add(version)
    kept = pc.invert(pc.is_in(state.data["id"].combine_chunks(), ids.cast(state.data["id"].type)))
    h.committed(report.commit, state.keep(kept))
    h.repaired = len(h.versions) - 1


def has_rows(h: History) -> bool:
    return h.state.data.num_rows > 0


def is_v2(h: History) -> bool:
    return h.state.format_version == 2


Step = tuple[Callable[[History, random.Random], None], float, Callable[[History], bool]]
"""A kind of step, its weight, and when it may run."""
STEPS: list[Step] = [
    (step_write(plan_append), 6, lambda h: True),
    (step_write(plan_delete), 3, has_rows),
    (step_write(plan_update), 2, has_rows),
    (step_write(plan_upsert), 2, lambda h: True),
    (step_write(plan_overwrite), 1, lambda h: True),
    (step_write(plan_upsert_keys), 1, has_rows),
    (step_write_table, 1, lambda h: True),
    (step_other_table, 2, lambda h: h.database is not None),
    (step_compact, 2, has_rows),
    (step_purge, 1, has_rows),
    (step_layout, 1, is_v2),
    (step_race_compaction, 0.7, has_rows),
    (step_transaction, 2, lambda h: True),
    (step_race, 1, lambda h: True),
    (step_evolve, 2, is_v2),
    (step_append_merge, 1, is_v2),
    (step_upgrade, 2, lambda h: not is_v2(h)),
    (step_required_column, 3, lambda h: is_v2(h) and not has_rows(h)),
    (step_gc, 0.3, lambda h: len(h.versions) > 5),
    (step_set_properties, 0.5, is_v2),
    (step_repair, 0.3, lambda h: h.state.data.num_rows > 0),
]


def run_history(h: History, rng: random.Random, length: int, choices: Iterable[Step] = STEPS) -> None:
    """``length`` random steps of ``choices``; the first exception (a library error or a check
    failing) ends the history and propagates, with ``h.steps`` saying what was done."""
    choices = list(choices)
    for _ in range(length):
        steps = [(step, weight) for step, weight, allowed in choices if allowed(h)]
        step = rng.choices([s for s, _ in steps], [w for _, w in steps])[0]
        noted = len(h.steps)
        try:
            step(h, rng)
        except Exception:
            if len(h.steps) == noted:
                h.note(f"({step.__name__}, failed while planning)")
            raise

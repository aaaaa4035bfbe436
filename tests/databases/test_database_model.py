"""A stateful model test of databases (issue 28): random histories of catalog changes (create,
drop, rename, chains, swaps and collisions, also inside transactions that write), appends,
deletes, updates, upserts (keys-only deletes included), overwrites, schema changes,
compaction, gc, snapshots and time travel, through fresh handles, handles held across renames
and drops, and transactions, checked after every step against the pure-Python model of
tests/database_model.py: the catalog, every table's rows (latest in full, every retained
version by count and in full after gc and at the end), ``history()``, and what gc deleted
(nothing a retained version needs, every object of a table no retained version holds).

Hypothesis shrinks a failure to a short sequence of rules and prints it as a reproducible
program. Environment (optional): ``MT_DB_MODEL_EXAMPLES`` (default 60) histories of up to
``MT_DB_MODEL_STEPS`` (default 40) steps; ``MT_DB_MODEL_SECONDS``: keep running new histories
until that many seconds have passed (a soak). The run's size (histories, steps,
transactions, catalog changes, commits) is printed (``-s``)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import manifest_table as mt
from manifest_table.errors import (
    CommitConflictError,
    InvalidArgumentError,
    TableNotFoundError,
    TableRenamedError,
    VersionExpiredError,
    VersionNotFoundError,
)
from manifest_table.format.database import table_prefix
from manifest_table.storage import MemoryStore
from tests import database_model as model
from tests.database_model import StagedTransaction, TableState, Version

EXAMPLES = int(os.environ.get("MT_DB_MODEL_EXAMPLES", "60"))
STEPS = int(os.environ.get("MT_DB_MODEL_STEPS", "40"))
SECONDS = float(os.environ.get("MT_DB_MODEL_SECONDS", "0"))

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
NAMES = st.sampled_from(["a", "b", "c", "tmp"])
"""Few names, so that renames chain, swap and collide."""
VALUES = st.sampled_from(["x", "y", None])
ROWS = st.lists(st.tuples(st.integers(0, 20), VALUES), max_size=6)
CONDITIONS = st.one_of(
    st.builds(lambda x: (f"k < {x}", lambda k, v: k < x), st.integers(0, 20)),
    st.builds(lambda x: (f"k = {x}", lambda k, v: k == x), st.integers(0, 20)),
    st.builds(lambda s: (f"v = '{s}'", lambda k, v: v == s), st.sampled_from(["x", "y"])),
    st.just(("v IS NULL", lambda k, v: v is None)),
)
LATER = timedelta(minutes=5)
"""gc runs as if this much later, with no grace: every unreferenced object is old enough."""
SIZE: Counter[str] = Counter()


def table_of(rows: list[tuple[int, Any]], state: TableState | None = None) -> pa.Table:
    """``(k, v)`` rows as the table's columns (its extra ones null)."""
    extras = () if state is None else state.extras
    data = pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=SCHEMA)
    for name in extras:
        data = data.append_column(name, pa.nulls(len(rows), pa.int64()))
    return data


def keys_of(rows: list[tuple[int, Any]]) -> pa.Table:
    return pa.table({"k": pa.array([r[0] for r in rows], pa.int64())})


def read(table: mt.Table, **scan: Any) -> tuple[list[str], Counter]:
    data = table.scan(**scan).to_arrow()
    return data.schema.names, Counter(tuple(row.values()) for row in data.to_pylist())


@contextmanager
def raises(error: type[Exception] | None) -> Iterator[None]:
    """Expect exactly ``error`` (not a subclass: a dropped table's handle must not say
    "renamed"), or nothing."""
    if error is None:
        yield
        return
    with pytest.raises(error) as raised:
        yield
    assert type(raised.value) is error, f"raised {type(raised.value).__name__}, the model {error.__name__}"


class DatabaseModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.db = mt.create_database("mem://db", store=self.store, target_file_size=1_500, row_group_size=64)
        self.versions: list[Version | None] = [Version({})]
        """Index: database version; None once gc expired it."""
        self.tokens = 0
        self.ids: dict[int, str] = {}
        """Model token -> the library's table id."""
        self.born: dict[int, int] = {}
        """Model token -> the version that created its table."""
        self.batches: dict[int, int] = {}
        """Model token -> the last streaming batch committed to its table."""
        self.held: list[tuple[mt.Table, str, int]] = []
        """Long-lived handles: (handle, the name it was opened by, its table's token)."""
        self.checked = 0
        SIZE["histories"] += 1

    # --- the model ----------------------------------------------------------------------------
    @property
    def latest(self) -> Version:
        version = self.versions[-1]
        assert version is not None
        return version

    def new_token(self) -> int:
        self.tokens += 1
        return self.tokens

    def committed(self, info: mt.CommitInfo, version: Version | None, may_commit: bool = False) -> None:
        """The library's commit ``info`` against the model's next ``version`` (None: nothing
        to commit). ``may_commit``: the operation may commit without changing any row
        (an overwrite or compaction rewrites files), or not."""
        if version is None:
            assert not info.committed, f"committed version {info.version}, the model expects no commit"
            return
        if not info.committed:
            assert may_commit and dict(version.tables) == dict(self.latest.tables), "the model expects a commit"
            return
        assert info.version == len(self.versions), f"committed version {info.version}, expected {len(self.versions)}"
        self.versions.append(version)
        SIZE["commits"] += 1
        for token in {s.token for s in version.tables.values()} - set(self.ids):
            name = version.name_of(token)
            assert name is not None
            self.ids[token] = self.db.snapshot(version=info.version).table(name).table_id
            self.born[token] = info.version

    def one_table(self, name: str, state: TableState, changed: bool = True) -> Version:
        return Version({**self.latest.tables, name: state}, frozenset({name}) if changed else frozenset())

    def some_version(self, data: st.DataObject) -> int:
        """A version, retained or not. Drawn independently of how many there are: compaction
        may commit or not (its plan depends on the random names of files), and what is drawn
        must not depend on that."""
        return data.draw(st.integers(0, 1000)) % len(self.versions)

    def retained(self) -> list[int]:
        return [v for v, version in enumerate(self.versions) if version is not None]

    # --- catalog ------------------------------------------------------------------------------
    @rule(name=NAMES)
    def create_table(self, name: str) -> None:
        SIZE["catalog changes"] += 1
        staged = StagedTransaction(self.latest, self.new_token)
        error = staged.create(name)
        with raises(error):
            self.db.create_table(name, SCHEMA)
        if error is None:
            self.committed(self.db.history(limit=1)[0], staged.result())

    @rule(name=NAMES)
    def drop_table(self, name: str) -> None:
        SIZE["catalog changes"] += 1
        staged = StagedTransaction(self.latest, self.new_token)
        error = staged.drop(name)
        with raises(error):
            self.committed(self.db.drop_table(name), staged.result())

    @rule(old=NAMES, new=NAMES)
    def rename_table(self, old: str, new: str) -> None:
        SIZE["catalog changes"] += 1
        staged = StagedTransaction(self.latest, self.new_token)
        error = staged.rename(old, new)
        with raises(error):
            self.committed(self.db.rename_table(old, new), staged.result())

    # --- writes through a handle ---------------------------------------------------------------
    def handle(self, data: st.DataObject) -> tuple[mt.Table, str, int] | None:
        """A fresh handle on a table of the latest version, or a held one (whatever became
        of its table); None when there is neither."""
        choices = [("fresh", name) for name in self.latest.tables] + [("held", i) for i in range(len(self.held))]
        if not choices:
            return None
        kind, which = data.draw(st.sampled_from(choices))
        if kind == "held":
            return self.held[which]  # type: ignore[index]
        return self.db.table(which), which, self.latest.tables[which].token  # type: ignore[index]

    def write(self, data: st.DataObject, run: Any, change: Any, may_commit: bool = False) -> None:
        """``run(table)`` against ``change(state) -> (state, staged)`` through a handle: a
        handle whose table was renamed refuses (``TableRenamedError``), one whose table was
        dropped finds none."""
        chosen = self.handle(data)
        if chosen is None:
            return
        table, name, token = chosen
        now = self.latest.name_of(token)
        error = TableNotFoundError if now is None else TableRenamedError if now != name else None
        with raises(error):
            info = run(table, None if now is None else self.latest.tables[now])
        if error is None:
            state, staged = change(self.latest.tables[name])
            self.committed(info, self.one_table(name, state) if staged else None, may_commit)

    @rule(data=st.data(), rows=ROWS)
    def append(self, data: st.DataObject, rows: list) -> None:
        self.write(data, lambda t, s: t.append(table_of(rows, s)), lambda s: model.append(s, rows))

    @rule(data=st.data(), condition=CONDITIONS)
    def delete(self, data: st.DataObject, condition: Any) -> None:
        self.write(data, lambda t, s: t.delete(condition[0]), lambda s: model.delete(s, condition))

    @rule(data=st.data(), condition=CONDITIONS, value=VALUES)
    def update(self, data: st.DataObject, condition: Any, value: Any) -> None:
        self.write(data, lambda t, s: t.update(values={"v": value}, where=condition[0]),
                   lambda s: model.update(s, condition, value))

    @rule(data=st.data(), source=st.lists(st.tuples(st.integers(0, 20), VALUES), max_size=5, unique_by=lambda r: r[0]),
          matched=st.sampled_from(["update", "ignore", "delete"]), not_matched=st.sampled_from(["insert", "ignore"]))
    def upsert(self, data: st.DataObject, source: list, matched: str, not_matched: str) -> None:
        if matched == "delete":  # a source of keys alone
            self.write(data, lambda t, s: t.upsert(keys_of(source), on=["k"], when_matched="delete",
                                                when_not_matched="ignore"),
                       lambda s: model.upsert(s, source, "delete", "ignore"))
        else:
            self.write(data, lambda t, s: t.upsert(table_of(source, s), on=["k"], when_matched=matched,
                                                when_not_matched=not_matched),
                       lambda s: model.upsert(s, source, matched, not_matched))

    @rule(data=st.data(), rows=ROWS, condition=st.one_of(st.none(), CONDITIONS), require_match=st.booleans())
    def overwrite(self, data: st.DataObject, rows: list, condition: Any, require_match: bool) -> None:
        """New rows outside the condition are refused unless ``require_match=False`` (which
        keeps them beside the rows outside the condition)."""
        where = None if condition is None else condition[0]
        if require_match and condition is not None and not all(condition[1](k, v) for k, v in rows):
            chosen = self.handle(data)
            if chosen is not None and self.latest.name_of(chosen[2]) == chosen[1]:
                table, name, _ = chosen
                with raises(InvalidArgumentError):
                    table.overwrite(table_of(rows, self.latest.tables[name]), where)
            return
        self.write(data, lambda t, s: t.overwrite(table_of(rows, s), where, require_match=require_match),
                   lambda s: (model.overwrite(s, rows, condition), True), may_commit=True)

    @rule(data=st.data(), change=st.sampled_from(["add", "rename", "drop"]))
    def change_schema(self, data: st.DataObject, change: str) -> None:
        chosen = self.handle(data)
        if chosen is None or self.latest.name_of(chosen[2]) != chosen[1]:
            return
        table, name, _ = chosen
        state = self.latest.tables[name]
        if change != "add" and not state.extras:
            change = "add"
        fresh = f"x{self.new_token()}"
        with table.update_schema() as schema:
            if change == "add":
                schema.add_column(fresh, pa.int64())
                state = model.add_column(state, fresh)
            elif change == "rename":
                schema.rename_column(state.extras[0], fresh)
                state = model.rename_column(state, state.extras[0], fresh)
            else:
                schema.drop_column(state.extras[-1])
                state = model.drop_column(state, state.extras[-1])
        self.committed(schema.result, self.one_table(name, state))

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        chosen = self.handle(data)
        if chosen is not None and self.latest.name_of(chosen[2]) == chosen[1]:
            state = self.latest.tables[chosen[1]]
            info = chosen[0].compact(target_file_size=4_000, min_deleted_fraction=0.1)
            self.committed(info, self.one_table(chosen[1], state), may_commit=True)

    @precondition(lambda self: self.latest.tables)
    @rule(data=st.data(), rows=ROWS, replay=st.booleans(), both=st.booleans())
    def stream(self, data: st.DataObject, rows: list, replay: bool, both: bool) -> None:
        """A streaming batch (``set_app_transaction``) appended to one table or two in one
        database transaction: a batch already committed (replayed) commits nothing."""
        names = data.draw(st.lists(st.sampled_from(sorted(self.latest.tables)), min_size=1, max_size=1 + both,
                                   unique=True))
        tokens = [self.latest.tables[n].token for n in names]
        done = max(self.batches.get(t, -1) for t in tokens)
        batch = max(0, done - data.draw(st.integers(0, 2))) if replay else done + 1
        tx = self.db.transaction()
        staged = StagedTransaction(self.latest, self.new_token)
        for name in names:
            tx.table(name).set_app_transaction("stream", batch)
            tx.table(name).append(table_of(rows, self.latest.tables[name]))
            staged.written.add(self.latest.tables[name].token)  # a batch is a change, even without rows
            staged.write(name, lambda s: model.append(s, rows))
        info = tx.commit()
        if batch <= done and any(self.batches.get(t, -1) >= batch for t in tokens):
            assert not info.committed and self.db.version == len(self.versions) - 1
            return
        self.committed(info, staged.result())
        self.batches.update({t: batch for t in tokens})

    # --- handles -------------------------------------------------------------------------------
    @precondition(lambda self: self.latest.tables and len(self.held) < 4)
    @rule(data=st.data())
    def hold(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.latest.tables)))
        self.held.append((self.db.table(name), name, self.latest.tables[name].token))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def read_held(self, data: st.DataObject) -> None:
        """A held handle reads its table, whatever it is named now; time travel by id."""
        table, _, token = data.draw(st.sampled_from(self.held))
        now = self.latest.name_of(token)
        if now is None:
            with pytest.raises(TableNotFoundError):
                table.to_arrow()
        else:
            state = self.latest.tables[now]
            assert read(table) == (state.columns, state.counter())
        version = self.some_version(data)
        at = self.versions[version]
        held_then = None if at is None else at.name_of(token)
        if at is None:
            error: type[Exception] | None = VersionExpiredError
        elif held_then is None:  # before the table was created, or after it was dropped
            error = VersionNotFoundError if version < self.born[token] else TableNotFoundError
        else:
            error = None
        with raises(error):
            names, rows = read(table, version=version)
        if error is None:
            state = at.tables[held_then]  # type: ignore[union-attr, index]
            assert (names, rows) == (state.columns, state.counter())

    # --- transactions ----------------------------------------------------------------------------
    @rule(data=st.data(), steps=st.integers(1, 5), abort=st.integers(0, 9).map(lambda n: n == 0))
    def transaction(self, data: st.DataObject, steps: int, abort: bool) -> None:
        """Catalog changes and writes in one commit, each step checked as it is staged; one
        in ten aborted (nothing commits)."""
        SIZE["transactions"] += 1
        staged = StagedTransaction(self.latest, self.new_token)
        tx = self.db.transaction()
        for _ in range(steps):
            self._transaction_step(data, staged, tx)
        if abort:
            tx.abort()
            assert self.db.version == len(self.versions) - 1
            return
        self.committed(tx.commit(), staged.result())

    def _transaction_step(self, data: st.DataObject, staged: StagedTransaction, tx: mt.DatabaseTransaction) -> None:
        kind = data.draw(st.sampled_from(["create", "drop", "rename", "swap", "append", "delete", "update", "read"]))
        name, other = data.draw(NAMES), data.draw(NAMES)
        if kind in ("create", "drop", "rename", "swap"):
            SIZE["catalog changes"] += 1
        if kind == "create":
            with raises(staged.create(name)):
                tx.create_table(name, SCHEMA)
        elif kind == "drop":
            with raises(staged.drop(name)):
                tx.drop_table(name)
        elif kind == "rename":
            with raises(staged.rename(name, other)):
                tx.rename_table(name, other)
        elif kind == "swap":  # a -> tmp2, b -> a, tmp2 -> b, each step checked
            for old, new in ((name, "tmp2"), (other, name), ("tmp2", other)):
                with raises(staged.rename(old, new)):
                    tx.rename_table(old, new)
        elif kind == "read":
            error = None if name in staged.names else TableNotFoundError
            with raises(error):
                assert read(tx.table(name)) == (staged.state(name).columns, staged.state(name).counter())
        else:
            rows, condition, value = data.draw(ROWS), data.draw(CONDITIONS), data.draw(VALUES)
            run, change = {
                "append": (lambda t: t.append(table_of(rows, staged.state(name))), lambda s: model.append(s, rows)),
                "delete": (lambda t: t.delete(condition[0]), lambda s: model.delete(s, condition)),
                "update": (lambda t: t.update(values={"v": value}, where=condition[0]),
                           lambda s: model.update(s, condition, value)),
            }[kind]
            with raises(staged.write(name, change)):
                run(tx.table(name))

    @precondition(lambda self: self.latest.tables)
    @rule(data=st.data(), rows=ROWS, concurrent=st.sampled_from(["append", "other", "rename", "drop", "create"]))
    def race(self, data: st.DataObject, rows: list, concurrent: str) -> None:
        """A transaction stages an append to a table (and creates ``tmp``, if free); another
        handle commits first: an append to the table or a change to another rebases; a
        rename or a drop of the table it writes, or a create of the name it creates,
        conflicts and nothing of it is committed."""
        name = data.draw(st.sampled_from(sorted(self.latest.tables)))
        creates = "tmp" not in self.latest.tables
        tx = self.db.transaction()
        tx.table(name).append(table_of(rows, self.latest.tables[name]))
        if creates:
            tx.create_table("tmp", SCHEMA)
        if concurrent == "rename" and "moved" in self.latest.tables or concurrent == "create" and not creates:
            concurrent = "drop"
        other = mt.open_database("mem://db", store=self.store)
        first = StagedTransaction(self.latest, self.new_token)
        if concurrent == "append":
            first.write(name, lambda s: model.append(s, [(99, "z")]))
            self.committed(other.table(name).append(table_of([(99, "z")], self.latest.tables[name])), first.result())
        elif concurrent == "other":
            error = first.create("other")
            with raises(error):
                other.create_table("other", SCHEMA)
            if error is None:
                self.committed(other.history(limit=1)[0], first.result())
        elif concurrent == "rename":
            first.rename(name, "moved")
            self.committed(other.rename_table(name, "moved"), first.result())
        elif concurrent == "drop":
            first.drop(name)
            self.committed(other.drop_table(name), first.result())
        else:
            first.create("tmp")
            other.create_table("tmp", SCHEMA)
            self.committed(other.history(limit=1)[0], first.result())
        if concurrent in ("rename", "drop") and rows or concurrent == "create":
            with raises(CommitConflictError):
                tx.commit()
            return
        rebased = StagedTransaction(self.latest, self.new_token)
        if name in rebased.names:
            rebased.write(name, lambda s: model.append(s, rows))
        if creates:
            rebased.create("tmp")
        self.committed(tx.commit(), rebased.result())

    # --- maintenance, snapshots ----------------------------------------------------------------
    @rule(keep=st.integers(1, 4))
    def gc(self, keep: int) -> None:
        if len(self.retained()) <= keep:
            return
        SIZE["gc"] += 1
        self.db.gc(retain_versions=keep, retain_for=None, grace=timedelta(0), force=True, now=datetime.now(UTC) + LATER)
        for version in range(len(self.versions) - keep):
            self.versions[version] = None
        self.check_every_retained_version(full=True)
        kept = {s.token for v in self.retained() for s in self.versions[v].tables.values()}  # type: ignore[union-attr]
        for token, table_id in self.ids.items():
            left = list(self.store.list(table_prefix(table_id)))
            if token not in kept:
                assert not left, f"gc left {len(left)} objects of table {table_id}, which no retained version holds"

    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        version = self.some_version(data)
        expected = self.versions[version]
        if expected is None:
            with pytest.raises(VersionExpiredError):
                self.db.snapshot(version=version)
            return
        snapshot = self.db.snapshot(version=version)
        assert snapshot.tables() == sorted(expected.tables)
        for name, state in expected.tables.items():
            assert read(snapshot.table(name)) == (state.columns, state.counter()), (version, name)
        when = next(h.timestamp for h in self.db.history() if h.version == version)
        assert self.db.tables(as_of=when) == sorted(expected.tables)

    # --- after every step ------------------------------------------------------------------------
    @invariant()
    def matches_the_model(self) -> None:
        SIZE["steps"] += 1
        latest = self.latest
        assert self.db.version == len(self.versions) - 1
        assert self.db.tables() == sorted(latest.tables)
        for name, state in latest.tables.items():
            table = self.db.table(name)
            assert read(table) == (state.columns, state.counter()), name
            history = [h.version for h in table.history()]
            assert history == [v for v in reversed(self.retained()) if self._changed(v, state.token)], name
        self.check_history()
        self.check_every_retained_version(full=False)

    def _changed(self, version: int, token: int) -> bool:
        at = self.versions[version]
        name = None if at is None else at.name_of(token)
        return at is not None and name is not None and name in at.changed

    def check_history(self) -> None:
        history = self.db.history()
        assert [h.version for h in history] == list(reversed(self.retained()))
        for info in history[:3]:
            expected = self.versions[info.version]
            assert expected is not None
            if info.version == 0:
                continue
            parameters = info.parameters
            assert set(parameters["tables"]) == set(expected.changed), (info.version, parameters)
            assert set(parameters["created"]) == set(expected.created), (info.version, parameters)
            assert set(parameters["dropped"]) == set(expected.dropped), (info.version, parameters)
            assert parameters["renamed"] == dict(expected.renamed), (info.version, parameters)

    def check_every_retained_version(self, full: bool) -> None:
        """Every retained version's catalog and row counts (``full``: rows and columns)."""
        for version in self.retained():
            expected = self.versions[version]
            assert expected is not None
            assert self.db.tables(version=version) == sorted(expected.tables), version
            if full or version > self.checked:
                snapshot = self.db.snapshot(version=version)
                for name, state in expected.tables.items():
                    assert read(snapshot.table(name)) == (state.columns, state.counter()), (version, name)
        self.checked = len(self.versions) - 1

    def teardown(self) -> None:
        self.check_every_retained_version(full=True)


@pytest.mark.timeout(600 + int(SECONDS) * 2)  # a soak outlives the suite's 10 minutes per test
def test_database_model() -> None:
    run = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    started = time.monotonic()
    SIZE.clear()
    run_state_machine_as_test(DatabaseModel, settings=run)
    while time.monotonic() - started < SECONDS:
        run_state_machine_as_test(DatabaseModel, settings=run)
    print(f"database model: {SIZE['histories']} histories, {SIZE['steps']} steps, {SIZE['transactions']} "
          f"transactions, {SIZE['catalog changes']} catalog changes, {SIZE['commits']} commits, {SIZE['gc']} gc, "
          f"{time.monotonic() - started:.0f} s")

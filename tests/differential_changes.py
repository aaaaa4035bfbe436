"""The change feed against the model (issue 33): after a random history, ``changes(start,
end)`` between retained versions must equal the model's row-level difference of each commit
in the range, read as the end version's columns.

The model's difference of commit v: the row versions (uids) of v-1 that v lacks are
deleted, those of v that v-1 lacks inserted; a deleted row and an inserted one form an update
pair when the inserted one replaced it (``History.replaced_by``), directly or through row
versions the commit made and replaced again (a transaction updating a row twice). Rows are
presented as the end version presents them: columns followed by their model identity through
renames and widenings, null where a column did not exist yet. A filter keeps the changes of
the filtered table: of a pair whose one row matches, that row alone, as a delete or an insert.
The feed's rows are also checked for their order: commits in order; within one, deletes,
then pairs (each pre-image right before its post-image), then inserts.

Ranges per case: (oldest retained, latest), and ``MT_DIFF_CHANGES`` (default 4) more drawn
at random, some with a random filter and projection (``all``: every pair of retained
versions); one commit alone through ``ChangeFeed.commit``; for a database's table, the
database's feed over (oldest retained, latest), whose rows of the other table are its
appends; and a start that GC removed, which must name the oldest retained version."""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import manifest_table as mt
from tests.differential_history import History
from tests.differential_model import Oracle, State, stored
from tests.differential_reads import Failure, canonical, difference, in_utc, shorter
from tests.filter_generator import Text, random_filter

PAIRS = os.environ.get("MT_DIFF_CHANGES", "4")
RANK = {"delete": 0, "update_preimage": 1, "update_postimage": 1, "insert": 2}


def check_changes(h: History, rng: random.Random) -> tuple[list[Failure], int]:
    """Every failure of the feed of the history's table (and of its database's feed), and how
    many feeds were read."""
    versions = h.versions
    # From the last repair on: the lost file's rows are gone, so no feed reads across it.
    retained = [v for v, s in enumerate(versions) if s is not None and v >= max(h.first, h.repaired)]
    if not retained:
        return [], 0
    model = _Model(versions, h.replaced_by, h.oracle)
    latest, table = retained[-1], mt.open_table(h.uri)
    every = [(s, e) for s in retained for e in retained if s <= e]
    ranges = [(retained[0], latest)]
    ranges += every if PAIRS == "all" else rng.sample(every, min(len(every), int(PAIRS)))
    failures = []
    for start, end in ranges:
        last = versions[end]
        assert last is not None
        where = random_filter(rng, last.filter_columns()) if rng.random() < 0.4 else None
        columns = _projection(rng, last) if rng.random() < 0.4 else None
        name = f"changes({start}, {end}, columns={columns}, where={where.ours if where else None})"
        message = _message(lambda: table.changes(start, end, columns=columns, where=where.ours if where else None),
                           model.expected(start, end, where, columns), last, columns)
        if message is not None:
            failures.append(Failure(name, message))
    feeds = len(ranges)
    if len(retained) > 1:
        v = rng.choice(retained[1:])
        message = _message(lambda: _Commit(table.changes(retained[0], latest), v),
                           model.expected(v - 1, v, presented=latest), versions[latest], None)  # type: ignore[arg-type]
        if message is not None:
            failures.append(Failure(f"changes({retained[0]}, {latest}).commit({v})", message))
        feeds += 1
    if h.database is not None:
        failures += _database(h, model, retained[0], latest)
        feeds += 1
    expired = [v for v, s in enumerate(versions) if s is None and v >= h.first and v not in h.damaged]
    if expired:
        oldest = min(v for v, s in enumerate(versions) if (s is not None or v in h.damaged) and v >= h.first)
        failures += _expired(table, rng.choice(expired), oldest)
        feeds += 1
    return failures, feeds


def _database(h: History, model: _Model, start: int, end: int) -> list[Failure]:
    """``Database.changes``: table t's rows as its own feed's, the other table's appends."""
    name = f"database changes({start}, {end})"
    last = h.versions[end]
    assert last is not None
    try:
        batches = list(mt.open_database(h.database.uri).changes(start, end))
        ours = [b.drop_columns(["_table"]) for b in batches if b.column("_table")[0].as_py() == "t"]
        others = [b for b in batches if b.column("_table")[0].as_py() == "other"]
        actual = _feed_rows(pa.Table.from_batches(ours), last.schema.names) if ours else Counter()
        other = Counter((kind, v, (k,)) for b in others
                        for kind, v, k in zip(*(b.column(c).to_pylist() for c in ("_change_type", "_commit_version",
                                                                                    "k"))))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:
        return [Failure(name, f"raised {type(error).__name__}: {shorter(str(error))}")]
    if isinstance(actual, str):
        return [Failure(name, actual)]
    failures = []
    message = difference(actual, model.expected(start, end))
    if message is not None:
        failures.append(Failure(f"{name}, table t", message))
    expected = Counter(("insert", v, (k,)) for v, ks in h.other.items() if start < v <= end for k in ks)
    message = difference(other, expected)
    if message is not None:
        failures.append(Failure(f"{name}, table other", message))
    return failures


class _Model:
    def __init__(self, versions: list[State | None], replaced_by: dict[int, int], oracle: Oracle) -> None:
        self.versions, self.replaced_by, self.oracle = versions, replaced_by, oracle

    def expected(self, start: int, end: int, where: Text | None = None, columns: list[str] | None = None,
                 presented: int | None = None) -> Counter:
        """The changes of (start, end] as version ``presented`` (default: ``end``) shows rows."""
        last = self.versions[end if presented is None else presented]
        assert last is not None
        found: Counter = Counter()
        for v in range(start + 1, end + 1):
            before, after = self.versions[v - 1], self.versions[v]
            assert before is not None and after is not None
            old, new = set(before.uids.to_pylist()), set(after.uids.to_pylist())
            pairs = {p: u for u in new - old if (p := self._replaced(u, old)) is not None and p not in new}
            deleted = self._rows(before, sorted(old - new), last, where, columns)
            inserted = self._rows(after, sorted(new - old), last, where, columns)
            for p, u in pairs.items():
                pre, post = deleted.pop(p), inserted.pop(u)
                if pre is not None and post is not None:
                    found[("pair", v, pre, post)] += 1
                elif pre is not None:
                    found[("delete", v, pre)] += 1
                elif post is not None:
                    found[("insert", v, post)] += 1
            found.update(("delete", v, row) for row in deleted.values() if row is not None)
            found.update(("insert", v, row) for row in inserted.values() if row is not None)
        return found

    def _replaced(self, uid: int, old: set[int]) -> int | None:
        """The row version of the parent that ``uid`` replaced, through versions made since."""
        p = self.replaced_by.get(uid)
        while p is not None and p not in old:
            p = self.replaced_by.get(p)
        return p

    def _rows(self, state: State, uids: list[int], last: State, where: Text | None,
              columns: list[str] | None) -> dict[int, tuple | None]:
        """uid -> its row as ``last`` presents it (None: the filter drops it)."""
        mask = pc.is_in(state.uids, pa.array(uids, pa.int64()))
        data, kept = state.data.filter(mask), state.uids.filter(mask)
        names = {c.ident: c.name for c in state.columns}
        arrays = [data.column(names[c.ident]).cast(c.type) if c.ident in names else pa.nulls(len(kept), c.type)
                  for c in last.columns]
        presented = State(pa.Table.from_arrays(arrays, schema=stored(last.columns)), kept, last.columns,
                          last.format_version)
        matching = self.oracle.mask(presented, where).to_pylist()
        rows = _canonical_rows(presented.data.select(columns if columns is not None else last.schema.names))
        return {u: row if m else None for u, row, m in zip(kept.to_pylist(), rows, matching)}


class _Commit:
    """One commit of a feed, as a feed (what ``_message`` reads)."""

    def __init__(self, feed: mt.ChangeFeed, version: int) -> None:
        self.schema, self._commit = feed.schema, feed.commit(version)

    def to_arrow(self) -> pa.Table:
        return self._commit.to_arrow()


def _message(read: Any, expected: Counter, last: State, columns: list[str] | None) -> str | None:
    try:
        feed = read()
        names = columns if columns is not None else last.schema.names
        wanted = pa.schema([last.schema.field(n) for n in names])
        got = pa.schema(list(feed.schema)[: len(names)])
        if not got.equals(wanted):
            return f"schema {got}, the model {wanted}"
        actual = _feed_rows(feed.to_arrow(), names)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:
        return f"raised {type(error).__name__}: {shorter(str(error))}"
    if isinstance(actual, str):
        return actual
    return difference(actual, expected)


def _feed_rows(table: pa.Table, names: list[str]) -> Counter | str:
    """The feed's rows as the model counts them, or what is wrong with their order."""
    kinds = table.column("_change_type").to_pylist()
    versions = table.column("_commit_version").to_pylist()
    rows = _canonical_rows(table.select(names))
    found: Counter = Counter()
    i = 0
    while i < len(rows):
        if i and (versions[i - 1], RANK[kinds[i - 1]]) > (versions[i], RANK[kinds[i]]):
            return f"row {i} ({kinds[i]} of version {versions[i]}) comes after a {kinds[i - 1]} of version " \
                   f"{versions[i - 1]}"
        if kinds[i] == "update_preimage":
            if i + 1 == len(rows) or kinds[i + 1] != "update_postimage" or versions[i + 1] != versions[i]:
                return f"row {i}: an update_preimage not followed by its update_postimage"
            found[("pair", versions[i], rows[i], rows[i + 1])] += 1
            i += 2
            continue
        if kinds[i] == "update_postimage":
            return f"row {i}: an update_postimage without its update_preimage"
        found[(kinds[i], versions[i], rows[i])] += 1
        i += 1
    return found


def _canonical_rows(table: pa.Table) -> list[tuple]:
    if not table.num_columns:
        return [()] * table.num_rows
    table = table.cast(pa.schema([pa.field(f.name, in_utc(f.type)) for f in table.schema]))
    return [tuple(canonical(v) for v in row.values()) for row in table.to_pylist()]


def _projection(rng: random.Random, state: State) -> list[str]:
    names = state.schema.names
    return rng.sample(names, rng.randint(0, len(names)))


def _expired(table: mt.Table, version: int, oldest: int) -> list[Failure]:
    name = f"changes({version}) (expired by gc)"
    try:
        table.changes(version)
    except mt.errors.VersionExpiredError as error:
        if f"oldest retained version is {oldest}" in str(error):
            return []
        return [Failure(name, f"VersionExpiredError does not name the oldest retained version {oldest}: {error}")]
    except Exception as error:
        return [Failure(name, f"raised {type(error).__name__}, not VersionExpiredError: {error}")]
    return [Failure(name, "no VersionExpiredError")]

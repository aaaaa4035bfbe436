"""A black-box checker of the histories the workload (workload.py) leaves, Elle-style: it
reads the logs of every process and every retained version of ``s`` and of the database, and
reports anomalies by class.

Each version names the transaction that made it (its application transaction), so the
version order is the serialization order the store chose. The checker replays the logged
effects in that order and compares every retained version with the replay, and checks:

- ``lost acknowledged commit``: acknowledged at version v, but v holds another transaction
  (or, expired, its rows are gone from the latest version without a transaction that removed them);
- ``duplicated commit``: one transaction at two versions, or a row twice in a version;
- ``aborted read``: a transaction that failed (nothing committed, it said) is in a version;
- ``partial or wrong commit``: a version's rows differ from the serial replay (a half commit,
  a lost or doubled effect), including ``lost update`` (a counter short of its increments);
- ``dirty read`` / ``read skew``: a read saw other rows than the version it read holds
  (a database snapshot: both tables at one database version);
- ``cycle``: the dependency graph (version order, and an anti-dependency from a serializable
  transaction to each version it rebased over that wrote a row it read) has a cycle, which
  serializability of update, upsert and overwrite (docs/protocol.md) forbids;
- ``unreadable version``: a retained version that does not read;
- ``invalid request``: a transaction the library refused as a mistake (``InvalidArgumentError``):
  the workload's bug, which would leave that kind of transaction untested.
Transactions whose outcome is unknown (killed, or an ambiguous failure) may be in or out, but
never half, never twice."""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
import pyarrow as pa

import manifest_table as mt
from manifest_table.errors import VersionNotFoundError
from tests.history.workload import COUNTERS, MOVABLE, SETUP, Target, digest

_READERS = 8
T = TypeVar("T")
State = dict[str, dict[int, tuple[int, str]]]
"""Table name -> id -> (v, txn)."""
NO_EFFECT = {"create", "compact", "set_properties", "create_table", "create_database"}


@dataclass
class Txn:
    id: str
    op: str = ""
    snapshot: int | None = None
    effect: dict[str, dict[str, Any]] | None = None
    end: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return self.end.get("outcome", "unknown")  # no end: the process was killed


@dataclass
class Report:
    transactions: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    versions: dict[str, int] = field(default_factory=dict)
    anomalies: list[tuple[str, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, detail: str) -> None:
        self.anomalies.append((kind, detail))

    @property
    def by_class(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.anomalies)

    def __str__(self) -> str:
        lines = [f"{self.transactions} transactions {dict(self.outcomes)}, versions {self.versions}, "
                 f"faults {dict(self.faults)}, anomalies {dict(self.by_class) or 'none'}, "
                 f"seconds {({k: round(v, 1) for k, v in self.seconds.items()})}"]
        lines += [f"  {kind}: {detail}" for kind, detail in self.anomalies[:30]]
        return "\n".join(lines)


def load(logs: Iterable[Path]) -> tuple[dict[str, Txn], Counter[str]]:
    txns: dict[str, Txn] = {}
    faults: Counter[str] = Counter()
    for path in logs:
        if not path.exists():  # a writer killed before it opened its log did nothing
            continue
        injected: dict[str, int] = {}
        for line in path.read_text().splitlines():
            doc = json.loads(line)
            injected = doc.get("faults", injected)  # each end holds the writer's count so far
            txn = txns.setdefault(doc["txn"], Txn(doc["txn"]))
            if doc["phase"] == "begin":
                txn.op = doc["op"]
            elif doc["phase"] == "intent":
                txn.snapshot, txn.effect = doc["snapshot"], doc["effect"]
            else:
                txn.end = doc
        faults.update(injected)
    return txns, faults


class Log:
    """One version order: ``s``'s versions, or the database's (tables ``a`` and ``b``)."""

    def __init__(self, name: str, tables: list[str], latest: int, names: Callable[[int], list[str]],
                 state: Callable[[int], State]) -> None:
        self.name, self.tables, self.latest, self._names, self._state = name, tables, latest, names, state

    def retained(self, report: Report) -> dict[int, list[str]]:
        """Every retained version (newest first, down to the first expired one, a batch of
        manifests at a time, in parallel): the transactions naming it."""
        found: dict[int, list[str]] = {}
        with ThreadPoolExecutor(_READERS) as pool:
            for top in range(self.latest, -1, -_READERS):
                batch = range(top, max(top - _READERS, -1), -1)
                for version, result in zip(batch, pool.map(functools.partial(_attempt, self._names), batch)):
                    if isinstance(result, VersionNotFoundError):
                        return dict(sorted(found.items()))
                    if isinstance(result, Exception):
                        self._unreadable(version, result, report)
                    else:
                        found[version] = result
        return dict(sorted(found.items()))

    def states(self, versions: list[int], report: Report) -> Iterator[tuple[int, State]]:
        """The rows of each of ``versions`` in their order (read a batch at a time, in parallel:
        only a batch is held, so a soak's thousands of versions fit in memory); an unreadable
        one is reported and left out."""
        with ThreadPoolExecutor(_READERS) as pool:
            for i in range(0, len(versions), _READERS):
                batch = versions[i : i + _READERS]
                for version, result in zip(batch, pool.map(functools.partial(_attempt, self._state), batch)):
                    if isinstance(result, Exception):
                        self._unreadable(version, result, report)
                    else:
                        yield version, result

    def _unreadable(self, version: int, exc: Exception, report: Report) -> None:
        report.add("unreadable version", f"{self.name} version {version}: {type(exc).__name__}: {exc}"[:300])


def _attempt(read: Callable[[int], T], version: int) -> T | Exception:
    try:
        return read(version)
    except Exception as exc:  # any failure to read is the anomaly
        return exc


def check(target: Target, logs: Iterable[Path], extra_faults: Counter[str] | None = None) -> Report:
    txns, faults = load(logs)
    report = Report(len([t for t in txns.values() if t.op]), Counter(t.outcome for t in txns.values() if t.op),
                    faults + (extra_faults or Counter()))
    for txn in txns.values():
        if txn.end.get("anomaly"):
            report.add("dirty read", f"{txn.id}: {txn.end['anomaly']}")
    s = mt.open_table(target.table, storage_options=target.options)
    db = mt.open_database(target.database, storage_options=target.options)
    logs_ = [
        Log("s", ["s"], s.log.probe_forward(s.version), lambda v: _table_names(s, v),
            lambda v: {"s": _rows(s.scan(version=v).to_arrow())}),
        Log("db", ["a", "b"], db.log.probe_forward(db.version), lambda v: _database_names(db, v),
            lambda v: _database_state(db, v)),
    ]
    placed: dict[str, list[tuple[str, int]]] = defaultdict(list)
    finals: dict[str, State] = {}
    oldest: dict[str, int] = {}
    for log in logs_:
        names = log.retained(report)
        if not names:
            continue
        oldest[log.name] = min(names)
        report.versions[log.name], final = _check_log(log, names, txns, placed, report)
        if final is not None:
            finals[log.name] = final
    _check_outcomes(txns, placed, finals, oldest, report)
    return report


def _table_names(table: mt.Table, version: int) -> list[str]:
    manifest = table.manifest(version)
    return _named(manifest.operation, [manifest.parameters])


def _database_names(db: mt.Database, version: int) -> list[str]:
    dv = db.log.manifest(version)
    return _named(dv.operation, [change.parameters for change in dv.changed.values()])


def _database_state(db: mt.Database, version: int) -> State:
    snapshot = db.snapshot(version=version)
    return {name: _rows(snapshot.table(name).to_arrow()) if name in snapshot.tables() else {} for name in "ab"}


def _named(operation: str, parameters: list[dict[str, Any]]) -> list[str]:
    """The transactions a version names (one, normally; none for maintenance)."""
    names = {f"{app['app_id']}.{app['batch_id']}" for p in parameters if (app := p.get("app_transaction"))}
    return sorted(names) if names or operation in NO_EFFECT else [f"?{operation}"]


def _rows(table: pa.Table) -> dict[int, tuple[int, str]]:
    ids, values, txns = (table.column(c).to_pylist() for c in ("id", "v", "txn"))
    found = {i: (v, t) for i, v, t in zip(ids, values, txns)}
    if len(found) != len(ids):
        twice = sorted(i for i, n in Counter(ids).items() if n > 1)
        found[-1] = (len(twice), f"duplicated ids {twice[:5]}")
    return found


def _check_log(log: Log, names_at: dict[int, list[str]], txns: dict[str, Txn],
               placed: dict[str, list[tuple[str, int]]], report: Report) -> tuple[int, State | None]:
    """Replay the effects in version order from the oldest retained version, check the reads
    of each version, and build the dependency graph. Returns how many versions read, and the
    rows of the latest."""
    reads: dict[int, list[Txn]] = defaultdict(list)
    for txn in txns.values():
        if log.name in txn.end.get("observed", {}):
            reads[txn.end["observed"][log.name][0]].append(txn)
    graph: nx.DiGraph = nx.DiGraph()
    previous: str | None = None
    expected: State | None = None  # None: the first version read, which the replay starts from
    read = 0
    for version, actual in log.states(sorted(names_at), report):
        read += 1
        names = names_at[version]
        for table in log.tables:
            if -1 in actual.get(table, {}):
                report.add("duplicated commit", f"{log.name} version {version}, table {table}: "
                                                f"{actual[table][-1][1]}")
        if len(names) > 1:
            report.add("partial or wrong commit", f"{log.name} version {version} names several transactions {names}")
        for name in names:
            if name.startswith(f"{SETUP}."):  # what the workload starts from
                expected = _copy(actual)
                continue
            placed[name].append((log.name, version))
            txn = txns.get(name)
            if name.startswith("?") or txn is None or txn.effect is None:
                report.add("partial or wrong commit", f"{log.name} version {version} holds an unknown commit {name}")
                continue
            if expected is not None:
                _apply(expected, txn.effect, txn.id)
            graph.add_node(name)
            if previous is not None:
                graph.add_edge(previous, name)  # version order
            previous = name
            _anti_dependencies(graph, names_at, txn, version, txns)
        for table in log.tables if expected is not None else ():
            want, got = expected.get(table, {}), actual.get(table, {})
            if got != want:
                report.add("partial or wrong commit", f"{log.name} version {version} ({names}), table {table}: "
                                                      f"{_difference(want, got)}")
        _check_reads(log, version, actual, reads.pop(version, []), report)
        expected = _copy(actual)  # go on from what is there: one anomaly is reported once
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            report.add("cycle", f"{log.name}: {sorted(component)[:8]}")
    return read, expected


def _anti_dependencies(graph: nx.DiGraph, names_at: dict[int, list[str]], txn: Txn, version: int,
                       txns: dict[str, Txn]) -> None:
    """``txn`` read rows at its snapshot and committed at ``version``: each transaction it
    rebased over that wrote one of those rows follows it in the graph (an anti-dependency)."""
    assert txn.effect is not None and txn.snapshot is not None
    for between in range(txn.snapshot + 1, version):
        for other in names_at.get(between, []):
            effect = txns[other].effect if other in txns else None
            for table, mine in txn.effect.items():
                theirs = (effect or {}).get(table, {})
                written = {p[0] for p in theirs.get("put", [])} | set(theirs.get("delete", [])) | set(
                    theirs.get("increment", []))
                if written & set(mine.get("read", [])):
                    graph.add_edge(txn.id, other)


def _apply(state: State, effect: dict[str, dict[str, Any]], txn: str) -> None:
    for table, change in effect.items():
        rows = state.setdefault(table, {})
        for i in change.get("delete", []):
            rows.pop(i, None)
        for i, v in change.get("put", []):
            rows[i] = (v, txn)
        for i in change.get("increment", []):
            v, t = rows[i]
            rows[i] = (v + 1, t)


def _copy(state: State) -> State:
    return {table: dict(rows) for table, rows in state.items()}


def _difference(expected: dict[int, tuple[int, str]], actual: dict[int, tuple[int, str]]) -> str:
    missing = sorted(set(expected) - set(actual))[:5]
    extra = sorted(set(actual) - set(expected))[:5]
    changed = sorted(i for i in set(expected) & set(actual) if expected[i][0] != actual[i][0])[:5]
    return f"missing {missing}, extra {extra}, other values {changed}"


def _check_reads(log: Log, version: int, state: State, reads: list[Txn], report: Report) -> None:
    """Each of ``reads`` saw ``version`` as it holds ``state``."""
    truth = {name: digest(_as_table(state[name])) for name in log.tables} if reads else {}
    for txn in reads:
        seen = txn.end["observed"][log.name][1]
        seen = seen if isinstance(seen, dict) else {log.tables[0]: seen}
        if seen != truth:
            report.add("read skew" if log.name == "db" else "dirty read",
                       f"{txn.id} read {log.name} version {version} as other rows than it holds")


def _as_table(rows: dict[int, tuple[int, str]]) -> pa.Table:
    items = sorted(rows.items())
    return pa.table({"id": [i for i, _ in items], "v": [v for _, (v, _) in items], "txn": [t for _, (_, t) in items]})


def _check_outcomes(txns: dict[str, Txn], placed: dict[str, list[tuple[str, int]]], finals: dict[str, State],
                    first: dict[str, int], report: Report) -> None:
    # Rows of s deleted by a transaction that may have committed.
    removed = {i for t in txns.values() if t.effect and t.outcome in ("ok", "unknown")
               for i in t.effect.get("s", {}).get("delete", [])}
    for txn in txns.values():
        places = placed.get(txn.id, [])
        if len(places) > 1:
            report.add("duplicated commit", f"{txn.id} at {places}")
        if places and txn.outcome in ("failed", "noop", "invalid"):
            report.add("aborted read", f"{txn.id} ({txn.outcome}: {txn.end.get('error', '')[:120]}) is at {places}")
        if txn.outcome == "invalid":  # not the library's anomaly: a transaction the workload got wrong
            report.add("invalid request", f"{txn.id}: {txn.end.get('error', '')[:200]}")
        if txn.outcome != "ok" or txn.effect is None:
            continue
        log_name = "s" if "s" in txn.effect else "db"
        version = txn.end["version"]
        if version >= first.get(log_name, 0):
            if (log_name, version) not in places:
                report.add("lost acknowledged commit", f"{txn.id} acknowledged at {log_name} version {version}, "
                                                       f"found at {places or 'no version'}")
        elif log_name == "s" and finals.get("s"):
            _check_expired(txn, removed, finals["s"], report)
    _check_counters(txns, placed, finals, report)
    if "db" in finals:
        a, b = finals["db"].get("a", {}), finals["db"].get("b", {})
        wrong = [x for x in MOVABLE if (x in a) + (x in b) != 1]
        if wrong:
            report.add("partial or wrong commit", f"movable rows not in exactly one table at the end: {wrong[:5]}")


def _check_expired(txn: Txn, removed: set[int], final: State, report: Report) -> None:
    """An acknowledged transaction whose version expired: its rows are in the latest version
    unless a transaction that may have committed removed them (``removed``)."""
    lost = [i for i, _ in (txn.effect or {}).get("s", {}).get("put", []) if i not in final["s"] and i not in removed]
    if lost:
        report.add("lost acknowledged commit", f"{txn.id} (expired version) put {lost[:5]}, gone from the latest")


def _check_counters(txns: dict[str, Txn], placed: dict[str, list[tuple[str, int]]], finals: dict[str, State],
                    report: Report) -> None:
    """Lost update: each counter's final value is its committed increments (those known to
    have committed, at most those that may have)."""
    for log_name, table in (("s", "s"), ("db", "a")):
        final = finals.get(log_name, {}).get(table)
        if final is None:
            continue
        for counter in COUNTERS:
            increments = [t for t in txns.values()
                          if t.effect and counter in t.effect.get(table, {}).get("increment", [])]
            sure = sum(1 for t in increments if t.outcome == "ok" or t.id in placed)
            maybe = sum(1 for t in increments if t.outcome == "unknown" and t.id not in placed)
            value = final.get(counter, (None, ""))[0]
            if value is None or not sure <= value <= sure + maybe:
                report.add("lost update", f"{table} counter {counter} is {value}; committed increments: {sure} "
                                          f"(and {maybe} unknown)")

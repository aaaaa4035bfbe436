"""The read paths of the differential test and how an answer is compared with the model's:
as a multiset of rows, with exactly the model's schema for our own paths, and cast to it
(losslessly) for other engines' answers (DuckDB, Polars, Spark)."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

import manifest_table as mt
from manifest_table.format.column_types import rebuilt
from tests.cli_run import cli_count
from tests.differential_model import BEFORE, Oracle, State
from tests.filter_generator import Text, quoted_name, random_filter, string_literal

EPOCH = dt.datetime(1970, 1, 1)
_AS_IS = frozenset({str, bytes, bool})
"""Types ``canonical`` returns unchanged (ints too, unless ``loose``)."""


# --- comparing --------------------------------------------------------------------------------
def canonical(value: Any, loose: bool = False) -> Any:
    """A hashable value that equals another exactly when both hold the same data: NaN equals
    NaN, -0.0 differs from 0.0, instants compare in UTC at nanosecond precision. ``loose``:
    integers compare as doubles (pandas makes the integers of a struct's field doubles when
    that field's array has a null slot, which depends on how the struct was assembled, not on
    its values)."""
    kind = type(value)
    if kind in _AS_IS or (kind is int and not loose):  # most values: nothing to canonicalise
        return value
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        return canonical(value.item(), loose)
    if loose and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, float):
        return "NaN" if value != value else (value, math.copysign(1.0, value))
    if isinstance(value, pd.Timestamp):  # in its own unit (year 1 has no nanoseconds)
        per_unit = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[value.unit]
        return ("instant" if value.tzinfo else "wall", int(value.asm8.view("i8")) * per_unit)
    if isinstance(value, dt.datetime):
        aware = value.tzinfo is not None
        wall = value.astimezone(dt.UTC).replace(tzinfo=None) if aware else value
        return ("instant" if aware else "wall", (wall - EPOCH) // dt.timedelta(microseconds=1) * 1000)
    if isinstance(value, dict):
        return tuple((key, canonical(item, loose)) for key, item in value.items())
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(canonical(item, loose) for item in value)
    return value


def in_utc(t: pa.DataType) -> pa.DataType:
    """``t`` with every zone UTC: the same instants, and Python can hold them all (0001-01-01
    UTC is year 0 in New York, where ``datetime`` overflows)."""
    t = rebuilt(t, in_utc)
    return pa.timestamp(t.unit, tz="UTC") if pa.types.is_timestamp(t) and t.tz else t


def multiset(rows: list[tuple[Any, ...]] | pa.Table, loose: bool = False) -> Counter:
    if isinstance(rows, pa.Table):
        rows = rows.cast(pa.schema([pa.field(f.name, in_utc(f.type)) for f in rows.schema]))
        rows = [tuple(row.values()) for row in rows.to_pylist()]
    return Counter(tuple(canonical(v, loose) for v in row) for row in rows)


def difference(actual: Counter, expected: Counter) -> str | None:
    """None when equal, else the row counts and a few rows missing and extra."""
    if actual == expected:
        return None
    missing, extra = expected - actual, actual - expected

    def shown(rows: Counter) -> str:
        text = "; ".join(repr(row)[:240] for row in list(rows.elements())[:3])
        return f"{sum(rows.values())} [{text}]"
    return (f"{sum(actual.values())} rows, the model {sum(expected.values())}; missing {shown(missing)}; "
            f"extra {shown(extra)}")


def conform(actual: pa.Table, schema: pa.Schema) -> pa.Table:
    """Another engine's answer as the model's columns: names by position, types cast safely
    (a value that does not fit is a failure, not a rounding)."""
    if actual.num_columns != len(schema):
        raise AssertionError(f"{actual.num_columns} columns {actual.column_names}, the model {schema.names}")
    columns = []
    for column, field in zip(actual.columns, schema):
        if pa.types.is_interval(column.type) and pa.types.is_duration(field.type):
            column = durations(column)  # DuckDB's INTERVAL for a duration
        try:
            columns.append(column if column.type == field.type else column.cast(field.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise AssertionError(f"column {field.name!r} came back as {column.type}, not castable to "
                                 f"{field.type}: {error}") from None
    return pa.Table.from_arrays(columns, schema=schema)


def durations(intervals: pa.ChunkedArray) -> pa.Array:
    """Month-day-nanosecond intervals as nanosecond durations (a month is no fixed duration:
    one is a failure)."""
    values = []
    for interval in intervals.to_pylist():
        if interval is not None and interval.months:
            raise AssertionError(f"a duration came back as an interval of {interval.months} months")
        values.append(None if interval is None else interval.days * 86_400 * 10**9 + interval.nanoseconds)
    return pa.array(values, pa.duration("ns"))


def compare_own(actual: pa.Table, expected: pa.Table) -> str | None:
    """One of our own paths: the schema exactly (names, types, nullability), then the rows."""
    if not actual.schema.equals(expected.schema):
        return f"schema {actual.schema} is not the model's {expected.schema}".replace("\n", ", ")
    return difference(multiset(actual), multiset(expected))


def compare_foreign(actual: pa.Table, expected: pa.Table) -> str | None:
    return difference(multiset(conform(actual, expected.schema)), multiset(expected))


def compare_pandas(scan: Any, expected: pa.Table) -> str | None:
    """``to_pandas`` converts with pyarrow's rules: compared with the model converted alike
    (where pyarrow cannot convert the model's rows, the scan must fail the same way)."""
    try:
        wanted = expected.to_pandas()
    except (OverflowError, pa.ArrowException) as error:
        try:
            scan.to_pandas()
        except type(error):
            return None
        return f"converted rows pyarrow cannot convert ({error})"
    actual = scan.to_pandas()
    if list(actual.columns) != list(wanted.columns):
        return f"columns {list(actual.columns)}, the model {list(wanted.columns)}"
    rows = difference(multiset(list(actual.itertuples(index=False, name=None)), loose=True),
                      multiset(list(wanted.itertuples(index=False, name=None)), loose=True))
    if rows is None and [str(t) for t in actual.dtypes] != [str(t) for t in wanted.dtypes]:
        return f"dtypes {list(actual.dtypes)}, the model {list(wanted.dtypes)}"
    return rows


# --- reading ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Query:
    version: int
    columns: list[str] | None = None
    where: Text | None = None

    def describe(self) -> str:
        shown = "" if self.columns is None else f" columns={self.columns}"
        return f"version {self.version}{shown}" + ("" if self.where is None else f" where {self.where.ours}")


def scan_of(table: mt.Table, query: Query) -> mt.Scan:
    return table.scan(columns=query.columns, where=None if query.where is None else query.where.ours,
                      version=query.version)


def snapshot_scan(table: mt.DatabaseTable, query: Query) -> mt.Scan:
    """The table read from a snapshot of its database (a fresh handle) at the query's version."""
    snapshot = mt.open_database(table.database.uri).snapshot(version=query.version)
    return snapshot.table(table.name).scan(columns=query.columns,
                                           where=None if query.where is None else query.where.ours)


def duckdb_read(table: mt.Table, query: Query, con: Any) -> pa.Table:
    table.to_duckdb(con, "t", version=query.version)
    columns = "*" if query.columns is None else ", ".join(quoted_name(c) for c in query.columns)
    where = "" if query.where is None else f" WHERE {query.where.duck}"
    return con.sql(f"SELECT {columns} FROM t{where}").to_arrow_table()


def batches_of(scan: Any) -> pa.Table:
    return pa.Table.from_batches(list(scan.to_batches()), schema=scan.schema)


OWN_PATHS: dict[str, Callable[[Any], pa.Table]] = {
    "scan().to_arrow()": lambda scan: scan.to_arrow(),
    "scan().to_batches()": batches_of,
    "scan().to_reader()": lambda scan: scan.to_reader().read_all(),
    "pa.table(scan)": lambda scan: pa.table(scan),
}
"""Our scan's ways out, each given the same scan."""

SIMPLE_KINDS = {"int8", "int16", "int32", "int64", "uint8", "uint32", "string", "large_string", "bool", "date32"}


@dataclass(frozen=True)
class SimpleLeaf:
    """``column op value`` (or ``column IS NULL``) that another engine builds from Python
    values (Polars and Spark predicates pushed down to us), on a type whose comparisons mean
    the same there and in SQL (no floats: NaN orders differently)."""

    column: str
    op: str
    value: Any
    text: Text
    """The same condition for the oracle (``ours`` is only shown)."""


def simple_leaf(rng: random.Random, state: State) -> SimpleLeaf | None:
    columns = [c for c in state.columns if c.kind.label in SIMPLE_KINDS and c.pool]
    if not columns:
        return None
    column = rng.choice(columns)
    quoted = quoted_name(column.name)
    value = rng.choice(column.pool)
    if isinstance(value, bool):
        literal = "TRUE" if value else "FALSE"
    elif isinstance(value, str):
        literal = string_literal(value)
    elif isinstance(value, dt.date):
        literal = f"DATE '{value.isoformat()}'"
    else:
        literal = str(value)
    op = rng.choice(["=", "!=", "<", ">=", "IS NULL", "IN"])
    sql = {"IS NULL": f"{quoted} IS NULL", "IN": f"{quoted} IN ({literal})"}.get(op, f"{quoted} {op} {literal}")
    return SimpleLeaf(column.name, op, value, Text(sql, sql))


def polars_expr(leaf: SimpleLeaf) -> pl.Expr:
    column = pl.col(leaf.column)
    return {"=": lambda: column == leaf.value, "!=": lambda: column != leaf.value, "<": lambda: column < leaf.value,
            ">=": lambda: column >= leaf.value, "IS NULL": column.is_null,
            "IN": lambda: column.is_in([leaf.value])}[leaf.op]()


def polars_read(table: Any, query: Query, predicate: SimpleLeaf | None) -> pa.Table:
    frame = table.to_polars(version=query.version)
    if predicate is not None:
        frame = frame.filter(polars_expr(predicate))
    if query.columns is not None:
        frame = frame.select([pl.col(c) for c in query.columns])
    return frame.collect().to_arrow()




def shorter(text: str) -> str:
    """A long error's start and end (Spark's carry a traceback, whose last line says what)."""
    return text if len(text) <= 900 else f"{text[:300]} [...] {text[-600:]}"


def compare_count(actual: int, expected: pa.Table) -> str | None:
    return None if actual == expected.num_rows else f"count {actual}, the model {expected.num_rows}"


Compare = Callable[[Any, pa.Table], "str | None"]
Path = tuple[Callable[[Query], Any], Compare]


@dataclass(frozen=True)
class Failure:
    what: str
    message: str

    def __str__(self) -> str:
        return f"{self.what}: {self.message}"


def shrink(where: Text, message: str, fails: Callable[[Text], str | None]) -> tuple[Text, str]:
    """The smallest part of a failing filter that still fails (``fails`` says how, or None),
    and its failure."""
    for part in where.smaller():
        found = fails(part)
        if found is not None:
            return shrink(part, found, fails)
    return where, message


class Checker:
    """Reads every retained version through every path, from fresh handles (a writer's
    in-memory caches once hid unreadable segments, issue 24), and records each answer that
    differs from the model's. A failing filter is shrunk to its smallest failing part."""

    def __init__(self, uri: str, hive_uri: str, oracle: Oracle, writer: Any, rng: random.Random,
                 filters: int, max_failures: int = 12) -> None:
        import duckdb

        self.uri, self.hive_uri, self.oracle, self.writer, self.rng = uri, hive_uri, oracle, writer, rng
        self.filters = filters
        self.max_failures = max_failures
        self.failures: list[Failure] = []
        self.reads = 0
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")

    def paths(self, reader: Any, hive: Any) -> dict[str, Path]:
        paths: dict[str, Path] = {name: ((lambda q, way=way: way(scan_of(reader, q))), compare_own)
                                  for name, way in OWN_PATHS.items()}
        paths["scan().count()"] = (lambda q: scan_of(reader, q).count(), compare_count)
        paths["manifest-table count"] = (
            lambda q: cli_count(self.uri, q.version, None if q.where is None else q.where.ours), compare_count)
        paths["scan().to_pandas()"] = (lambda q: scan_of(reader, q), compare_pandas)
        paths["to_duckdb"] = (lambda q: duckdb_read(reader, q, self.con), compare_foreign)
        paths["to_duckdb under id=7/"] = (lambda q: duckdb_read(hive, q, self.con), compare_foreign)
        paths["to_polars"] = (lambda q: polars_read(reader, q, None), compare_foreign)
        paths["writer's handle"] = (lambda q: scan_of(self.writer, q).to_arrow(), compare_own)
        if isinstance(self.writer, mt.DatabaseTable):
            paths["db.snapshot(version).table"] = (lambda q: snapshot_scan(self.writer, q).to_arrow(), compare_own)
        return paths

    def check(self, name: str, query: Query, state: State, path: Path) -> None:
        if len(self.failures) >= self.max_failures:
            return
        message = self._message(query, state, path)
        if message is None:
            return
        if query.where is not None:
            query, message = self._shrink(query, state, path, message)
        self.failures.append(Failure(f"{name} {query.describe()}", message))

    def _message(self, query: Query, state: State, path: Path) -> str | None:
        self.reads += 1
        read, compare = path
        expected = self.oracle.rows(state, query.where, query.columns)
        try:
            return compare(read(query), expected)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # any error of a read is a failure (Polars panics are BaseExceptions)
            return f"raised {type(error).__name__}: {shorter(str(error))}"

    def _shrink(self, query: Query, state: State, path: Path, message: str) -> tuple[Query, str]:
        assert query.where is not None
        where, message = shrink(query.where, message,
                                lambda part: self._message(Query(query.version, query.columns, part), state, path))
        return Query(query.version, query.columns, where), message

    def version(self, version: int, state: State | None, as_of: Any, damaged: bool = False) -> None:
        """Every path on ``version`` unfiltered; then ``filters`` random filters, each through
        the scan, its count and one more path in turn; a Polars predicate; time travel by
        ``as_of`` (a (time, version) pair); and, for an expired (or ``damaged``) version, the
        error."""
        reader = mt.open_table(self.uri)
        if state is None:
            self._expired(reader, version, damaged)
            return
        if state is BEFORE:
            self._before(reader, version)
            return
        paths = self.paths(reader, mt.open_table(self.hive_uri))
        for name, path in paths.items():
            self.check(name, Query(version), state, path)
        others = [n for n in paths if n not in ("scan().to_arrow()", "scan().count()", "to_polars")]
        for n in range(self.filters):
            where = random_filter(self.rng, state.filter_columns())
            columns = self._projection(state)
            for name in ("scan().to_arrow()", "scan().count()", others[(version + n) % len(others)]):
                self.check(name, Query(version, columns, where), state, paths[name])
        predicate = simple_leaf(self.rng, state)
        if predicate is not None:  # a predicate and a projection pushed down by Polars
            self.check(f"to_polars with filter({polars_expr(predicate)})",
                       Query(version, self._projection(state), predicate.text), state,
                       (lambda q: polars_read(reader, Query(q.version, q.columns), predicate), compare_foreign))
        if as_of is not None:
            moment, shown = as_of
            self.check(f"scan(as_of={moment}) (version {shown})", Query(version), state,
                       (lambda q: reader.scan(as_of=moment).to_arrow(), compare_own))

    def _projection(self, state: State) -> list[str] | None:
        """All columns, or some in any order."""
        names = state.schema.names
        return None if self.rng.random() < 0.4 else self.rng.sample(names, self.rng.randint(1, len(names)))

    def _expired(self, reader: Any, version: int, damaged: bool) -> None:
        """An expired version reads as expired; a damaged one (a file of it deleted by hand) as
        corrupt, naming the version, unless GC has expired it since."""
        self.reads += 1
        expected = (mt.errors.CorruptTableError, mt.errors.VersionExpiredError) if damaged else \
            mt.errors.VersionExpiredError
        what = f"version {version} ({'damaged' if damaged else 'expired by gc'})"
        try:
            reader.scan(version=version).to_arrow()
        except expected as error:
            if isinstance(error, mt.errors.CorruptTableError) and f"version {version} of" not in str(error):
                self.failures.append(Failure(what, f"does not name the version: {error}"))
            return
        except Exception as error:
            self.failures.append(Failure(what, f"raised {type(error).__name__}, not {expected}: {error}"))
            return
        self.failures.append(Failure(what, "read without an error"))

    def _before(self, reader: Any, version: int) -> None:
        """A database version from before the table was created: not found, and not expired."""
        self.reads += 1
        try:
            reader.scan(version=version).to_arrow()
        except mt.errors.VersionExpiredError as error:
            self.failures.append(Failure(f"version {version} (before the table)", f"expired: {error}"))
        except mt.errors.VersionNotFoundError:
            return
        except Exception as error:
            self.failures.append(Failure(f"version {version} (before the table)",
                                         f"raised {type(error).__name__}, not VersionNotFoundError: {error}"))
        else:
            self.failures.append(Failure(f"version {version} (before the table)", "read without an error"))

    def close(self) -> None:
        self.con.close()

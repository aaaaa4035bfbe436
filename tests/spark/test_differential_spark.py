"""The Spark sample of the differential read-path test (tests/reads/test_differential.py).

A few cases over the types Spark can read (``Kind.spark``), whose histories (without the
NOT NULL race, whose nulls fail every Spark job slowly: tests/reads/test_differential.py has it) also append
through Spark's native writer a DataFrame with a column Spark's optimizer knows is never null
(a literal: issue 18 item 8). The latest version and two others are then read through Spark's native path
(``manifest_table.spark.read``: Spark's own Parquet reader, deleted rows dropped by the JVM
function) and through the data source (``spark.read.format("manifest_table")``), unfiltered
and with a predicate Spark pushes down to the source, and compared with the model. Then the
streaming source reads the history from the first version after which every version is
retained and has the latest schema (one to two files per micro-batch or everything at once),
either the appended rows (``skipChangeCommits``: every micro-batch, or run of micro-batches
splitting a commit, holds the rows the model says those commits appended, none for a commit
that deleted or replaced rows) or the change rows (``readChangeFeed``: whole commits per
micro-batch, each commit's rows the model's difference of its versions). Spark holds some types wider
(unsigned integers, date64, views) and nanoseconds as microseconds: answers are cast back to
the table's types, and the model's nanoseconds are cut to microseconds first.

Environment: ``MT_DIFF_SPARK_CASES`` (default 3) and ``MT_DIFF_SPARK_STEPS`` (default 8);
``MT_DIFF_SEED``, ``MT_DIFF_SECONDS`` and ``MT_DIFF_SKIP_KINDS`` as in tests/reads/test_differential.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import manifest_table as mt
from manifest_table.format.column_types import holds, rebuilt
from manifest_table.spark import read, write
from manifest_table.spark.schema import spark_schema
from tests.differential_cases import SECONDS, SEED, TIMEOUT, Outcome, run_case, run_cases
from tests.differential_history import STEPS, History, Step, step_required_column
from tests.differential_model import Oracle, State
from tests.differential_reads import Failure, SimpleLeaf, compare_foreign, shorter, simple_leaf
from tests.differential_types import KINDS, Shape

pytest_plugins = ["tests.spark.fixtures"]


SPARK_CASES = int(os.environ.get("MT_DIFF_SPARK_CASES", "3"))
pytestmark = TIMEOUT
SPARK_STEPS = int(os.environ.get("MT_DIFF_SPARK_STEPS", "8"))
LITERAL_KINDS = {"int64", "string", "date32", "bool", "float64"}
NATIVE_WRITABLE = {"int8", "int16", "int32", "int64", "float32", "float64", "decimal128", "string", "binary", "bool",
                   "date32", "timestamp[us]"}
"""Types Spark's native writer writes one to one (docs/spark.md)."""


def microseconds(t: pa.DataType) -> pa.DataType:
    """``t`` with nanosecond timestamps and durations at microseconds (what Spark reads them
    as: docs/spark.md, "Types")."""
    t = rebuilt(t, microseconds)
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", tz=t.tz)
    return pa.duration("us") if pa.types.is_duration(t) and t.unit == "ns" else t


def compare_spark(actual: pa.Table, expected: pa.Table) -> str | None:
    schema = pa.schema([pa.field(f.name, microseconds(f.type)) for f in expected.schema])
    return compare_foreign(actual, expected.cast(schema, safe=False))


def spark_column(name: str) -> Any:
    return F.col("`" + name.replace("`", "``") + "`")


def spark_predicate(leaf: SimpleLeaf) -> Any:
    column, value = spark_column(leaf.column), spark_literal(leaf.value)
    return {"=": lambda: column == value, "!=": lambda: column != value, "<": lambda: column < value,
            ">=": lambda: column >= value, "IS NULL": column.isNull,
            "IN": lambda: column.isin([value])}[leaf.op]()


def spark_literal(value: Any) -> Any:
    """``value``, or a date before year 1000 as a typed SQL literal: PySpark sends a Python date
    through ``java.sql.Date.valueOf(strftime("%Y-%m-%d"))``, whose unpadded year ``1-01-01``
    Java refuses (IllegalArgumentException)."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime) and value.year < 1000:
        return F.expr(f"DATE '{value.isoformat()}'")
    return value


class SparkChecker:
    """The latest version and a sample of the others (a Spark read costs about a second)
    through Spark's native read and the data source."""

    def __init__(self, spark: Any, uri: str, oracle: Oracle, rng: random.Random, versions: int = 3) -> None:
        self.spark, self.uri, self.oracle, self.rng = spark, uri, oracle, rng
        self.failures: list[Failure] = []
        self.reads = 0
        latest = mt.open_table(uri).version
        self.sample = {latest} | set(rng.sample(range(latest), min(latest, versions - 1)))
        self.states: dict[int, State] = {}
        self.streamed: list[str] = []
        """The columns a stream reads: all but those holding a time (``run_stream``)."""

    def version(self, version: int, state: State | None, as_of: Any, damaged: bool) -> None:
        if state is not None:
            self.states[version] = state
        if state is None or version not in self.sample:
            return  # expired or damaged versions: tests/reads/test_differential.py checks the error
        source = self.spark.read.format("manifest_table").option("version", version).load(self.uri)
        leaf = simple_leaf(self.rng, state)
        checks = [("manifest_table.spark.read", lambda: read(self.spark, self.uri, version=version), None),
                  ('spark.read.format("manifest_table")', lambda: source, None)]
        if leaf is not None:
            checks.append((f'spark.read.format("manifest_table").filter({leaf.text.ours})',
                           lambda: source.filter(spark_predicate(leaf)), leaf))
        for name, frame, where in checks:
            self.reads += 1
            expected = self.oracle.rows(state, None if where is None else where.text)
            try:
                message = compare_spark(frame().toArrow(), expected)
            except Exception as error:  # any error of a read is a failure to report
                message = f"raised {type(error).__name__}: {shorter(str(error))}"
            if message is not None:
                self.failures.append(Failure(f"{name} version {version}", message))

    def close(self) -> None:
        try:
            self.stream()
        except Exception as error:  # any error of the stream is a failure to report
            self.failures.append(Failure("spark.readStream", f"raised {type(error).__name__}: {shorter(str(error))}"))

    def stream(self) -> None:
        """The streaming source from the first version ``start`` with every version from
        ``start - 1`` on retained and under the latest schema, to the end: the appended rows
        or, with ``readChangeFeed``, the change rows."""
        latest = max(self.states)
        start = latest + 1
        while start - 2 in self.states and self.states[start - 1].schema.equals(self.states[latest].schema):
            start -= 1
        if start > latest:
            return
        limit = self.rng.choice([{"maxFilesPerTrigger": "1"}, {"maxFilesPerTrigger": "2"}, {}])
        self.streamed = [f.name for f in self.states[latest].schema if not holds(f.type, pa.types.is_time)]
        if self.rng.random() < 0.5 or len(self.streamed) < len(self.states[latest].schema):
            self.stream_appends(start, latest, limit)
        else:  # (a user-given schema is a projection of the table's columns, not of the feed's)
            self.stream_changes(start, latest, limit)

    def run_stream(self, **options: str) -> tuple[list[pa.Table], dict[int, dict]]:
        """Every micro-batch of a query reading everything available, and each one's end
        offset. Spark refuses a TIME column in a streaming plan (docs/spark.md, "Streaming
        source"): a table with one is streamed through a schema naming the other columns."""
        batches: list[pa.Table] = []
        reader = self.spark.readStream.format("manifest_table").options(**options)
        latest = self.states[max(self.states)].schema
        if len(self.streamed) < len(latest):
            reader = reader.schema(spark_schema(pa.schema([latest.field(n) for n in self.streamed])))
        query = (reader.load(self.uri).writeStream
                 .foreachBatch(lambda frame, batch_id: batches.append(frame.toArrow()))
                 .trigger(availableNow=True).start())
        query.awaitTermination(300)
        self.reads += 1
        return batches, {p["batchId"]: json.loads(p["sources"][0]["endOffset"]) for p in query.recentProgress}

    def stream_appends(self, start: int, latest: int, limit: dict[str, str]) -> None:
        """Every micro-batch, or run of micro-batches splitting a commit, holds the rows the
        model says those commits appended (``skipChangeCommits``: none for a commit that
        deleted or replaced rows)."""
        batches, ends = self.run_stream(startingVersion=str(start), skipChangeCommits="true", **limit)
        first, rows = start, []
        for batch_id, batch in enumerate(batches):
            rows.append(batch)
            end = ends[batch_id]
            if end["index"] == 0:  # a commit boundary: these batches read versions first .. end - 1
                expected = [self.appended(v).select(self.streamed) for v in range(first, end["version"])]
                message = compare_spark(pa.concat_tables(rows), pa.concat_tables(expected)) if expected else (
                    None if sum(r.num_rows for r in rows) == 0 else "rows where no version was read")
                if message is not None:
                    self.failures.append(Failure(f"spark.readStream {limit}, versions {first}..{end['version'] - 1}",
                                                 message))
                first, rows = end["version"], []
        if first != latest + 1:
            self.failures.append(Failure("spark.readStream", f"stopped before version {first}, not after {latest}"))

    def stream_changes(self, start: int, latest: int, limit: dict[str, str]) -> None:
        """``readChangeFeed``: no commit split across micro-batches, and each commit's rows are
        the model's difference of its versions: the rows of the parent it lacks as deletes
        (or update pre-images), its rows the parent lacks as inserts (or post-images); which
        rows pair up is tests/differential_changes.py's to check."""
        name = f"spark.readStream readChangeFeed {limit}"
        if not self.states[start - 1].schema.equals(self.states[latest].schema):
            start += 1  # deleted rows of a parent are compared as the parent holds them
            if start > latest:
                return
        batches, _ = self.run_stream(startingVersion=str(start), readChangeFeed="true", **limit)
        seen: set[int] = set()
        for batch in batches:
            versions = set(batch.column("_commit_version").to_pylist())
            if versions & seen:
                self.failures.append(Failure(name, f"versions {sorted(versions & seen)} split across micro-batches"))
            seen |= versions
        if seen - set(range(start, latest + 1)):
            self.failures.append(Failure(name, f"rows of versions {sorted(seen)}, read from {start} to {latest}"))
        names = self.states[latest].schema.names
        rows = pa.concat_tables(batches) if batches else None
        for v in range(start, latest + 1):
            for kinds, expected in ((("delete", "update_preimage"), self.gone(v)), (("insert", "update_postimage"),
                                                                                   self.appended(v, changed=True))):
                got = pa.table({n: [] for n in names}) if rows is None else rows.filter(
                    pc.and_(pc.equal(rows.column("_commit_version"), v),
                            pc.is_in(rows.column("_change_type"), pa.array(kinds)))).select(names)
                message = compare_spark(got, expected)
                if message is not None:
                    self.failures.append(Failure(f"{name}, version {v}, {kinds[0]}s", message))

    def gone(self, version: int) -> pa.Table:
        """The rows of version ``version - 1`` that ``version`` lacks (by the model's identity)."""
        before, after = self.states[version - 1], self.states[version]
        kept = set(after.uids.to_pylist())
        lost = pa.array([uid not in kept for uid in before.uids.to_pylist()], pa.bool_())
        return pa.Table.from_arrays(before.data.filter(lost).columns, schema=before.schema)

    def appended(self, version: int, changed: bool = False) -> pa.Table:
        """The rows of ``version`` its parent lacks (by the model's identity); unless
        ``changed``, none when it removed a row (what the append stream reads of it)."""
        before, after = self.states[version - 1], self.states[version]
        old = set(before.uids.to_pylist())
        new = pa.array([uid not in old for uid in after.uids.to_pylist()], pa.bool_())
        if not changed and len(old - set(after.uids.to_pylist())):
            new = pa.array([False] * len(after.uids), pa.bool_())
        return pa.Table.from_arrays(after.data.filter(new).columns, schema=after.schema)


def spark_write_step(spark: Any) -> Step:
    """Append rows through ``manifest_table.spark.write``: ids from ``spark.range``, one column
    a literal (non-null to Spark's optimizer), the others typed nulls."""

    def step(h: History, rng: random.Random) -> None:
        state = h.state
        count = rng.choice([1, 3, 10])
        ids = list(range(h.next_id, h.next_id + count))
        h.next_id += count
        literal = rng.choice([c for c in state.columns[1:] if c.kind.label in LITERAL_KINDS and c.pool] or [None])
        value = None if literal is None else rng.choice([v for v in literal.pool if v == v])
        types = {f.name: f.dataType for f in spark_schema(state.schema).fields}

        def constant(column: Any) -> Any:
            if column is not literal:
                return F.lit(None).cast(types[column.name])
            # to_date of a literal folds into a column Spark knows is never null (item 8)
            return F.to_date(F.lit(value.isoformat())) if isinstance(value, dt.date) else F.lit(value)
        frame = spark.range(ids[0], ids[-1] + 1).select(F.col("id"), *[constant(c).alias(c.name)
                                                                       for c in state.columns[1:]])
        h.note(f"spark write of {count} rows, {literal.name if literal else None!r} = {value!r} (a literal), "
               "other columns null")
        info = write(frame, h.uri) or mt.open_table(h.uri).history(limit=1)[0]  # None: through the data source
        rows = pa.table({c.name: pa.array([value if c is literal else None] * count, c.type) if c.name != "id"
                         else pa.array(ids, pa.int64()) for c in state.columns})
        uids = list(range(h.next_uid, h.next_uid + count))
        h.next_uid += count
        h.committed(info, state.append(rows, uids))

    return step, 4, lambda h: all(spark_writable(c.type) for c in h.state.columns)


def spark_writable(t: pa.DataType) -> bool:
    """Whether a DataFrame of Spark's types can be written into a column of ``t`` (no fixed
    sizes, unsigned integers, nanoseconds, wide decimals; nothing nested)."""
    return not (pa.types.is_nested(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_unsigned_integer(t)
                or pa.types.is_time(t) or pa.types.is_duration(t) or (pa.types.is_timestamp(t) and t.unit == "ns"))


def test_spark_reads_return_the_model_rows(spark: Any, tmp_path: Path) -> None:
    """Even seeds: only types Spark's native writer writes one to one, a date column and a
    nullable id, so that ``write`` takes the native path with a folded date literal (issue 18
    item 8); odd seeds: every type Spark reads, except unsigned integers, which Spark's reader
    refuses inside a list or struct ("Spark cannot represent"; top-level ones are read by
    tests/spark/test_spark_source.py)."""
    readable = [k for k in KINDS if k.spark and not k.label.startswith("uint")]
    native = Shape([k for k in readable if k.label in NATIVE_WRITABLE], ("date32",), nullable_id=True, collisions=False)
    choices = [s for s in STEPS if s[0] is not step_required_column] + [spark_write_step(spark)]

    def run(seed: int, directory: Path) -> Outcome:
        return run_case(seed, directory, native if seed % 2 == 0 else Shape(readable), SPARK_STEPS,
                        lambda uri, hive, oracle, writer, rng: SparkChecker(spark, uri, oracle, rng), choices)
    replay = "MT_DIFF_SEED={seed} MT_DIFF_SPARK_CASES=1 .venv/bin/python -m pytest -q -p no:cacheprovider " \
             "tests/spark/test_differential_spark.py"
    run_cases(SEED, SPARK_CASES, SECONDS, run, tmp_path, replay, "differential (Spark)")

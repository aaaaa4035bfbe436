"""Spark's own Parquet path: ``read`` and ``write`` against the Python API and the data source
(deletes, projections, filters, time travel), failing and retried tasks, footer stats under
the rules of format/stats.py, native delete and compaction racing a Python-API writer, the
fallback to the data source, and options that do not exist."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import zipfile
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql.functions import col, udf

import manifest_table as mt
from manifest_table.data import bloom_probes
from manifest_table.data.write import WriteOptions
from manifest_table.errors import (
    InvalidArgumentError,
    InvalidFilterError,
    SchemaMismatchError,
    TableNotFoundError,
    VersionNotFoundError,
)
from manifest_table.format.stats import table_stats
from manifest_table.spark import compact, delete, live_row, native_location, read, register, upsert, write
from manifest_table.storage import FileIO, LocalStore
from tests.catalog import assert_rejected
from tests.spark.fixtures import failing_at_marker, sorted_rows

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("x", pa.float64()),
        ("ts", pa.timestamp("us", "UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("tags", pa.list_(pa.int32())),
    ]
)


def rows(start: int, stop: int) -> pa.Table:
    ids = range(start, stop)
    return pa.table(
        {
            "id": list(ids),
            "name": [None if i % 7 == 0 else f"n{i}" for i in ids],
            "x": [float("nan") if i % 9 == 0 else i / 3 for i in ids],
            "ts": [dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i) for i in ids],
            "amount": [Decimal(i) / 4 for i in ids],
            "tags": [[i, i + 1] if i % 3 else None for i in ids],
        },
        schema=SCHEMA,
    )


FLAT = SCHEMA.remove(SCHEMA.get_field_index("tags"))
"""Columns Spark's writer writes one to one: compaction runs natively on such tables."""


def flat_rows(start: int, stop: int) -> pa.Table:
    return rows(start, stop).drop_columns(["tags"])


def frame(spark, start: int, stop: int, partitions: int = 2):
    """Rows of the flat columns Spark writes natively, NaN and a long string included."""
    return spark.range(start, stop, numPartitions=partitions).selectExpr(
        "id",
        "CASE WHEN id % 50 = 3 THEN repeat('z', 300) ELSE concat('n', id) END AS name",
        "CASE WHEN id % 9 = 0 THEN double('NaN') ELSE id / 4 END AS score",
        "timestamp_seconds(id) AS ts",
    )


def ids_of(table: mt.Table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


def files_on_disk(uri: str) -> set[str]:
    """Every file and directory under data/ (hidden ones included: Spark's .crc files)."""
    data = Path(uri) / "data"
    return {str(p.relative_to(uri)) for p in data.rglob("*")} if data.exists() else set()


def referenced(table: mt.Table) -> set[str]:
    return {f.path for f in table.manifest().files}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    """Versions 1-4 appends (files of 25 rows), 5 and 6 deletes, 7 an append."""
    t = mt.create_table(str(tmp_path_factory.mktemp("native") / "t"), SCHEMA)
    for k in range(4):
        t.append(rows(25 * k, 25 * (k + 1)))
    t.delete(f"id IN ({', '.join(str(i) for i in range(1, 100, 5))})")
    t.delete("id IN (2, 3, 60)")
    t.append(rows(100, 110))
    return t


@pytest.fixture(params=["jvm", "anti-join"])
def deletes_by(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a native read drops deleted rows: the JVM function, and the anti-join it
    falls back to (live_row.py). Projections and filters on top are Spark's own work: read
    tests of them run with the function only."""
    if request.param == "anti-join":
        monkeypatch.setenv(live_row.SWITCH, "0")
    return request.param


def test_native_read_equals_the_python_api_and_the_data_source_for_every_version(spark, table, deletes_by):
    versions = (0, 4, 5, 7) if deletes_by == "jvm" else (5, 7)  # (the anti-join only reads files with deletes)
    for version in versions:  # empty, no deletes, deletes, deletes and a clean new file
        expected = sorted_rows(table.scan(version=version).to_arrow())
        assert sorted_rows(read(spark, table.uri, version=version)) == expected, version
        if version in (4, 7):
            source = spark.read.format("manifest_table").option("version", version).load(table.uri)
            assert sorted_rows(source) == expected, version
    as_of = table.history()[2].timestamp.isoformat()  # version 5, before the second delete
    assert sorted_rows(read(spark, table.uri, as_of=as_of)) == sorted_rows(table.scan(as_of=as_of).to_arrow())


@pytest.mark.parametrize(
    "columns,where",
    [
        (["name", "id"], "id >= 20 AND id < 70"),
        (["ts", "amount"], "name IS NULL"),
        (["id", "x"], "id > 90 AND name IS NOT NULL"),
        (["id", "tags"], "amount <= 3.5 OR id = 104"),
    ],
)
def test_native_read_projections_and_filters(spark, table, columns, where):
    df = read(spark, table.uri).filter(where).select(*columns)
    key = columns[0]
    expected = table.scan(columns=columns, where=where).to_arrow()
    assert sorted(map(str, sorted_rows(df, key))) == sorted(map(str, sorted_rows(expected, key)))


def test_native_read_filters_only_files_with_deletes(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    t.append(rows(10, 20))

    def plan(df) -> str:
        return df._jdf.queryExecution().executedPlan().toString()

    clean = plan(read(spark, t.uri))
    assert "FileScan parquet" in clean and "Join" not in clean and live_row.FUNCTION not in clean
    t.delete("id = 4")
    dirty = plan(read(spark, t.uri))
    assert live_row.FUNCTION in dirty and "Union" in dirty and "Join" not in dirty
    assert sorted(r.id for r in read(spark, t.uri).select("id").collect()) == [i for i in range(20) if i != 4]
    monkeypatch.setenv(live_row.SWITCH, "0")
    joined = plan(read(spark, t.uri))
    assert "BroadcastHashJoin" in joined and "LeftAnti" in joined and live_row.FUNCTION not in joined


def test_native_read_drops_runs_and_positions_past_65535(spark, tmp_path: Path, deletes_by):
    """Bitmaps with run containers (a clustered delete) and positions in a second roaring
    container reach the JVM function intact; a projection and a pushed filter on top keep
    the right rows."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("v", pa.string())]))
    t.append(pa.table({"id": pa.array(range(70_000), pa.int64()), "v": [f"v{i % 10}" for i in range(70_000)]}))
    t.delete("(id >= 60000 AND id < 66000) OR id IN (3, 65535, 65536, 69999)")
    df = read(spark, t.uri)
    assert df.count() == t.scan().to_arrow().num_rows == 70_000 - 6_002
    picked = df.filter("v = 'v6' AND id > 59990").select("id").toArrow().column("id").to_pylist()
    assert sorted(picked) == [i for i in range(59991, 70_000) if i % 10 == 6 and not 60000 <= i < 66000]


def test_files_are_keyed_by_size_unless_two_have_the_same_size(spark, tmp_path: Path):
    """The JVM function tells files apart by ``_metadata.file_size`` (a constant of the scan)
    when their sizes differ, else by a hash of their names (computed per row): both drop
    exactly the deleted rows."""

    def plan(df) -> str:
        return df._jdf.queryExecution().executedPlan().toString()

    differ = mt.create_table(str(tmp_path / "differ"), SCHEMA)
    differ.append(rows(0, 10))
    differ.append(rows(10, 30))
    same = mt.create_table(str(tmp_path / "same"), SCHEMA)
    same.append(rows(0, 10))
    same.append(rows(0, 10))
    assert len({f.size for f in same.manifest().files}) == 1
    for t, key in ((differ, "file_size"), (same, "xxhash64")):
        t.delete("id IN (4, 17)")
        df = read(spark, t.uri)
        assert key in plan(df) and live_row.FUNCTION in plan(df)
        assert sorted_rows(df) == sorted_rows(t.scan().to_arrow())


def test_the_jvm_function_fails_rather_than_guess(spark, tmp_path: Path):
    """Two files of one read with the same key, and a row of a file its literal does not
    list (a size that is not the manifest's), fail the query instead of keeping deleted rows."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(rows(0, 10))
    t.delete("id = 4")
    f = t.manifest().files[0]
    assert live_row.available(spark)
    deleted = t.scan().snapshot.deleted

    def call(files, key: int) -> None:
        literal = live_row.deletes_literal(files, deleted, lambda file: file.path.rsplit("/", 1)[-1], by_size=True)
        row = F.call_function(live_row.FUNCTION, F.lit(key).cast("long"), F.lit(4).cast("long"), F.lit(literal))
        spark.range(1).select(row).collect()

    with pytest.raises(Exception, match="have the same size"):
        call([f, f], f.size)
    with pytest.raises(Exception, match="does not list"):
        call([f], f.size + 1)


def test_without_a_jdk_the_function_is_not_built_and_the_log_says_why(tmp_path: Path, monkeypatch, caplog):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(live_row, "_reported", set())
    with caplog.at_level(logging.WARNING, logger="manifest_table.spark"):
        assert live_row.built_jar() is None
    assert "cannot build manifest_table.spark.LiveRow: no JDK (javac) on the driver" in caplog.text
    assert "broadcast anti-join instead" in caplog.text


def test_the_jvm_function_is_built_from_its_source_and_registered(spark):
    jar = live_row.built_jar()
    assert jar is not None and jar == live_row.built_jar()  # cached: built once per Spark version
    with zipfile.ZipFile(jar) as built:
        assert "manifest_table/spark/LiveRow.class" in built.namelist()
    assert live_row.available(spark) and spark.catalog.functionExists(live_row.FUNCTION)


def test_native_write_round_trip_with_exact_stats(spark, tmp_path: Path):
    uri = str(tmp_path / "t")
    df = frame(spark, 0, 300, partitions=3)
    info = write(df, uri)
    t = mt.open_table(uri)
    assert (info.version, info.operation, info.metrics["rows_added"]) == (1, "append", 300)
    assert t.schema == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()), ("ts", pa.timestamp("us", "UTC"))]
    )
    assert sorted_rows(t.to_arrow()) == sorted_rows(df)
    assert files_on_disk(uri) == referenced(t)  # no staging directory, no .crc, no _SUCCESS
    assert len(t.manifest().files) == 3
    for f in t.manifest().files:
        assert len(f.path) == len("data/") + 32 + len(".parquet")
        expected = table_stats(pq.read_table(Path(uri) / f.path))  # what a Python write records
        assert dict(f.stats) == expected, f.path
        assert f.stats["score"].max is None and f.stats["name"].max is None  # NaN, long string

    # Column order and a narrower type (int into bigint) are conformed; overwrite with where.
    more = frame(spark, 1000, 1010).selectExpr("ts", "name", "CAST(score AS FLOAT) AS score", "CAST(id AS INT) AS id")
    write(more, uri, "overwrite", where="id < 100 OR id >= 1000")
    assert ids_of(t) == list(range(100, 300)) + list(range(1000, 1010))
    assert ids_of(t, version=1) == list(range(300))
    assert sorted_rows(read(spark, uri)) == sorted_rows(t.to_arrow())
    t.delete("id >= 1005")
    assert sorted_rows(read(spark, uri).filter("id > 250")) == sorted_rows(t.scan(where="id > 250").to_arrow())


@pytest.mark.parametrize("existing", [False, True])
def test_native_write_of_columns_spark_makes_not_null(spark, tmp_path: Path, existing: bool):
    """Spark's optimiser folds ``to_date(lit(...))`` into a NOT NULL literal after analysis
    called it nullable (and ``range()`` ids are NOT NULL): the files' columns are NOT NULL,
    the table's nullable, which is fine; nulls written later into the same columns too."""
    from pyspark.sql import functions as F

    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32())])
    if existing:
        mt.create_table(uri, schema)
    info = write(spark.range(5).select("id", F.to_date(F.lit("2026-11-01")).alias("day")), uri)
    t = mt.open_table(uri)
    assert info is not None and info.committed and t.schema == schema
    write(spark.range(5, 7).select("id", F.lit(None).cast("date").alias("day")), uri)
    folded = spark.range(7, 9).select("id", F.to_date(F.lit("2026-11-01")).alias("day"))
    folded.write.format("manifest_table").mode("append").save(uri)  # the data source takes it too
    expected = [{"id": i, "day": None if i in (5, 6) else dt.date(2026, 11, 1)} for i in range(9)]
    assert sorted_rows(t.to_arrow()) == sorted_rows(read(spark, uri)) == expected
    assert t.compact(min_deleted_fraction=1.0).committed and sorted_rows(t.to_arrow()) == expected


@pytest.mark.parametrize(
    "column, data, match",
    [
        (pa.field("id", pa.int64()), [1, 2], None),  # nullable in the file, no nulls: fits NOT NULL
        (pa.field("id", pa.int64()), [1, None], "column 'id' is not nullable but holds nulls"),
        (pa.field("id", pa.int32()), [1, 2], "column 'id' is int32, the table has int64"),
    ],
)
def test_footer_check_lets_the_table_decide_nullability(tmp_path: Path, column, data, match):
    from manifest_table.spark.footer_stats import data_file_from_footer
    from manifest_table.storage import FileIO

    table = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("day", pa.date32())])
    file = pa.schema([column, pa.field("day", pa.date32(), nullable=False)])  # NOT NULL fits nullable
    pq.write_table(pa.table({"id": data, "day": [dt.date(2026, 1, 1)] * 2}, schema=file), tmp_path / "f.parquet")
    io = FileIO(LocalStore(tmp_path))
    if match is None:
        assert data_file_from_footer(io, "f.parquet", table).rows == 2
    else:
        with pytest.raises(SchemaMismatchError, match=f"^f.parquet does not fit the table: {match}$"):
            data_file_from_footer(io, "f.parquet", table)


def test_footer_stats_of_columns_after_a_nested_column(tmp_path: Path):
    """Stats are found by Parquet leaf, not by top-level index: with a struct first, column
    ``b`` got the bounds of the struct's second leaf, and ``b = 500`` pruned its file."""
    from manifest_table.spark.footer_stats import data_file_from_footer
    from manifest_table.storage import FileIO

    data = pa.table({"a": [{"x": 1, "y": 2}, {"x": 3, "y": 2}], "b": [500, 700], "c": ["p", "q"]})
    pq.write_table(data, tmp_path / "f.parquet")
    entry = data_file_from_footer(FileIO(LocalStore(tmp_path)), "f.parquet", data.schema)
    assert {name: (s.min, s.max, s.null_count) for name, s in entry.stats.items()} == {
        "b": (500, 700, 0),
        "c": ("p", "q", 0),
    }  # the struct's own nulls: unknown from its leaves


def test_native_read_under_key_value_directories(spark, tmp_path: Path):
    """Spark infers partition columns from ``key=value`` directories: under ``id=7/name=x/``
    they would replace the columns of those names."""
    uri = str(tmp_path / "id=7" / "name=x" / "t")
    t = mt.create_table(uri, SCHEMA)
    t.append(rows(0, 10))
    t.append(rows(10, 20))
    t.delete("id = 3")
    expected = sorted_rows(t.to_arrow())
    assert sorted_rows(read(spark, uri)) == expected
    assert sorted_rows(spark.read.format("manifest_table").load(uri)) == expected
    expected = sorted_rows(t.scan(where="id = 7").to_arrow())
    assert sorted_rows(read(spark, uri).filter("id = 7 OR name = 'x'")) == expected
    delete(spark, uri, "name = 'n12'")
    assert ids_of(t) == [i for i in range(20) if i not in (3, 12)]


BAD_CALLS = [  # (call on a DataFrame and the URI of a one-version table, error, message)
    (lambda df, uri: write(df, uri, "upsert"), InvalidArgumentError, r"mode must be one of \['append', 'overwrite'\]"),
    (lambda df, uri: write(df, uri, where="id < 3"), InvalidArgumentError, "where applies to overwrites only"),
    (
        lambda df, uri: write(df, uri, write_options={"compression": "gzip"}),
        InvalidArgumentError,
        "write_options must be a WriteOptions, not dict",
    ),
    (lambda df, uri: write(df, uri, "overwrite", where="nope < 3"), InvalidFilterError, "unknown column 'nope'"),
    (
        lambda df, uri: write(df.selectExpr("id"), uri),
        SchemaMismatchError,
        r"missing columns \['name', 'score', 'ts'\]",
    ),
    (
        lambda df, uri: write(df.selectExpr("id", "name", "'x' AS score", "ts"), uri),
        SchemaMismatchError,
        "column 'score' is string, the table has double",
    ),
    (lambda df, uri: read(df.sparkSession, uri, version=7), VersionNotFoundError, "7"),
    (
        lambda df, uri: read(df.sparkSession, uri, version=1, as_of="2020-01-01"),
        InvalidArgumentError,
        "version or as_of",
    ),
    (lambda df, uri: delete(df.sparkSession, uri, "nope = 1"), InvalidFilterError, "unknown column 'nope'"),
    (lambda df, uri: delete(df.sparkSession, uri, "id <"), InvalidFilterError, None),
]


@pytest.mark.parametrize("call,error,match", BAD_CALLS)
def test_bad_calls_change_nothing(spark, tmp_path: Path, call, error, match):
    uri = str(tmp_path / "t")
    write(frame(spark, 0, 10), uri)
    assert_rejected(LocalStore(uri), error, lambda: call(frame(spark, 10, 20), uri), match=match)


@pytest.mark.parametrize("location", ["", "  "])
def test_an_empty_location_is_refused_before_spark_runs(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str
):
    """The empty path is the working directory: ``write(df, "")`` made a table there."""
    monkeypatch.chdir(tmp_path)
    df = frame(spark, 0, 3)
    for call in (
        lambda: read(spark, location),
        lambda: write(df, location),
        lambda: compact(spark, location),
        lambda: delete(spark, location, "id = 1"),
        lambda: upsert(spark, location, df, ["id"]),
    ):
        with pytest.raises(InvalidArgumentError, match="the table location is"):
            call()
    for call in (
        lambda: df.write.format("manifest_table").mode("append").save(location),
        lambda: spark.read.format("manifest_table").load(location).count(),
    ):
        with pytest.raises(Exception, match="the table location is|no table URI"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_native_write_failing_task_commits_nothing(spark, tmp_path: Path):
    uri = str(tmp_path / "t")
    write(frame(spark, 0, 10), uri)
    before = files_on_disk(uri)
    df = failing_at_marker(frame(spark, 1000, 2000, partitions=4))
    with pytest.raises(Exception, match="injected failure"):
        write(df, uri)
    t = mt.open_table(uri)
    assert t.version == 1 and ids_of(t) == list(range(10))
    assert files_on_disk(uri) == before == referenced(t)


def test_native_write_retried_task_duplicates_nothing(spark, tmp_path: Path):
    """One task's first attempt fails after writing part of its file; Spark retries it. Only
    the committed attempt's file is gathered: every row is in the table once."""
    uri = str(tmp_path / "t")

    @udf("long")
    def fail_first_attempt(value: int) -> int:
        if value == 1900 and TaskContext.get().attemptNumber() == 0:
            raise ValueError("first attempt dies")
        return value

    write(frame(spark, 0, 2000, partitions=4).withColumn("id", fail_first_attempt(col("id"))), uri)
    t = mt.open_table(uri)
    assert t.version == 1 and ids_of(t) == list(range(2000))
    assert files_on_disk(uri) == referenced(t) and len(referenced(t)) == 4


class WithoutContext:
    """A session as Spark Connect gives it: no SparkContext (and so no RDD API)."""

    def __init__(self, spark) -> None:
        self._spark = spark

    @property
    def sparkContext(self):
        raise AssertionError("the native path must not need a SparkContext")

    def __getattr__(self, name: str):
        return getattr(self._spark, name)


def test_native_delete_and_compact_race_a_python_writer(spark, tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), FLAT)
    for k in range(6):
        t.append(flat_rows(100 * k, 100 * (k + 1)))
    t.delete("id < 10")
    appended: list[int] = []
    deleted: list[int] = []

    def python_writer() -> None:
        table = mt.open_table(t.uri)
        for k in range(8):
            start = 20_000 + 10 * k  # never matches the delete below
            if table.append(flat_rows(start, start + 10)).committed:
                appended.extend(range(start, start + 10))
            if table.delete(f"id = {500 + k}").committed:
                deleted.append(500 + k)

    thread = threading.Thread(target=python_writer)
    thread.start()
    where = "name LIKE 'n1%' OR id IN (15, 301) OR ts < TIMESTAMP '2020-01-01 00:30:00'"
    expected_gone = set(t.scan(where=where).to_arrow().column("id").to_pylist())
    info = delete(WithoutContext(spark), t.uri, where)
    compacted = compact(WithoutContext(spark), t.uri, target_file_size=64 * 1024 * 1024, min_deleted_fraction=0.01)
    thread.join()
    assert info.committed and info.metrics["rows_deleted"] == len(expected_gone)
    assert compacted.committed and compacted.parameters["engine"] == "spark"
    assert len(deleted) == 8 and len(appended) == 80
    expected = (set(range(10, 600)) - expected_gone - set(deleted)) | set(appended)
    assert ids_of(t) == sorted(expected)
    assert sorted_rows(read(spark, t.uri)) == sorted_rows(t.to_arrow())
    assert not delete(spark, t.uri, "id > 100000").committed


def test_compaction_keeps_row_order_for_remapping(spark, tmp_path: Path):
    """Each output holds its group's live rows in manifest order, then row order: here 8
    files in 4 groups of 2, which the shuffle may put 2 to a task."""
    t = mt.create_table(str(tmp_path / "t"), FLAT)
    for k in (3, 0, 2, 1, 7, 4, 6, 5):  # files whose ids do not ascend across the manifest
        t.append(flat_rows(50 * k, 50 * (k + 1)))
    t.delete(f"id IN ({', '.join(str(i) for i in range(0, 400, 4))})")
    sources = [ids_of_file(t, f.path) for f in t.manifest().files]  # live ids, manifest order
    size = t.manifest().files[0].size
    info = compact(WithoutContext(spark), t.uri, target_file_size=int(size * 2.2))  # the native path
    assert (info.metrics["files_removed"], info.metrics["files_added"]) == (8, 4)
    for f in t.manifest().files:
        written = pq.read_table(Path(t.uri) / f.path).column("id").to_pylist()
        assert written == [i for ids in sources if ids[0] in written for i in ids]


def ids_of_file(table: mt.Table, path: str) -> list[int]:
    live = set(table.to_arrow().column("id").to_pylist())
    return [i for i in pq.read_table(Path(table.uri) / path).column("id").to_pylist() if i in live]


def test_fallback_to_the_data_source_is_logged_once(spark, tmp_path: Path, caplog):
    """A NOT NULL column is one Spark's writer cannot keep: such a table goes through the
    data source, with the same rows."""
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    t = mt.create_table(uri, schema)
    df = spark.range(0, 20).selectExpr("id", "concat('n', id) AS name")
    native_location._reported.discard("write-types")  # as in a fresh driver
    with caplog.at_level(logging.WARNING, logger="manifest_table.spark"):
        assert write(df, uri) is None
        write(df, uri)
    assert ids_of(t) == sorted(list(range(20)) * 2)
    assert sum("Python data source" in r.getMessage() for r in caplog.records) == 1
    write(df.filter("id >= 15"), uri, "overwrite", where="id >= 10")  # the where option of the data source
    assert ids_of(t) == sorted(list(range(10)) * 2 + list(range(15, 20)))
    assert sorted_rows(read(spark, uri)) == sorted_rows(t.to_arrow())


def test_a_column_named_metadata_goes_through_the_data_source(spark, tmp_path: Path):
    """Spark's ``_metadata`` (the file and row position a native read with deletes needs) is
    hidden by a column of that name: such a table is read by the data source."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("_METADATA", pa.string())]))
    t.append(pa.table({"id": [1, 2, 3], "_METADATA": ["a", "b", "c"]}))
    t.delete("id = 2")
    df = read(spark, t.uri)
    assert "BatchScan manifest_table" in df._jdf.queryExecution().executedPlan().toString()
    assert sorted_rows(df) == sorted_rows(t.to_arrow())


def test_s3_without_s3a_falls_back(spark, s3_uri: str, moto_endpoint: str):
    options = {
        "endpoint_url": moto_endpoint,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }
    t = mt.create_table(s3_uri, SCHEMA, storage_options=options)
    t.append(rows(0, 20))
    t.delete("id < 5")
    assert sorted_rows(read(spark, s3_uri, storage_options=options)) == sorted_rows(t.to_arrow())


@pytest.mark.parametrize("how", ["read", "write"])
def test_misspelled_options_are_refused_with_the_known_ones(spark, tmp_path: Path, how):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    known = r"unknown manifest_table option\(s\) \['verison'\]; known options: .*'version'"
    with pytest.raises(Exception, match=known):
        if how == "read":
            spark.read.format("manifest_table").option("verison", 1).load(t.uri).collect()
        else:
            spark.range(3).write.format("manifest_table").option("verison", 1).mode("append").save(t.uri)
    assert t.version == 0


def test_literals_a_column_cannot_hold_are_left_to_our_evaluator(spark, tmp_path: Path):
    """Binding keeps literals the column's type cannot hold and compares them exactly; Spark
    would cast them its own way, so the delete's Spark-side narrowing leaves them out, and the
    rows deleted are exactly those the Python API deletes."""
    from manifest_table.expressions import parse
    from manifest_table.spark.to_spark import exact

    schema = pa.schema([("i", pa.int32()), ("d", pa.decimal128(10, 2))])
    for text in ("i = 100000000000000000000", "i < 0.5", "d = 1.005", "i IN (1, 100000000000000000000)"):
        assert exact(parse(text).bind(schema), schema) is None, text
    assert exact(parse("i = 5 AND d = 1.25 OR i IN (1, 2, 3)").bind(schema), schema) is not None

    data = pa.table(
        {
            "i": pa.array([-1, 0, 1, 2], pa.int32()),
            "d": pa.array([Decimal("0.99"), Decimal("1.00"), Decimal("1.01"), None], pa.decimal128(10, 2)),
        }
    )
    python, native = (mt.create_table(str(tmp_path / name), data.schema) for name in ("python", "native"))
    for t in (python, native):
        t.append(data)
    for where in ("i < 0.5", "d < 1.005 OR i = 100000000000000000000"):
        python.delete(where)
        delete(spark, native.uri, where)
        assert native.to_arrow().sort_by("i").to_pylist() == python.to_arrow().sort_by("i").to_pylist(), where


def test_an_overwrite_refuses_rows_outside_its_condition(spark, tmp_path: Path):
    """Issue 30 item 1, on both paths: a row outside ``where`` would sit beside the rows it was
    meant to replace, so the write is refused and nothing is written (not even a missing
    table); ``require_match=False`` (option ``requireMatch`` ``"false"``) writes it."""
    uri = str(tmp_path / "t")
    df = spark.sql("SELECT 1L AS id, DATE '2026-11-01' AS day UNION ALL SELECT 2L, DATE '2026-11-02'")
    where = "day = DATE '2026-11-01'"
    assert_rejected(
        LocalStore(uri),
        InvalidArgumentError,
        lambda: write(df, uri, "overwrite", where=where),
        match=r"1 of the 2 new rows does not satisfy .* day = DATE '2026-11-02'.*requireMatch false",
    )
    with pytest.raises(TableNotFoundError):
        mt.open_table(uri)  # (Spark's staging directories are left empty: no object)
    write(df, uri)
    t = mt.open_table(uri)
    for path in ("native", "source"):
        attempt = (
            (lambda: write(df, uri, "overwrite", where=where))
            if path == "native"
            else (lambda: df.write.format("manifest_table").mode("overwrite").option("where", where).save(uri))
        )
        with pytest.raises(Exception, match="does not satisfy"):
            attempt()
        assert t.version == 1 and {f.name for f in Path(uri, "data").iterdir()} == {
            f.path[len("data/") :] for f in t.manifest().files
        }
    write(df.filter(where), uri, "overwrite", where=where)
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]
    df.write.format("manifest_table").mode("overwrite").option("where", where).option("requireMatch", "false").save(uri)
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 2]


def test_a_delete_by_what_sql_users_type_deletes_what_python_does(spark, tmp_path: Path):
    """Issue 30 item 9 on Spark: ``%`` is translated to Spark's own ``%`` (SQL's remainder);
    lower(), upper() and ILIKE are left to our evaluator (Spark maps case by Java's rules),
    and either way a native delete removes exactly the rows the Python API removes."""
    from manifest_table.expressions import parse
    from manifest_table.spark.to_spark import exact

    schema = pa.schema([("i", pa.int32()), ("s", pa.string())])
    assert exact(parse("i % -3 = -1 AND i % 2 IN (0, 1)").bind(schema), schema) is not None
    for text in ("lower(s) = 'a'", "upper(s) LIKE 'A%'", "s ILIKE 'a%'"):
        assert exact(parse(text).bind(schema), schema) is None, text
    data = pa.table({"i": pa.array([-7, -3, 0, 4, 5, None], pa.int32()), "s": ["Ab", "aB", "İx", "b", None, "AB"]})
    python, native = (mt.create_table(str(tmp_path / name), data.schema) for name in ("python", "native"))
    for t in (python, native):
        t.append(data)
    for where in ("i % 3 = -1", "i % -2 = 0 OR lower(s) = 'ab'", "s ILIKE 'i%'"):
        python.delete(where)
        delete(spark, native.uri, where)
        assert native.to_arrow().to_pylist() == python.to_arrow().to_pylist(), where


@pytest.mark.parametrize("python", ["/nonexistent/python3", "/usr/bin/python3"])
def test_workers_without_the_package_are_refused_before_the_job(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str
):
    """Issue 30 item 10: a worker Python that cannot import the package (missing, or one
    without it or its dependencies) is one clear error before any job starts, not a hundred
    lines ending in ModuleNotFoundError from a task."""
    if not Path(python).exists() and python != "/nonexistent/python3":
        pytest.skip(f"no {python} here")
    t = mt.create_table(str(tmp_path / "t"), FLAT)
    t.append(flat_rows(0, 10))
    monkeypatch.setattr(spark.sparkContext, "pythonExec", python)  # as if PYSPARK_PYTHON named it
    for call in (lambda: delete(spark, t.uri, "id < 3"), lambda: register(spark)):
        with pytest.raises(
            InvalidArgumentError, match=f"Spark starts its Python workers with '{python}'.*set PYSPARK_PYTHON"
        ):
            call()
    assert t.version == 1


def test_native_writes_keep_the_tables_bloom_filters(spark, tmp_path: Path):
    """Spark's Parquet writer keeps a bloom filter per row group of the table's
    ``bloom_filter_columns`` (an append, an upsert's new rows, a compaction's outputs), sized
    by parquet-mr for the rows each group holds, in the format our lookups probe: a key a
    group lacks rules it out, a key it holds never does, and lookups equal the rows."""
    uri = str(tmp_path / "t")
    mt.create_table(uri, pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                                    ("ts", pa.timestamp("us", "UTC"))]),
                    properties={"bloom_filter_columns": ["id"]})
    shuffled = frame(spark, 0, 40_000).withColumn("id", F.col("id") * 2).orderBy(F.rand(7))  # even ids, spread
    write(shuffled, uri, write_options=WriteOptions(row_group_size="64KiB"))
    upsert(spark, uri, frame(spark, 100_000, 100_010, partitions=1).withColumn("id", F.col("id") * 2), ["id"])
    t = mt.open_table(uri)

    def filters(table: mt.Table) -> list[tuple[pq.ParquetFile, int]]:
        out = []
        for f in table.manifest().files:
            file = pq.ParquetFile(Path(uri) / f.path)
            for g in range(file.metadata.num_row_groups):
                assert file.metadata.row_group(g).column(0).bloom_filter_offset, (f.path, g)
                out.append((f, g))
        return out

    def probes(table: mt.Table, key: int) -> list[bool]:
        """Per row group, whether its filter lets ``key`` through (what a lookup reads)."""
        io, answers = FileIO(table.store), []
        for f in table.manifest().files:
            def probe(source):
                return [bloom_probes.membership(source, g, 0)(key) for g in range(source.metadata.num_row_groups)]
            answers += io.read_parquet(f.path, f.size, probe)
        return answers

    assert len(filters(t)) > 4
    data = t.to_arrow()
    for k in (2, 13_578, 79_998, 200_004):  # present: its group is always read
        assert sum(probes(t, k)) >= 1
        assert t.scan(where=f"id = {k}").to_arrow().equals(data.filter(pc.equal(data["id"], k)))
    absent = [probes(t, k) for k in range(1, 2001, 100)]  # odd ids: in no group
    assert sum(map(sum, absent)) <= 0.05 * sum(map(len, absent))
    compact(WithoutContext(spark), uri, target_file_size="64MiB", min_deleted_fraction=0.0)
    t = mt.open_table(uri)
    assert len(t.manifest().files) == 1 and filters(t)  # (the table's 16 MiB row groups: one)
    assert sorted_rows(t.to_arrow()) == sorted_rows(data)
    assert sum(probes(t, 13_578)) >= 1 and sum(probes(t, 13_579)) <= 1

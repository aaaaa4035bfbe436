"""Other engines read a table natively and see exactly what ``scan()`` sees: the Arrow
stream protocol (pyarrow, Polars, DuckDB, pandas), ``Table.to_duckdb`` (DuckDB's own
Parquet reader, deletes anti-joined) and ``Table.to_polars`` (an IO plugin)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, VersionNotFoundError
from manifest_table.storage import MemoryStore
from tests.catalog import assert_rejected
from tests.conftest import make_store
from tests.stores import CountingStore

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                    ("amount", pa.decimal128(10, 2)), ("day", pa.date32()),
                    ("ts", pa.timestamp("us", tz="UTC")), ("ok", pa.bool_())])


def rows(start: int, stop: int) -> pa.Table:
    ids = range(start, stop)
    return pa.table({
        "id": [None if i % 7 == 6 else i for i in ids],
        "name": [f"n{i}" if i % 5 else None for i in ids],
        "score": [i / 4 for i in ids],
        "amount": [Decimal(i) / 100 for i in ids],
        "day": [date(2025, 1, 1 + i % 28) for i in ids],
        "ts": [datetime(2025, 1, 1, tzinfo=UTC).replace(second=i % 60) for i in ids],
        "ok": [i % 2 == 0 for i in ids]}, schema=SCHEMA)


def build(table: mt.Table) -> mt.Table:
    """v1: ids 0-299 in three files; v2: a delete across two files; v3: one more file;
    v4: another delete, into a file that already has deletes."""
    with table.transaction() as tx:
        for start in (0, 100, 200):
            tx.append(rows(start, start + 100))
    table.delete("id IN (3, 13, 23, 33, 43, 53, 63, 73, 83, 93, 103, 113, 123, 133, 143)")
    table.append(rows(300, 400))
    table.delete("id IN (4, 5, 333)")
    return table


@pytest.fixture(params=["local", "memory", "s3"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> mt.Table:
    """The same table on each kind of store (DuckDB reads S3 through Arrow here: the
    sandbox has no httpfs extension)."""
    store = make_store(request.param, request, tmp_path)
    uri = str(tmp_path / "table") if request.param == "local" else "memory://t"
    table = mt.create_table(uri, SCHEMA, store=store, row_group_size=30)
    return build(table)


def canonical(data: pa.Table) -> list[tuple]:
    """Rows as sorted tuples (engines need not keep order)."""
    return sorted((tuple(r.values()) for r in data.to_pylist()), key=repr)


CASES = [  # (version, where as our filter, the same in SQL, the same in Polars, columns)
    (None, None, None, None, None),
    (None, "id > 250", "id > 250", pl.col("id") > 250, ["name", "id"]),
    (2, "name LIKE 'n1%' OR id IS NULL", "name LIKE 'n1%' OR id IS NULL",
     pl.col("name").str.starts_with("n1") | pl.col("id").is_null(), None),
    (1, None, None, None, ["amount", "ts"]),
    (4, "score >= 20 AND ok = true", "score >= 20 AND ok = true", (pl.col("score") >= 20) & pl.col("ok"),
     ["id", "day"]),
]


@pytest.mark.parametrize("version, where, sql, predicate, columns", CASES)
def test_engines_see_what_scan_sees(table: mt.Table, version, where, sql, predicate, columns) -> None:
    scan = table.scan(columns=columns, where=where, version=version)
    expected = scan.to_arrow()
    assert expected.num_rows > 0
    want = canonical(expected)
    names = columns or SCHEMA.names

    # The Arrow stream protocol.
    assert pa.table(scan).equals(expected)
    assert scan.to_reader().read_all().equals(expected)
    assert canonical(pl.DataFrame(scan).to_arrow().cast(expected.schema)) == want
    assert canonical(duckdb.sql("FROM scan").arrow().read_all().cast(expected.schema)) == want
    assert scan.to_pandas().equals(pa.table(scan).to_pandas())

    # DuckDB's own reader.
    con = duckdb.connect()
    table.to_duckdb(con, "t", version=version)
    query = f"SELECT {', '.join(names)} FROM t" + (f" WHERE {sql}" if sql else "")
    assert canonical(con.sql(query).arrow().read_all().cast(expected.schema)) == want

    # Polars.
    frame = table.to_polars(version=version)
    if predicate is not None:
        frame = frame.filter(predicate)
    assert canonical(frame.select(names).collect().to_arrow().cast(expected.schema)) == want


def test_the_stream_reads_lazily() -> None:
    """A reader that has yielded one batch has not read every file: nothing is materialised."""
    store = CountingStore(MemoryStore())
    table = mt.create_table("memory://t", SCHEMA, store=store)
    for start in range(0, 400, 20):
        table.append(rows(start, start + 20))
    reader = table.scan().to_reader()
    store.reset()
    next(iter(reader))
    assert 0 < store.reset()[("get", "data")] < 20


def test_each_stream_is_a_new_read_of_the_same_snapshot(tmp_path: Path) -> None:
    table = build(mt.create_table(tmp_path / "t", SCHEMA))
    scan = table.scan()
    first = pa.table(scan)
    table.delete("id < 100")
    assert pa.table(scan).equals(first) and first.num_rows == 400 - 13 - 3  # ids 13 and 83 are null
    assert table.scan().count() < first.num_rows


def test_duckdb_view_is_the_table_and_pushes_down(tmp_path: Path) -> None:
    table = build(mt.create_table(tmp_path / "t", SCHEMA))
    con = duckdb.connect()
    relation = table.to_duckdb(con, "events")
    assert relation.columns == SCHEMA.names
    assert [r[0] for r in con.sql("DESCRIBE events").fetchall()] == SCHEMA.names
    plan = con.sql("EXPLAIN SELECT name FROM events WHERE id > 250").fetchall()[0][1]
    assert "READ_PARQUET" in plan and "id>250" in plan.replace(" ", "") and "ANTI" in plan
    assert "Union" in plan  # the file without deletes is read apart, never meeting the join
    # Deleted positions were loaded for the files that have deletes only.
    deleted = con.sql('SELECT count(*), count(DISTINCT filename) FROM "__manifest_table_deleted_events"').fetchall()[0]
    assert deleted == (13 + 3, 3) and len(table.manifest().files) == 4
    # Time travel and re-registration under the same name.
    table.to_duckdb(con, "events", version=1)
    assert con.sql("SELECT count(*) FROM events").fetchall()[0] == (300,)
    plan = con.sql("EXPLAIN SELECT * FROM events").fetchall()[0][1]
    assert "ANTI" not in plan  # no deletes in version 1: a plain Parquet scan
    first = table.history()[-2].timestamp
    table.to_duckdb(con, "events", as_of=first)
    assert con.sql("SELECT count(*) FROM events").fetchall()[0] == (300,)
    table.to_duckdb(con, "events", version=0)
    assert con.sql("SELECT count(*) FROM events").fetchall()[0] == (0,)
    assert [r[0] for r in con.sql("DESCRIBE events").fetchall()] == SCHEMA.names


def test_duckdb_replaces_its_own_views_never_a_table(tmp_path: Path) -> None:
    """The same name moves between a native view and an Arrow fallback; a user's table of
    that name is refused and left as it was."""
    local = build(mt.create_table(tmp_path / "t", SCHEMA))
    memory = build(mt.create_table("memory://t", SCHEMA, store=MemoryStore()))
    con = duckdb.connect()
    for table, version in ((local, None), (memory, 1), (local, 2), (memory, None)):
        table.to_duckdb(con, "events", version=version)
        assert con.sql("SELECT count(*) FROM events").fetchall()[0] == (table.scan(version=version).count(),)
    con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
    assert_rejected(local.store, InvalidArgumentError, lambda: local.to_duckdb(con, "mine"), match="is a table")
    assert con.sql("FROM mine").fetchall() == [(42,)]


def test_duckdb_refuses_a_view_or_object_of_the_users(tmp_path: Path) -> None:
    """A view, a registered DataFrame or a table of the user's, in any case or schema, is
    refused and left as it was: a temporary view of ours would replace or hide it."""
    table = build(mt.create_table(tmp_path / "t", SCHEMA))
    con = duckdb.connect()
    con.execute("CREATE VIEW mine AS SELECT 42 AS answer")
    con.execute("CREATE TEMP VIEW scratch AS SELECT 43 AS answer")
    con.register("frame", pa.table({"answer": [44]}))
    con.execute('CREATE TABLE "Upper" AS SELECT 45 AS answer')
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE VIEW s.other AS SELECT 46 AS answer")
    for name, kind, answer in (("mine", "view", 42), ("scratch", "view", 43), ("frame", "view", 44),
                               ("upper", "table", 45), ("other", "view", 46)):
        assert_rejected(table.store, InvalidArgumentError, lambda: table.to_duckdb(con, name), match=f"is a {kind}")
        source = "s.other" if name == "other" else name
        assert con.sql(f"SELECT answer FROM {source}").fetchall() == [(answer,)]
    table.to_duckdb(con, "events")  # ours, replaced by a later call
    assert table.to_duckdb(con, "EVENTS", version=1).count("*").fetchall() == [(300,)]


def test_duckdb_reads_the_data_not_the_directory_names(tmp_path: Path) -> None:
    """Under ``region=EU/id=7/`` DuckDB's hive partitioning would read the directory's
    values (and prune files by them) instead of the columns of the same names."""
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    table = mt.create_table(tmp_path / "region=EU" / "id=7" / "t", schema)
    table.append(pa.table({"id": [1, 2, 3], "region": ["US", "FR", "DE"]}, schema=schema))
    table.append(pa.table({"id": [7, 8], "region": ["EU", "JP"]}, schema=schema))
    table.delete("id = 2")
    want = sorted(tuple(r.values()) for r in table.to_arrow().to_pylist())
    con = duckdb.connect()
    table.to_duckdb(con, "t")
    assert sorted(con.sql("FROM t").fetchall()) == want == [(1, "US"), (3, "DE"), (7, "EU"), (8, "JP")]
    assert con.sql("SELECT id FROM t WHERE region = 'US' OR id = 8 ORDER BY id").fetchall() == [(1,), (8,)]
    assert sorted(tuple(r.values()) for r in table.to_polars().collect().to_dicts()) == want
    assert table.to_polars().filter(pl.col("id") == 7).collect().to_dicts() == [{"id": 7, "region": "EU"}]


def test_duckdb_reads_a_path_with_glob_characters_literally(tmp_path: Path) -> None:
    """DuckDB expands ``?`` in a path: a copy of the table in ``ab`` would be read too."""
    import shutil

    table = build(mt.create_table(tmp_path / "a?" / "t", SCHEMA))
    shutil.copytree(tmp_path / "a?", tmp_path / "ab")
    con = duckdb.connect()
    table.to_duckdb(con, "t")
    assert con.sql("SELECT count(*) FROM t").fetchall() == [(table.scan().count(),)]


def test_duckdb_keeps_nan_rows_and_binary_columns(tmp_path: Path) -> None:
    """Footer min/max leave NaN out; DuckDB orders NaN above every number, so trusting them
    drops NaN rows from ``x > 5``. A connection's ``binary_as_string`` must not retype binary."""
    schema = pa.schema([("x", pa.float64()), ("f", pa.float32()), ("b", pa.binary())])
    table = mt.create_table(tmp_path / "t", schema)
    table.append(pa.table({"x": [1.0, float("nan"), 3.0], "f": [1.0, float("nan"), 3.0],
                           "b": [b"a", b"\xff", None]}, schema=schema))
    con = duckdb.connect()
    con.execute("SET binary_as_string = true")
    table.to_duckdb(con, "t")
    assert table.scan(where="x > 5").count() == 1
    for where in ("x > 5", "f > 5", "isnan(x)", "x = 'NaN'::DOUBLE"):
        assert con.sql(f"SELECT b FROM t WHERE {where}").fetchall() == [(b"\xff",)], where


def test_duckdb_sees_a_column_named_like_its_virtual_ones(tmp_path: Path) -> None:
    """A real ``filename`` column would hide DuckDB's: such a table goes through Arrow."""
    schema = pa.schema([("filename", pa.string()), ("file_row_number", pa.int64())])
    table = mt.create_table(tmp_path / "t", schema)
    table.append(pa.table({"filename": ["a", "b", "c"], "file_row_number": [7, 8, 9]}, schema=schema))
    table.delete("filename = 'b'")
    con = duckdb.connect()
    table.to_duckdb(con, "t")
    assert sorted(con.sql("FROM t").fetchall()) == [("a", 7), ("c", 9)]


def test_polars_pushes_projection_and_stops_at_the_limit() -> None:
    store = CountingStore(MemoryStore())
    table = mt.create_table("memory://t", SCHEMA, store=store)
    for start in range(0, 400, 20):
        table.append(rows(start, start + 20))
    frame = table.to_polars()
    plan = frame.filter(pl.col("id") > 5).select("name").explain()
    assert "PYTHON[manifest_table]" in plan and "SELECTION" in plan
    store.reset()
    assert frame.head(3).collect().height == 3
    assert store.reset()[("get", "data")] < 20
    assert frame.select(pl.len()).collect().item() == table.scan().count()


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    table = build(mt.create_table(tmp_path / "t", SCHEMA))
    con = duckdb.connect()
    assert_rejected(table.store, InvalidArgumentError, lambda: table.to_duckdb("not a connection", "t"),
                    match="duckdb connection")
    assert_rejected(table.store, InvalidArgumentError, lambda: table.to_duckdb(con, ""), match="view name")
    assert_rejected(table.store, InvalidArgumentError, lambda: table.to_duckdb(con, "v\ud800"),
                    match="view name is not valid Unicode")
    assert_rejected(table.store, InvalidArgumentError, lambda: table.to_duckdb(con, "t", version=1, as_of="2025"),
                    match="not both")
    assert_rejected(table.store, VersionNotFoundError, lambda: table.to_polars(version=99), match="99")
    assert_rejected(table.store, VersionNotFoundError, lambda: table.to_duckdb(con, "t", version=99), match="99")


def test_the_interop_benchmark_runs(tmp_path: Path) -> None:
    """``python -m tests.benchmarks.interop`` on tiny data: how docs/interop.md's figures
    are reproduced, so it must not rot (its timings are not checked)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tests.benchmarks.interop", "--workdir", str(tmp_path),
                           "--rows", "20000", "--csv-rows", "2000", "--repeat", "1", "--file-mb", "0.2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "to_duckdb with deletes" in done.stdout and "manifest-table scan --format csv" in done.stdout


def test_duckdb_reads_a_duration_column_added_by_a_schema_change(tmp_path: Path) -> None:
    """DuckDB reads a duration from Parquet as its BIGINT count (Parquet has no duration);
    the view cast the NULLs of older files to the INTERVAL of the Arrow type, and the union
    of the two failed ("Unimplemented type for cast (BIGINT -> INTERVAL)"), also nested in a
    struct (found by tests/reads/test_differential.py)."""
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))
    nested = pa.struct([("d", pa.duration("ms"))])
    with table.update_schema() as change:
        change.add_column("d", pa.duration("s"))
        change.add_column("s", nested)
    table.append(pa.table({"id": [2], "d": pa.array([5], pa.duration("s")), "s": pa.array([{"d": 7}], nested)}))
    con = duckdb.connect()
    table.to_duckdb(con, "t")
    assert sorted(con.sql("SELECT id, d, s.d FROM t").fetchall()) == [(1, None, None), (2, 5, 7)]


def test_polars_reads_a_fixed_size_list_column_added_by_a_schema_change(tmp_path: Path) -> None:
    """Older files read the new column as nulls, sliced into batches by row group; Polars
    cannot import a sliced fixed-size list with nulls ("validity mask length must be equal
    to the number of values divided by size"), also inside a struct (found by
    tests/reads/test_differential.py)."""
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]), row_group_size=512)
    table.append(pa.table({"id": list(range(200))}))
    pair = pa.list_(pa.int64(), 2)
    with table.update_schema() as change:
        change.add_column("f", pair)
        change.add_column("s", pa.struct([("f", pair)]))
    table.append(pa.table({"id": [200], "f": pa.array([[1, 2]], pair),
                           "s": pa.array([{"f": [3, 4]}], pa.struct([("f", pair)]))}))
    frame = table.to_polars().collect()
    assert frame.height == 201 and frame["f"].null_count() == 200
    assert frame.filter(pl.col("id") == 200)["f"].to_list() == [[1, 2]]


def test_duckdb_warns_when_it_falls_back_to_an_in_memory_table(tmp_path, caplog: pytest.LogCaptureFixture):
    """docs/interop.md promises a warning: the whole version is then held in memory (it was
    INFO for a glob in the path or a missing httpfs, and silent for an in-memory store)."""
    import logging

    con = duckdb.connect()
    for uri, store in (("memory://t", MemoryStore()), (str(tmp_path / "glob[1]"), None)):
        table = mt.create_table(uri, pa.schema([("id", pa.int64())]), store=store)
        table.to_duckdb(con, "empty")  # no file: nothing to warn about
        table.append(pa.table({"id": [1, 2]}))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="manifest_table.interop"):
            assert table.to_duckdb(con, "v").fetchall() == [(1,), (2,)]
        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1 and table.uri in warned[0].getMessage() and "in-memory Arrow table" in \
            warned[0].getMessage()

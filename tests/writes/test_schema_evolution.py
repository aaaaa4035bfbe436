"""Schema evolution (issue 12): every change kind with data written before and after it, read
back at every version; files resolved by field id (or, without ids, through the name
mapping); stats, deletes, compaction, concurrency, interop and bad changes."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.errors import (
    CommitConflictError,
    InvalidArgumentError,
    SchemaEvolutionError,
    SchemaMismatchError,
    UpgradeRequiredError,
)
from manifest_table.format.field_ids import FIELD_ID
from manifest_table.storage import LocalStore

DATA = Path(__file__).parents[1] / "data"
SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("score", pa.float32()),
                    ("amount", pa.decimal128(5, 2)), ("tag", pa.string())])


def batch(ids: list[int], schema: pa.Schema = SCHEMA) -> pa.Table:
    """Rows whose values follow from ``id``, in whichever schema the table has then."""
    values = {"id": ids, "name": [f"n{i}" for i in ids], "new_name": [f"n{i}" for i in ids],
              "score": [i / 2 for i in ids], "amount": [Decimal(i) / 100 for i in ids], "tag": [f"t{i}" for i in ids],
              "extra": [i * 10 for i in ids]}
    return pa.table({f.name: pa.array(values[f.name], f.type) for f in schema}, schema=schema)


def rows(table: pa.Table) -> list[dict]:
    """Rows sorted by id, NaN made comparable."""
    return [{k: ("NaN" if isinstance(v, float) and v != v else v) for k, v in row.items()}
            for row in table.sort_by("id").to_pylist()]


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    return mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"tail_limit": 2})


def written_ids(t: mt.Table, path: str) -> list[int | None]:
    schema = pq.read_schema(Path(t.uri) / path)
    return [int(f.metadata[FIELD_ID]) if f.metadata and FIELD_ID in f.metadata else None for f in schema]


def test_every_change_kind_reads_back_at_every_version(table: mt.Table) -> None:
    """Data before and after each change; each version reads with its own schema. A tail
    limit of 2 makes segments written under earlier schemas (decoded under later ones)."""
    expected: dict[int, list[dict]] = {}

    def append(ids: list[int]) -> None:
        table.append(batch(ids, table.schema))
        expected[table.version] = rows(table.to_arrow())

    append([1, 2])
    append([3])
    with table.update_schema() as s:
        s.add_column("extra", pa.int64())
    assert table.schema.field("extra").nullable
    expected[table.version] = [{**r, "extra": None} for r in expected[table.version - 1]]
    append([4, 5])
    with table.update_schema() as s:
        s.rename_column("name", "new_name")
    expected[table.version] = [{("new_name" if k == "name" else k): v for k, v in r.items()}
                               for r in expected[table.version - 1]]
    append([6])
    with table.update_schema() as s:
        s.drop_column("tag")
    expected[table.version] = [{k: v for k, v in r.items() if k != "tag"} for r in expected[table.version - 1]]
    append([7])
    with table.update_schema() as s:
        s.widen("id", pa.int64())
        s.widen("score", pa.float64())
        s.widen("amount", pa.decimal128(16, 2))
        s.set_nullable("id")
    assert table.schema.field("id").type == pa.int64() and table.schema.field("score").type == pa.float64()
    expected[table.version] = expected[table.version - 1]
    append([8, 2**40])

    assert rows(table.to_arrow()) == expected[table.version]
    assert table.to_arrow().schema == table.schema
    for version, want in expected.items():
        assert rows(table.scan(version=version).to_arrow()) == want, version
        assert table.scan(version=version).count() == len(want)
    assert table.scan(version=2).schema == SCHEMA
    ops = [c.operation for c in reversed(table.history())]
    assert ops.count("update_schema") == 4
    assert table.history()[1].parameters["schema_changes"] == [
        "widen id int32 -> int64", "widen score float -> double", "widen amount decimal128(5, 2) -> decimal128(16, 2)",
        "set_nullable id"]


def test_field_ids_come_from_last_field_id_and_are_never_reused(table: mt.Table) -> None:
    table.append(batch([1]))
    with table.update_schema() as s:
        s.drop_column("tag")
        s.add_column("tag", pa.string())
    manifest = table.manifest()
    assert manifest.fields.ids == (1, 2, 3, 4, 6) and manifest.index.last_field_id == 6
    table.append(batch([2], table.schema))
    newest = table.manifest().tail[-1].path
    assert written_ids(table, newest) == [1, 2, 3, 4, 6]
    assert rows(table.to_arrow()) == [{"id": 1, "name": "n1", "score": 0.5, "amount": Decimal("0.01"), "tag": None},
                                      {"id": 2, "name": "n2", "score": 1.0, "amount": Decimal("0.02"), "tag": "t2"}]


def test_rename_then_add_the_old_name_is_a_new_column(table: mt.Table) -> None:
    table.append(batch([1, 2]))
    with table.update_schema() as s:
        s.rename_column("name", "new_name")
        s.add_column("name", pa.string())
    table.append(batch([3], pa.schema([*SCHEMA.remove(1), ("new_name", pa.string())])).append_column(
        "name", pa.array(["fresh"])).select(table.schema.names))
    got = {r["id"]: (r["new_name"], r["name"]) for r in table.to_arrow().to_pylist()}
    assert got == {1: ("n1", None), 2: ("n2", None), 3: ("n3", "fresh")}
    assert [r["id"] for r in table.scan(where="name IS NULL").to_arrow().to_pylist()] == [1, 2]
    assert [r["id"] for r in table.scan(where="new_name = 'n2'").to_arrow().to_pylist()] == [2]
    # The file written after the change carries new_name as "name": its stats are keyed by the
    # table's names, so neither filter prunes it by the other column's values.
    assert [r["id"] for r in table.scan(where="name = 'fresh'").to_arrow().to_pylist()] == [3]
    assert [r["id"] for r in table.scan(where="new_name = 'n3'").to_arrow().to_pylist()] == [3]


def test_stats_follow_columns_by_id_and_never_prune_wrongly(table: mt.Table) -> None:
    for i in range(1, 6):
        table.append(batch([i]))
    with table.update_schema() as s:
        s.rename_column("score", "points")
        s.add_column("extra", pa.int64())
        s.widen("id", pa.int64())
    # The renamed column keeps its stats: a filter on it plans one file of five.
    assert len(table.scan(where="points = 1.5").plan_files()) == 1
    # The added column has no stats in old files: unknown, so nothing is pruned wrongly.
    assert table.scan(where="extra IS NULL").count() == 5
    table.append(pa.table({"id": [2**40], "name": ["big"], "points": pa.array([9.0], pa.float32()),
                           "amount": [Decimal("1.00")], "tag": ["t"], "extra": [7]}, schema=table.schema))
    assert [r["id"] for r in table.scan(where="id > 1000").to_arrow().to_pylist()] == [2**40]
    assert len(table.scan(where="id > 1000").plan_files()) == 1
    assert [r["id"] for r in table.scan(where="extra = 7").to_arrow().to_pylist()] == [2**40]
    assert table.scan(where="id <= 3").count() == 3


def test_deletes_overwrite_and_compaction_after_evolution(table: mt.Table) -> None:
    table.append(batch([1, 2, 3]))
    table.append(batch([4, 5]))
    with table.update_schema() as s:
        s.rename_column("name", "new_name")
        s.drop_column("tag")
        s.add_column("extra", pa.int64())
    table.append(batch([6, 7], table.schema))
    table.delete("new_name = 'n2' OR extra = 70")
    assert [r["id"] for r in rows(table.to_arrow())] == [1, 3, 4, 5, 6]
    table.overwrite(batch([30], table.schema), where="id = 3 OR id = 30")
    before = rows(table.to_arrow())
    info = table.compact()
    assert info.committed
    assert rows(table.to_arrow()) == before
    # Compaction writes the current schema, with its field ids.
    for f in table.manifest().files:
        assert written_ids(table, f.path) == list(table.manifest().fields.ids)


def test_update_and_upsert_after_evolution(table: mt.Table) -> None:
    table.append(batch([1, 2, 3]))
    with table.update_schema() as s:
        s.rename_column("name", "new_name")
        s.drop_column("tag")
        s.add_column("extra", pa.int64())
        s.widen("id", pa.int64())
    table.update({"new_name": "'renamed'", "extra": 7}, where="id = 2")
    table.upsert(pa.table({"id": [3, 4], "new_name": ["up3", "up4"], "score": pa.array([0.0, 0.0], pa.float32()),
                           "amount": [Decimal("0.00")] * 2, "extra": [30, 40]}, schema=table.schema), on=["id"])
    got = {r["id"]: (r["new_name"], r["extra"]) for r in table.to_arrow().to_pylist()}
    assert got == {1: ("n1", None), 2: ("renamed", 7), 3: ("up3", 30), 4: ("up4", 40)}


def test_append_merge_adds_new_columns_in_the_same_commit(table: mt.Table) -> None:
    table.append(batch([1]))
    wider = pa.schema([*SCHEMA, ("extra", pa.int64())])
    with pytest.raises(SchemaMismatchError, match=r"unknown columns \['extra'\]"):
        table.append(batch([2], wider))
    version = table.version
    info = table.append(batch([2], wider), schema_mode="merge")
    assert info.version == version + 1 and info.operation == "append"
    assert info.parameters["schema_changes"] == ["add_column extra int64"]
    assert table.schema == wider
    assert rows(table.to_arrow()) == [{**batch([1]).to_pylist()[0], "extra": None}, batch([2], wider).to_pylist()[0]]
    with table.transaction() as tx:
        tx.append([{"id": 3, "name": "n3", "score": 1.5, "amount": Decimal("0.03"), "tag": "t3", "extra": 30,
                    "more": "m"}], schema_mode="merge")
    assert table.schema.names[-1] == "more" and table.to_arrow().column("more").to_pylist() == [None, None, "m"]
    with pytest.raises(InvalidArgumentError):
        table.append([], schema_mode="overwrite")
    empty = table.schema.empty_table().append_column("only", pa.array([], pa.string()))
    info = table.append(empty, schema_mode="merge")
    assert info.committed and info.operation == "update_schema" and table.schema.names[-1] == "only"


@pytest.mark.parametrize("change, error, match", [
    (lambda s: s.rename_column("name", "tag"), SchemaEvolutionError, "already has a column 'tag'"),
    (lambda s: s.rename_column("nope", "x"), SchemaEvolutionError, "no column 'nope'"),
    (lambda s: s.widen("id", pa.int16()), SchemaEvolutionError, "only widening"),
    (lambda s: s.widen("score", pa.int64()), SchemaEvolutionError, "only widening"),
    (lambda s: s.widen("amount", pa.decimal128(9, 3)), SchemaEvolutionError, "only widening"),
    (lambda s: s.widen("amount", pa.decimal128(4, 2)), SchemaEvolutionError, "only widening"),
    (lambda s: s.widen("score", pa.float16()), SchemaEvolutionError, "only widening"),
    (lambda s: s.add_column("x", pa.int64(), nullable=False), SchemaEvolutionError, "non-nullable"),
    (lambda s: s.add_column("id", pa.int64()), SchemaEvolutionError, "already has a column"),
    (lambda s: s.add_column("x", "int64"), InvalidArgumentError, "pyarrow DataType"),
    (lambda s: [s.drop_column(n) for n in [*SCHEMA.names, "fine"]], SchemaEvolutionError, "last column"),
])
def test_bad_changes_commit_nothing(table: mt.Table, change, error, match) -> None:
    table.append(batch([1]))
    version = table.version
    with pytest.raises(error, match=match):
        with table.update_schema() as s:
            s.add_column("fine", pa.string())  # the block's good changes go too
            change(s)
    assert table.version == version and table.schema == SCHEMA


def test_adding_a_required_column_to_an_empty_table(table: mt.Table) -> None:
    with table.update_schema() as s:
        s.add_column("req", pa.int64(), nullable=False)
    assert not table.schema.field("req").nullable


def test_a_format_v1_table_must_upgrade_first(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "v1"), SCHEMA, format_version=1)
    t.append(batch([1]))
    with pytest.raises(UpgradeRequiredError, match=r"upgrade\(\)"):
        t.update_schema()
    with pytest.raises(UpgradeRequiredError):
        t.append(batch([2], pa.schema([*SCHEMA, ("extra", pa.int64())])), schema_mode="merge")
    t.upgrade()
    with t.update_schema() as s:
        s.rename_column("name", "new_name")
    assert rows(t.to_arrow())[0]["new_name"] == "n1"


# --- concurrency (local store: atomic create-only writes across threads) -----------------
@pytest.fixture
def local(tmp_path: Path) -> mt.Table:
    return mt.create_table("t", SCHEMA, store=LocalStore(tmp_path / "t"))


def test_an_append_rebases_onto_a_compatible_schema_change(local: mt.Table) -> None:
    local.append(batch([1]))
    with local.transaction() as tx:
        tx.append(batch([2]))
        with local.update_schema() as s:
            s.rename_column("name", "new_name")
            s.add_column("extra", pa.int64())
            s.widen("id", pa.int64())
    assert rows(local.to_arrow()) == [
        {"id": 1, "new_name": "n1", "score": 0.5, "amount": Decimal("0.01"), "tag": "t1", "extra": None},
        {"id": 2, "new_name": "n2", "score": 1.0, "amount": Decimal("0.02"), "tag": "t2", "extra": None}]
    # The rebased file's stats follow the rename.
    assert len(local.scan(where="new_name = 'n2'").plan_files()) == 1


@pytest.mark.parametrize("change, match", [
    (lambda s: s.drop_column("tag"), "dropped column 'tag'"),
    (lambda s: s.add_column("req", pa.int64(), nullable=False), "non-nullable"),
])
def test_an_append_conflicts_with_an_incompatible_schema_change(tmp_path: Path, change, match) -> None:
    t = mt.create_table("t", SCHEMA, store=LocalStore(tmp_path / "t"))
    tx = t.transaction()
    tx.append(batch([1]))
    with t.update_schema() as s:
        change(s)
    version = t.version
    with pytest.raises(CommitConflictError, match=match):
        tx.commit()
    assert t.version == version and t.to_arrow().num_rows == 0


def test_a_required_column_conflicts_with_a_concurrent_append(tmp_path: Path) -> None:
    """The empty-table check ran on the change's own snapshot: an append landing first was
    rebased over, and the committed NOT NULL column held nulls."""
    t = mt.create_table("t", SCHEMA, store=LocalStore(tmp_path / "t"))
    other = mt.open_table("t", store=LocalStore(tmp_path / "t"))
    with pytest.raises(CommitConflictError, match=r"with 1 rows, which would have no value for the non-nullable "
                                                  r"columns this commit adds: \['req'\]"):
        with t.update_schema() as s:
            s.add_column("req", pa.int64(), nullable=False)
            other.append(batch([1]))
    assert "req" not in t.schema.names and t.to_arrow().num_rows == 1


def test_a_required_column_rebases_over_a_concurrent_commit_that_leaves_no_rows(local: mt.Table) -> None:
    local.append(batch([1]))
    local.delete("id = 1")
    with local.update_schema() as s:
        s.add_column("req", pa.int64(), nullable=False)
        local.compact()  # the fully deleted file goes: still no rows
    assert not local.schema.field("req").nullable and local.history(limit=2)[1].operation == "compact"


def test_concurrent_schema_changes_conflict(local: mt.Table) -> None:
    local.append(batch([1]))
    with pytest.raises(CommitConflictError, match="changed the schema concurrently"):
        with local.update_schema() as mine:
            mine.add_column("mine", pa.int64())
            with local.update_schema() as theirs:
                theirs.add_column("theirs", pa.int64())
    assert local.schema.names[-1] == "theirs" and "mine" not in local.schema.names


def test_a_delete_rebases_onto_a_schema_change_and_an_overwrite_does_not(local: mt.Table) -> None:
    local.append(batch([1, 2, 3]))
    with local.transaction() as tx:
        tx.delete("id = 2")
        with local.update_schema() as s:
            s.rename_column("name", "new_name")
    assert [r["id"] for r in rows(local.to_arrow())] == [1, 3]
    with pytest.raises(CommitConflictError, match="changed the schema"):
        with local.transaction() as tx:
            tx.overwrite(batch([9], local.schema), where="id IN (1, 9)")
            with local.update_schema() as s:
                s.add_column("extra", pa.int64())


def test_threads_appending_while_the_schema_changes(local: mt.Table) -> None:
    """Appends racing a rename and a widening all land, and read under the final schema."""
    from concurrent.futures import ThreadPoolExecutor

    def change() -> None:
        with local.update_schema() as s:
            s.rename_column("name", "new_name")
            s.widen("id", pa.int64())

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(local.append, batch([i])) for i in range(8)] + [pool.submit(change)]
        for f in futures:
            f.result()
    got = rows(local.to_arrow())
    assert [r["id"] for r in got] == list(range(8)) and [r["new_name"] for r in got] == [f"n{i}" for i in range(8)]


# --- files without field ids (written before this release) -------------------------------
def test_a_0_2_0_table_without_field_ids_evolves(tmp_path: Path) -> None:
    root = tmp_path / "old"
    shutil.copytree(DATA / "table_written_by_0.2.0", root)
    t = mt.open_table(str(root))
    assert all(i is None for i in written_ids(t, t.manifest().files[0].path))
    before = rows(t.to_arrow())
    first, second = t.schema.names[1], t.schema.names[2]
    with t.update_schema() as s:
        s.rename_column(first, "renamed")
        s.drop_column(second)
        s.add_column(first, pa.string())
    after = rows(t.to_arrow())
    assert [r["renamed"] for r in after] == [r[first] for r in before]
    assert all(r[first] is None and second not in r for r in after)
    assert rows(t.scan(version=t.version - 1).to_arrow()) == before
    # The original names, and the re-added column's physical name: its files cannot carry
    # the name the renamed column's old files use.
    assert t.manifest().index.name_mapping == {**dict(zip(t.scan(version=0).schema.names, range(1, 100))),
                                               f"{first}_6": 6}


def test_an_upgraded_0_1_0_table_evolves(tmp_path: Path) -> None:
    root = tmp_path / "old"
    shutil.copytree(DATA / "table_written_by_0.1.0", root)
    t = mt.open_table(str(root))
    before = rows(t.to_arrow())
    t.upgrade()
    with t.update_schema() as s:
        s.rename_column("name", "label")
    assert [r["label"] for r in rows(t.to_arrow())] == [r["name"] for r in before]
    assert t.scan(where="label IS NULL").count() == sum(r["name"] is None for r in before)


# --- interop -----------------------------------------------------------------------------
def evolved(table: mt.Table) -> list[dict]:
    table.append(batch([1, 2]))
    table.delete("id = 2")
    table.append(batch([3]))
    with table.update_schema() as s:
        s.rename_column("name", "new_name")
        s.drop_column("tag")
        s.add_column("tag", pa.int64())
        s.widen("score", pa.float64())
    table.append(pa.table({"id": [4], "new_name": ["n4"], "score": [2.0],
                           "amount": [Decimal("0.04")], "tag": [40]}, schema=table.schema))
    return rows(table.to_arrow())


def test_duckdb_and_polars_over_renamed_and_dropped_columns(table: mt.Table) -> None:
    import duckdb

    want = evolved(table)
    assert [r["tag"] for r in want] == [None, None, 40]
    con = duckdb.connect()
    got = table.to_duckdb(con, "t").order("id").arrow()
    assert rows(got.read_all() if hasattr(got, "read_all") else got) == want
    # Read by DuckDB itself: one read_parquet per column plan (old files, new file).
    sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 't'").fetchall()[0][0]
    assert sql.count("read_parquet") == 3 and "CAST(NULL AS BIGINT)" in sql
    assert con.execute("SELECT id FROM t WHERE new_name = 'n3'").fetchall() == [(3,)]
    assert con.execute("SELECT any_value(typeof(score)), sum(score) FROM t").fetchall() == [("DOUBLE", 4.0)]
    old = table.to_duckdb(con, "old", version=2).order("id").arrow()
    assert "tag" in (old.read_all() if hasattr(old, "read_all") else old).schema.names
    assert rows(table.to_polars().collect().to_arrow()) == want
    assert table.to_polars().select("new_name", "tag").collect().to_dict(as_series=False) is not None


def test_cli_info_shows_field_ids(table: mt.Table, capsys: pytest.CaptureFixture[str]) -> None:
    from manifest_table.cli import main

    evolved(table)
    main(["info", table.uri])
    out = capsys.readouterr().out
    assert "new_name: string (field id 2)" in out and "tag: int64 (field id 6)" in out

"""Table.changes: the rows each commit changed, derived from the log (docs/changes.md). Every
write kind, pairs through transactions, schema evolution, filters and projections, the
cursor and its errors, DuckDB and Polars on the stream. The random histories checked against
a model are in tests/reads/test_differential.py (tests/differential_changes.py)."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import (
    CorruptTableError,
    InvalidArgumentError,
    InvalidFilterError,
    VersionExpiredError,
    VersionNotFoundError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], v: str = "a") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


RANK = {"delete": 0, "update_preimage": 1, "update_postimage": 1, "insert": 2}


def changed(feed: mt.ChangeFeed, *columns: str) -> list[tuple]:
    """(change type, version, the columns) of every row, in commit order; within a commit the
    deletes, then the update pairs (each pre-image right before its post-image), then the
    inserts, which this checks, each kind sorted (files are read in no set order)."""
    table = feed.to_arrow()
    names = columns or tuple(n for n in table.column_names if not n.startswith("_"))
    found = [(r["_change_type"], r["_commit_version"], *(r[c] for c in names)) for r in table.to_pylist()]
    assert [r[1] for r in found] == sorted(r[1] for r in found), "not in commit order"
    out = []
    for _, group in itertools.groupby(found, key=lambda r: r[1]):
        commit = list(group)
        assert [RANK[r[0]] for r in commit] == sorted(RANK[r[0]] for r in commit), commit
        pairs = [r for r in commit if RANK[r[0]] == 1]
        assert [r[0] for r in pairs] == ["update_preimage", "update_postimage"] * (len(pairs) // 2), commit
        out += sorted(r for r in commit if r[0] == "delete")
        out += [r for pair in sorted(zip(pairs[::2], pairs[1::2])) for r in pair]
        out += sorted(r for r in commit if r[0] == "insert")
    return out


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(tmp_path / "t", SCHEMA, row_group_size=64)
    t.append(rows(list(range(6))))  # version 1
    return t


def test_appends_deletes_and_overwrites_are_inserts_and_deletes(table: mt.Table):
    table.delete("id = 2 OR id = 4")  # 2
    table.overwrite(rows([10, 11], "o"), where="id >= 5")  # 3
    table.overwrite(rows([20], "x"))  # 4: every row
    assert changed(table.changes(1)) == [
        ("delete", 2, 2, "a"),
        ("delete", 2, 4, "a"),
        ("delete", 3, 5, "a"),
        ("insert", 3, 10, "o"),
        ("insert", 3, 11, "o"),
        *[("delete", 4, i, v) for i, v in [(0, "a"), (1, "a"), (3, "a"), (10, "o"), (11, "o")]],
        ("insert", 4, 20, "x"),
    ]
    assert changed(table.changes(0, 1)) == [("insert", 1, i, "a") for i in range(6)]


def test_update_and_upsert_pair_old_and_new_rows(table: mt.Table):
    table.update(values={"v": "u"}, where="id IN (1, 3)")
    table.upsert(rows([3, 0, 9], "s"), on=["id"])
    assert changed(table.changes(1)) == [
        ("update_preimage", 2, 1, "a"),
        ("update_postimage", 2, 1, "u"),
        ("update_preimage", 2, 3, "a"),
        ("update_postimage", 2, 3, "u"),
        ("update_preimage", 3, 0, "a"),
        ("update_postimage", 3, 0, "s"),
        ("update_preimage", 3, 3, "u"),
        ("update_postimage", 3, 3, "s"),
        ("insert", 3, 9, "s"),
    ]


def test_upserts_with_partial_columns_deletes_and_removed_rows(table: mt.Table):
    table.upsert(pa.table({"id": [1, 2]}), on=["id"], when_matched="delete", when_not_matched="ignore")
    table.upsert(rows([3, 4], "z"), on=["id"], when_not_matched_by_source="delete")
    assert changed(table.changes(1)) == [
        ("delete", 2, 1, "a"),
        ("delete", 2, 2, "a"),
        ("delete", 3, 0, "a"),
        ("delete", 3, 5, "a"),
        ("update_preimage", 3, 3, "a"),
        ("update_postimage", 3, 3, "z"),
        ("update_preimage", 3, 4, "a"),
        ("update_postimage", 3, 4, "z"),
    ]


def test_compaction_upgrade_and_schema_changes_emit_no_row(tmp_path: Path):
    t = mt.create_table(tmp_path / "t", SCHEMA, format_version=1)
    for i in range(4):
        t.append(rows([i]))
    t.delete("id = 1")
    t.compact(min_deleted_fraction=0.01)
    t.upgrade()
    with t.update_schema() as s:
        s.add_column("n", pa.int32())
    assert t.history()[2].operation == "compact"
    assert [c.version for c in t.changes(5).commits()] == [6, 7, 8]
    assert t.changes(5).to_arrow().num_rows == 0
    assert changed(t.changes(0), "id") == [("insert", v, v - 1) for v in range(1, 5)] + [("delete", 5, 1)]


def test_a_delete_that_rebased_onto_a_compaction_reports_the_rows_it_deleted(table: mt.Table):
    table.append(rows([6, 7]))
    tx = mt.open_table(table.uri).transaction()
    tx.delete("id = 7")
    info = table.compact()  # the small files merge
    assert info.committed
    tx.commit()
    assert changed(table.changes(info.version)) == [("delete", info.version + 1, 7, "a")]


def test_transactions_net_their_own_steps(table: mt.Table):
    with table.transaction() as tx:
        tx.update(values={"v": "b"}, where="id IN (1, 2)")
        tx.update(values={"v": "c"}, where="id = 1")  # the new version of 1 replaced again
        tx.delete("id = 2")  # the new version of 2 deleted
        tx.delete("id = 3")  # another row of the same file
        tx.append(rows([7]))
        tx.update(values={"v": "d"}, where="id = 7")  # a row the transaction added
    assert changed(table.changes(1)) == [
        ("delete", 2, 2, "a"),
        ("delete", 2, 3, "a"),
        ("update_preimage", 2, 1, "a"),
        ("update_postimage", 2, 1, "c"),
        ("insert", 2, 7, "d"),
    ]
    replaced = table.history()[0].parameters["replaced"]
    assert any("positions" in s for r in replaced for s in r["sources"])  # 1 and 2, not 3: explicit


def test_an_overwrite_of_every_row_drops_the_updates_staged_before_it(table: mt.Table):
    with table.transaction() as tx:
        tx.update(values={"v": "b"}, where="id = 1")
        tx.overwrite(rows([1, 9], "o"))
    assert changed(table.changes(1)) == [*[("delete", 2, i, "a") for i in range(6)], ("insert", 2, 1, "o"),
                                         ("insert", 2, 9, "o")]
    assert "replaced" not in table.history()[0].parameters


def test_a_filter_over_columns_that_swapped_names_prunes_each_file_by_its_own_names(tmp_path: Path):
    """A file's statistics are keyed by its version's column names: after ``a`` and ``b``
    swap names, the first file's ``a`` bounds are the feed's ``b`` (``feed/commit._pruned``)."""
    t = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.int64())]))
    t.append(pa.table({"id": [1, 2], "a": [10, 20], "b": [100, 200]}))  # 1
    for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b")):  # 2-4
        with t.update_schema() as s:
            s.rename_column(old, new)
    t.delete("id = 2")  # 5
    assert changed(t.changes(0, where="a = 200")) == [("insert", 1, 2, 20, 200), ("delete", 5, 2, 20, 200)]
    assert changed(t.changes(0, where="b = 10")) == [("insert", 1, 1, 10, 100)]  # (columns id, b, a)


def test_schema_changes_read_as_the_end_version(table: mt.Table):
    table.delete("id = 0")  # 2
    with table.update_schema() as s:  # 3
        s.rename_column("v", "w")
        s.add_column("n", pa.int32())
    table.append(pa.table({"id": [8], "w": ["b"], "n": [5]}))  # 4
    table.update(values={"n": 1}, where="id = 8")  # 5
    with table.update_schema() as s:  # 6
        s.widen("n", pa.int64())
    feed = table.changes(1)
    assert feed.schema.names == ["id", "w", "n", "_change_type", "_commit_version", "_commit_timestamp"]
    assert feed.schema.field("n").type == pa.int64()
    assert changed(feed) == [
        ("delete", 2, 0, "a", None),
        ("insert", 4, 8, "b", 5),
        ("update_preimage", 5, 8, "b", 5),
        ("update_postimage", 5, 8, "b", 1),
    ]
    assert changed(table.changes(1, 2)) == [("delete", 2, 0, "a")]  # read as version 2 was


def test_where_keeps_the_changes_of_the_filtered_table(table: mt.Table):
    table.update(values={"v": "b"}, where="id IN (1, 2)")
    table.update({"id": "id + 10"}, where="id = 1")
    feed = table.changes(1, columns=["id"], where="id < 5")
    assert feed.schema.names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert changed(feed) == [
        ("update_preimage", 2, 1),
        ("update_postimage", 2, 1),
        ("update_preimage", 2, 2),
        ("update_postimage", 2, 2),
        ("delete", 3, 1),  # its new version (id 11) left the filtered rows
    ]
    assert changed(table.changes(1, where="id > 5"), "id") == [("insert", 3, 11)]
    assert table.changes(1, columns=[]).to_arrow().column_names == [
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    assert table.changes(1, columns=[]).to_arrow().num_rows == 6


def test_the_version_is_the_cursor(table: mt.Table):
    cursor, seen = 0, []
    for _ in range(3):
        feed = table.changes(cursor)
        seen += changed(feed, "id")
        cursor = feed.end_version
        table.append(rows([100 + cursor]))
    assert seen == [("insert", 1, i) for i in range(6)] + [("insert", 2, 101), ("insert", 3, 102)]
    assert table.changes(table.version).to_arrow().num_rows == 0
    assert [c.version for c in table.changes(1).commits()] == [2, 3, 4]
    assert changed(table.changes(0).commit(3), "id") == [("insert", 3, 102)]
    assert repr(table.changes(1, 3)).endswith("versions 1..3]")  # the range (1, 3], as the cursor reads


def test_timestamps_choose_the_versions(table: mt.Table):
    first = table.history()[0].timestamp
    table.append(rows([6]))
    second = table.history()[0].timestamp
    table.append(rows([7]))
    assert changed(table.changes(start_as_of=first), "id") == [("insert", 2, 6), ("insert", 3, 7)]
    assert changed(table.changes(start_as_of=first, end_as_of=second), "id") == [("insert", 2, 6)]
    early = (first - timedelta(days=1)).isoformat()
    assert table.changes(start_as_of=early).start_version == 0
    ts = table.changes(2, 2 + 1).to_arrow().column("_commit_timestamp")
    assert ts.type == pa.timestamp("ms", tz="UTC") and ts[0].as_py() == table.history()[0].timestamp


def test_a_start_that_gc_removed_names_the_oldest_retained_version(table: mt.Table):
    for i in range(4):
        table.append(rows([10 + i]))
    table.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    with pytest.raises(VersionExpiredError, match="oldest retained version is 4"):
        table.changes(1)
    assert changed(table.changes(4), "id") == [("insert", 5, 13)]


def test_a_feed_whose_versions_gc_removed_after_it_was_made_fails_naming_them(table: mt.Table):
    """Never read as if those commits changed nothing: a consumer would miss their rows."""
    for i in range(3):
        table.append(rows([10 + i]))
    feed = table.changes(1)
    table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    for read in (feed.to_arrow, lambda: list(feed.commits()), lambda: feed.commit(3).to_arrow()):
        with pytest.raises(VersionExpiredError, match="oldest retained version is 4"):
            read()


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda t: t.changes(), InvalidArgumentError),
        (lambda t: t.changes(1, start_as_of="2020-01-01T00:00:00Z"), InvalidArgumentError),
        (lambda t: t.changes(1, 1, end_as_of="2020-01-01T00:00:00Z"), InvalidArgumentError),
        (lambda t: t.changes(-1), InvalidArgumentError),
        (lambda t: t.changes(1, 0), InvalidArgumentError),
        (lambda t: t.changes(0, 9), VersionNotFoundError),
        (lambda t: t.changes(0, columns="id"), InvalidArgumentError),
        (lambda t: t.changes(0, columns=["nope"]), InvalidArgumentError),
        (lambda t: t.changes(0, where="nope = 1"), InvalidFilterError),
        (lambda t: t.changes(start_as_of="yesterday"), InvalidArgumentError),
        (lambda t: t.changes(0, 1).commit(2), InvalidArgumentError),
        (lambda t: t.changes(0, 1).commit(0), InvalidArgumentError),  # the start is the cursor: not in the feed
        (lambda t: t.changes(t.version + 1), VersionNotFoundError),
        (lambda t: t.changes(0, t.version + 1), VersionNotFoundError),
    ],
)
def test_bad_arguments_are_typed_errors(table: mt.Table, call, error):
    with pytest.raises(error):
        call(table)


def test_a_column_named_like_a_change_column_must_be_left_out(tmp_path: Path):
    t = mt.write_table(tmp_path / "t", pa.table({"id": [1], "_change_type": ["mine"]}))
    with pytest.raises(InvalidArgumentError, match="_change_type"):
        t.changes(0)
    assert t.changes(0, columns=["id"]).to_arrow().num_rows == 1


def test_a_corrupt_replaced_record_is_refused(table: mt.Table):
    table.update(values={"v": "b"}, where="id = 1")
    key = "manifest/v00000000000000000002.json"
    doc = json.loads(table.store.get(key))
    doc["parameters"]["replaced"][0]["outputs"][0]["rows"] = 2
    table.store.delete(key)
    table.store.put_if_absent(key, json.dumps(doc).encode())
    with pytest.raises(CorruptTableError, match="parameters.replaced"):
        mt.open_table(table.uri).changes(1).to_arrow()


def test_duckdb_and_polars_read_the_stream(table: mt.Table):
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    table.update(values={"v": "b"}, where="id < 2")
    feed = table.changes(1)
    counts = duckdb.sql("SELECT _change_type, count(*) AS n FROM feed GROUP BY ALL ORDER BY 1").fetchall()
    assert counts == [("update_postimage", 2), ("update_preimage", 2)]
    frame = pl.DataFrame(feed)
    assert frame["_change_type"].to_list() == ["update_preimage", "update_postimage"] * 2
    assert pa.table(feed).equals(feed.to_arrow())


def test_a_database_table_reports_its_own_commits(tmp_path: Path):
    db = mt.create_database(tmp_path / "db")
    orders = db.create_table("orders", SCHEMA)
    db.create_table("stock", SCHEMA).append(rows([1]))
    orders.append(rows([1, 2]))
    with db.transaction() as tx:
        tx.table("orders").update(values={"v": "b"}, where="id = 1")
        tx.table("stock").delete("id = 1")
    via_uri = mt.open_table(f"{db.uri}/orders")
    assert changed(via_uri.changes(0), "id", "v") == [
        ("insert", 4, 1, "a"),
        ("insert", 4, 2, "a"),
        ("update_preimage", 5, 1, "a"),
        ("update_postimage", 5, 1, "b"),
    ]
    assert [c.version for c in via_uri.changes(0).commits()] == [1, 2, 3, 4, 5]
    stock = mt.open_table(f"{db.uri}/stock")  # created at version 2: no commit of it before
    assert [c.version for c in stock.changes(0).commits()] == [2, 3, 4, 5]
    assert changed(stock.changes(0), "id") == [("insert", 3, 1), ("delete", 5, 1)]
    with pytest.raises(VersionNotFoundError, match="did not exist yet at version 1"):
        stock.changes(0).commit(1)


def test_a_database_feed_has_every_table_in_version_order(tmp_path: Path):
    db = mt.create_database(tmp_path / "db")
    orders = db.create_table("orders", SCHEMA)  # 1
    db.create_table("stock", pa.schema([("sku", pa.string())]))  # 2
    orders.append(rows([1, 2]))  # 3
    with db.transaction() as tx:  # 4
        tx.table("orders").update(values={"v": "b"}, where="id = 1")
        tx.table("stock").append(pa.table({"sku": ["x"]}))
    db.rename_table("stock", "items")  # 5
    mt.open_table(f"{db.uri}/items").delete("sku = 'x'")  # 6
    db.drop_table("orders")  # 7
    feed = db.changes(0)
    assert (feed.start_version, feed.end_version) == (0, 7)
    found = [
        (
            b.column("_table")[i].as_py(),
            b.column("_change_type")[i].as_py(),
            b.column("_commit_version")[i].as_py(),
            b.column(0)[i].as_py(),
        )
        for b in feed
        for i in range(b.num_rows)
    ]
    assert found == [
        ("orders", "insert", 3, 1),
        ("orders", "insert", 3, 2),
        ("orders", "update_preimage", 4, 1),
        ("orders", "update_postimage", 4, 1),
        ("stock", "insert", 4, "x"),
        ("items", "delete", 6, "x"),
    ]
    assert [(c.table, c.version) for c in db.changes(3, 6).commits()] == [("orders", 4), ("stock", 4), ("items", 6)]
    assert next(iter(db.changes(3))).schema.names == [
        "id",
        "v",
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
        "_table",
    ]
    db.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)
    with pytest.raises(VersionExpiredError, match="oldest retained version is 6"):
        db.changes(2)


def test_a_filter_prunes_files_by_their_statistics(table: mt.Table, monkeypatch: pytest.MonkeyPatch):
    table.append(rows(list(range(100, 110))))
    read = []
    original = mt.storage.FileIO.read_parquet
    monkeypatch.setattr(
        mt.storage.FileIO, "read_parquet", lambda io, key, *a: read.append(key) or original(io, key, *a)
    )
    assert changed(table.changes(0, where="id >= 100"), "id") == [("insert", 2, i) for i in range(100, 110)]
    first = {f.path for f in table.manifest(1).files}
    assert read and not first & set(read)  # the files of version 1 (ids 0-5) are not read

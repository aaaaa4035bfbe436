"""Table.update / Transaction.update: new row versions in a new file, old positions deleted,
one commit; bad input and failing arithmetic commit nothing and leave nothing behind."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, InvalidFilterError, SchemaMismatchError
from manifest_table.expressions import col, lit

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.float64()),
        ("amount", pa.decimal128(10, 2)),
        ("flag", pa.bool_()),
    ]
)


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "qty": [i % 7 for i in ids],
            "price": [i * 0.5 for i in ids],
            "amount": [Decimal(i) / 4 for i in ids],
            "flag": [i % 2 == 0 for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    table = mt.create_table(tmp_path / "t", SCHEMA, row_group_size=16)
    table.append(rows(0, 50))
    table.append(rows(50, 100))
    return table


def by_id(table: mt.Table) -> dict[int, dict]:
    return {r["id"]: r for r in table.to_arrow().to_pylist()}


def data_keys(table: mt.Table) -> set[str]:
    return {o.key for o in table.store.list("data/")}


def test_update_writes_new_versions_and_deletes_old_positions(table: mt.Table):
    before = by_id(table)
    old_files = {f.path for f in table.manifest().files}
    info = table.update(
        {"qty": "qty * 2 + 1", "name": "'changed'", "price": col("price") / 2}, where="id BETWEEN 10 AND 19"
    )
    assert info.operation == "update" and info.metrics["rows_updated"] == 10
    assert info.metrics["rows_deleted"] == 10 and info.metrics["rows_added"] == 10
    after = by_id(table)
    assert len(after) == 100
    for i in range(100):
        if 10 <= i <= 19:
            assert after[i] == {
                **before[i],
                "qty": before[i]["qty"] * 2 + 1,
                "name": "changed",
                "price": before[i]["price"] / 2,
            }
        else:
            assert after[i] == before[i]
    manifest = table.manifest()
    assert old_files <= {f.path for f in manifest.files}  # no data file rewritten
    new = [f for f in manifest.files if f.path not in old_files]
    assert sum(f.rows for f in new) == 10  # only the changed rows are written
    assert info.parameters["updates"] == [
        {"set": {"qty": "qty * 2 + 1", "name": "'changed'", "price": "price / 2"}, "where": "id >= 10 AND id <= 19"}
    ]


def test_update_without_where_changes_every_row(table: mt.Table):
    info = table.update({"flag": False, "amount": "amount + 1.5"})
    assert info.metrics["rows_updated"] == 100
    after = by_id(table)
    assert all(r["flag"] is False for r in after.values())
    assert after[4]["amount"] == Decimal("2.50")


def test_assignments_read_the_old_row(table: mt.Table):
    """All assignments see the row before the update, as in SQL (a swap works)."""
    table.update({"qty": "id", "id": "qty"}, where="id = 13")
    assert table.scan(where="qty = 13").to_arrow().to_pylist()[0]["id"] == 13 % 7


def test_a_filter_and_null_can_be_assigned(table: mt.Table):
    table.update({"flag": col("qty") > 3, "name": None, "price": lit(None)}, where="id < 7")
    after = by_id(table)
    assert [after[i]["flag"] for i in range(7)] == [i % 7 > 3 for i in range(7)]
    assert all(after[i]["name"] is None and after[i]["price"] is None for i in range(7))


def test_nothing_matching_commits_nothing(table: mt.Table):
    info = table.update({"qty": 1}, where="id > 1000")
    assert not info.committed and info.version == 2 and info.metrics["rows_updated"] == 0


def test_update_inside_a_transaction_is_visible_to_its_scans(table: mt.Table):
    with table.transaction() as tx:
        assert tx.update({"qty": 100}, where="id < 5") == 5
        assert tx.scan(where="qty = 100").count() == 5
        tx.append(rows(100, 101))
    info = table.history(limit=1)[0]
    assert info.operation == "update" and info.metrics["rows_updated"] == 5
    assert table.scan(where="qty = 100").count() == 5 and table.scan().count() == 101


@pytest.mark.parametrize(
    "assignments, where, error, message",
    [
        ({"nope": 1}, None, InvalidArgumentError, "unknown columns"),
        ({}, None, InvalidArgumentError, "needs set= .* or values="),
        ({"name": "shipped"}, None, InvalidFilterError, r"pass values=\{'name': 'shipped'\}"),
        ({"name": "shipped today"}, None, InvalidFilterError, "to store the text itself, pass values="),
        ({"nmae": 1}, None, InvalidArgumentError, "did you mean 'name'"),
        ({"qty": "name + 1"}, None, InvalidFilterError, "cannot apply"),
        ({"qty": 1}, "nope = 1", InvalidFilterError, "unknown column"),
        ({"qty": 1}, "qyt = 1", InvalidFilterError, "did you mean 'qty'"),
        ({"qty": "price"}, None, InvalidArgumentError, "cannot store"),  # 0.5 does not fit an integer
        ({"qty": "qty / 0"}, None, InvalidArgumentError, "divide by zero"),
        ({"qty": "qty + 3000000000"}, None, InvalidArgumentError, "cannot store"),  # beyond int32
        ({"id": "id * 9223372036854775807"}, "id > 1", InvalidArgumentError, "overflow"),
        ({"name": 5}, None, InvalidArgumentError, "cannot store"),
    ],
)
def test_bad_updates_commit_nothing_and_leave_no_files(table: mt.Table, assignments, where, error, message):
    files = data_keys(table)
    with pytest.raises(error, match=message):
        table.update(assignments, where)
    assert table.version == 2 and data_keys(table) == files


def test_a_failing_update_leaves_the_transaction_as_it_was(table: mt.Table):
    with table.transaction() as tx:
        tx.append(rows(100, 102))
        with pytest.raises(InvalidArgumentError):
            tx.update({"qty": "qty / 0"})
        assert tx.scan().count() == 102
    assert table.scan().count() == 102 and table.scan(where="qty IS NULL").count() == 0


def test_not_null_column_refuses_null(tmp_path: Path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    table = mt.create_table(tmp_path / "nn", schema)
    table.append(pa.table({"id": [1, 2]}, schema=schema))
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        table.update({"id": None})
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2]


def test_integers_beyond_int64_are_stored_into_uint64_and_decimal_columns(tmp_path: Path):
    """Arrow infers int64 for a Python int and refused 2**64 - 1 ("has no Arrow type"), so a
    uint64 column could not be set to its upper half (found by tests/reads/test_differential.py)."""
    schema = pa.schema([("id", pa.int64()), ("u", pa.uint64()), ("d", pa.decimal128(38, 0))])
    table = mt.create_table(tmp_path / "big", schema)
    table.append(pa.table({"id": [1, 2], "u": [0, 1], "d": [Decimal(0), Decimal(1)]}, schema=schema))
    table.update({"u": 2**64 - 1, "d": 10**37}, where="id = 1")
    table.update({"u": col("u") + 2**63}, where="id = 2")
    assert by_id(table) == {
        1: {"id": 1, "u": 2**64 - 1, "d": Decimal(10**37)},
        2: {"id": 2, "u": 2**63 + 1, "d": Decimal(1)},
    }
    with pytest.raises(InvalidArgumentError, match="cannot store"):
        table.update({"id": 2**63})  # beyond int64: refused by the checked cast, not stored wrapped
    with pytest.raises(InvalidFilterError, match="no Arrow type"):
        table.update({"d": 10**40})  # beyond every integer type Arrow has


def test_values_are_stored_as_given_never_parsed(table: mt.Table):
    """The ambiguity of issue 23: ``set={"name": "shipped"}`` read a column 'shipped' (an error)
    and ``set={"name": "id"}`` silently copied the id column. ``values`` stores text as text."""
    info = table.update(values={"name": "id", "qty": 7, "amount": Decimal("1.25"), "flag": None}, where="id = 3")
    assert info.metrics["rows_updated"] == 1
    assert by_id(table)[3] == {
        **rows(3, 4).to_pylist()[0],
        "name": "id",
        "qty": 7,
        "amount": Decimal("1.25"),
        "flag": None,
    }
    table.update({"qty": "qty + 1"}, where="id = 3", values={"name": "price * 2"})
    assert by_id(table)[3]["name"] == "price * 2" and by_id(table)[3]["qty"] == 8


@pytest.mark.parametrize(
    "assignments, values, message",
    [
        ({"qty": 1}, {"qty": 2}, "in both set and values"),
        (None, {"qty": col("qty") + 1}, "pass it in set="),
        (None, ["qty"], "values must be a dict"),
        (None, {"name": 5}, "cannot store"),
        (None, {"nmae": "x"}, "did you mean 'name'"),
    ],
)
def test_bad_values_commit_nothing(table: mt.Table, assignments, values, message):
    version = table.version
    with pytest.raises(InvalidArgumentError, match=message):
        table.update(assignments, values=values)
    assert table.version == version


def test_plain_values_are_stored_as_given_when_the_column_holds_them(tmp_path):
    """Issue 30 item 6: ``values=`` took only what filters take as literals, so NaN,
    infinities, bytes, durations and lists were an ``InvalidFilterError``. They convert as a
    row's values do in ``append``."""
    import datetime as dt

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("f", pa.float64()),
            ("b", pa.binary()),
            ("fb", pa.binary(2)),
            ("d", pa.duration("s")),
            ("t", pa.time64("us")),
            ("l", pa.list_(pa.int32())),
        ]
    )
    t = mt.create_table(tmp_path / "t", schema)
    t.append([{"id": 1}])
    values = {
        "f": float("inf"),
        "b": b"\xff\x00",
        "fb": b"ab",
        "d": dt.timedelta(seconds=5),
        "t": dt.time(1, 2),
        "l": [1, None],
    }
    t.update(values=values)
    assert t.to_arrow().to_pylist() == [{"id": 1, **values}]
    t.update(values={"f": float("nan")})
    assert t.to_arrow().column("f").to_pylist()[0] != t.to_arrow().column("f").to_pylist()[0]
    assert t.history()[0].parameters["updates"][0]["set"] == {"f": "nan"}

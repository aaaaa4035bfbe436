"""Bad-input catalog, filters: every mistake in a `where=` (text or builder) raises
`InvalidFilterError` naming what is wrong, and the table's objects are byte-identical
afterwards, whichever operation it was given to (see tests/catalog.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidFilterError
from manifest_table.expressions import Expr, col
from manifest_table.storage import LocalStore, MemoryStore, ObjectStore
from tests.catalog import assert_rejected

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("s", pa.string()),
    ("f32", pa.float32()),
    ("d", pa.decimal128(10, 2)),
    ("t", pa.timestamp("us")),
    ("tz", pa.timestamp("us", tz="Europe/Berlin")),
    ("b", pa.bool_()),
])
ROWS = pa.table({
    "id": [1, 2, 3],
    "s": ["a", "b\\", None],
    "f32": pa.array([0.5, None, 1.5], pa.float32()),
    "d": [Decimal("1.10"), None, Decimal("-2.00")],
    "t": [dt.datetime(2024, 1, 1), None, dt.datetime(2024, 1, 2)],
    "tz": pa.array([dt.datetime(2024, 10, 27, 1, tzinfo=dt.UTC), None, None], SCHEMA.field("tz").type),
    "b": [True, False, None],
}, schema=SCHEMA)


@pytest.fixture(params=["memory", "local"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[ObjectStore, mt.Table]:
    store = MemoryStore() if request.param == "memory" else LocalStore(tmp_path / "table")
    created = mt.create_table("test://t", SCHEMA, store=store)
    created.append(ROWS)
    created.delete("id = 2")
    return store, created


def _deep(levels: int) -> Expr:
    expr: Expr = col("id") == 1
    for _ in range(levels):
        expr = ~expr
    return expr


def _truthiness(expr: Expr) -> object:
    return [expr for _ in [0] if expr]  # `if expr:` inside a comprehension


# (name, call on the table, message fragment). Each raises InvalidFilterError.
CASES: list[tuple[str, Callable[[mt.Table], Any], str]] = [
    ("empty text", lambda t: t.delete(""), "empty"),
    ("only spaces", lambda t: t.delete("  \n"), "empty"),
    ("syntax: missing literal", lambda t: t.delete("id >"), "expected a literal"),
    ("syntax: trailing AND", lambda t: t.delete("id = 1 AND"), "expected a column name"),
    ("syntax: unknown character", lambda t: t.delete("id @ 1"), "unexpected character '@'"),
    ("unknown column", lambda t: t.delete("nope = 1"), "unknown column 'nope'"),
    ("unknown quoted column", lambda t: t.scan(where='"no pe" IS NULL').count(), "unknown column 'no pe'"),
    ("string against an integer", lambda t: t.delete("id = 'abc'"), "'id' of type int64 with 'abc'"),
    ("date against an integer", lambda t: t.overwrite(ROWS, where="id = DATE '2024-01-01'"),
     "'id' of type int64 with DATE '2024-01-01'"),
    ("integer against a bool", lambda t: t.delete("b = 1"), "'b' of type bool with 1"),
    ("string against a decimal", lambda t: t.scan(where="d = 'x'").to_arrow(), "'d' of type decimal128"),
    ("exact literal beyond float32", lambda t: t.delete("f32 = 350000000000000000000000000000000000000.0"),
     "'f32' of type float"),
    ("double out of range", lambda t: t.scan(where="f32 < 1e999").count(), "out of range"),
    ("offset against a naive timestamp", lambda t: t.delete("t = TIMESTAMP '2024-01-01 00:00:00+02:00'"),
     "no time zone"),
    ("invalid timestamp", lambda t: t.delete("tz = TIMESTAMP 'noon'"), "invalid TIMESTAMP literal"),
    ("a 2,000-digit number", lambda t: t.delete("id = " + "9" * 2000), "more than 1000 digits"),
    ("builder integer of 2,000 digits", lambda t: t.delete(col("id") == 10**2000), "too large"),
    ("builder decimal with a huge exponent", lambda t: t.delete(col("d") < Decimal("1E+100000")),
     "more than 1000 digits"),
    ("comparison with NULL", lambda t: t.delete("id = NULL"), "IS NULL"),
    ("empty IN list", lambda t: t.delete("id IN ()"), "expected a literal"),
    ("LIKE on a decimal", lambda t: t.delete("d LIKE '1%'"), "LIKE needs a string column"),
    ("LIKE with a dangling escape", lambda t: t.delete("s LIKE 'b\\'"), "ends with the escape character"),
    ("NOT LIKE with a dangling escape", lambda t: t.overwrite(ROWS, where="s NOT LIKE '%\\'"),
     "ends with the escape character"),
    ("1,000 nested parentheses", lambda t: t.delete("(" * 1000 + "id = 1" + ")" * 1000), "levels deep"),
    ("1,000 NOTs", lambda t: t.delete("NOT " * 1000 + "id = 1"), "levels deep"),
    ("builder nested too deep", lambda t: t.delete(_deep(150)), "levels deep"),
    ("chained comparison", lambda t: t.delete(5 < col("id") < 60), "no truth value"),  # type: ignore[operator]
    ("python and", lambda t: t.delete((col("id") > 1) and (col("id") < 5)), "no truth value"),
    ("python or", lambda t: t.delete((col("id") == 1) or (col("id") == 3)), "no truth value"),
    ("python not", lambda t: t.delete(not (col("id") == 1)), "no truth value"),  # type: ignore[arg-type]
    ("if expr", lambda t: t.delete(_truthiness(col("id") == 1)), "no truth value"),  # type: ignore[arg-type]
    ("builder compares with None", lambda t: t.delete(col("id") == None), "IS NULL"),  # noqa: E711
    ("builder NaN literal", lambda t: t.delete(col("f32") > float("nan")), "not a finite number"),
    ("builder LIKE with a dangling escape", lambda t: t.delete(col("s").like("x\\")), "escape character"),
    ("lone surrogate in a string", lambda t: t.delete(col("s") == "a\ud800"), "not valid Unicode"),
    ("lone surrogate in a pattern", lambda t: t.delete("s LIKE '\udfff%'"), "not valid Unicode"),
    ("filter of a wrong type", lambda t: t.delete(42), "must be a string or an Expr"),  # type: ignore[arg-type]
    ("bytes filter", lambda t: t.scan(where=b"id = 1").count(), "must be a string or an Expr"),  # type: ignore[arg-type]
    ("delete without a condition", lambda t: t.delete(None), "needs a condition"),  # type: ignore[arg-type]
    ("transaction delete", lambda t: _in_transaction(t, lambda tx: tx.delete("id = 'x'")), "'id' of type int64"),
    ("transaction overwrite", lambda t: _in_transaction(t, lambda tx: tx.overwrite(ROWS, where="s LIKE 'a\\'")),
     "escape character"),
]


def _in_transaction(table: mt.Table, stage: Callable[[mt.Transaction], Any]) -> None:
    with table.transaction() as tx:
        stage(tx)


@pytest.mark.parametrize(("name", "call", "fragment"), CASES, ids=[case[0] for case in CASES])
def test_bad_filter_is_rejected(table: tuple[ObjectStore, mt.Table], name: str,
                                call: Callable[[mt.Table], Any], fragment: str) -> None:
    store, opened = table
    before = opened.version
    caught = assert_rejected(store, InvalidFilterError, lambda: call(opened))
    assert fragment in str(caught.value), str(caught.value)
    assert opened.version == before
    assert sorted(opened.scan(columns=["id"]).to_arrow()["id"].to_pylist()) == [1, 3]

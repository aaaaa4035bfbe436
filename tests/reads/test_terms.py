"""Value expressions (expressions/terms.py): parsing, rendering, binding and SQL arithmetic."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from manifest_table.errors import InvalidFilterError
from manifest_table.expressions import Arithmetic, Literal, Ref, col, lit, parse, parse_term, to_term
from manifest_table.expressions.arrow import project

SCHEMA = pa.schema([("a", pa.int32()), ("b", pa.float64()), ("d", pa.decimal128(10, 2)), ("s", pa.string())])
ROWS = pa.table({"a": [7, None, -3], "b": [0.5, 2.0, None], "d": [Decimal("1.10"), None, Decimal("2.00")],
                 "s": ["x", "y", None]}, schema=SCHEMA)


def values(text: str) -> list:
    bound = parse_term(text).bind(SCHEMA)
    return project(ROWS, {"v": bound.to_arrow()}).column(0).to_pylist()


@pytest.mark.parametrize("text, expected", [
    ("a + 1", [8, None, -2]),
    ("a * 1000000000", [7_000_000_000, None, -3_000_000_000]),  # a literal is int64: no int32 overflow
    ("a - 1", [6, None, -4]),
    ("a-1", [6, None, -4]),
    ("a * -2", [-14, None, 6]),
    ("-a", [-7, None, 3]),
    ("a / 2", [3.5, None, -1.5]),          # integer / integer divides as doubles (Spark, DuckDB)
    ("a + b", [7.5, None, None]),          # null in, null out
    ("(a + 1) * 2", [16, None, -4]),
    ("a + 1 * 2", [9, None, -1]),          # * binds tighter
    ("a - 2 - 1", [4, None, -6]),          # left-associative
    ("d * 2", [Decimal("2.20"), None, Decimal("4.00")]),
    ("NULL", [None, None, None]),
    ("'z'", ["z", "z", "z"]),
])
def test_arithmetic_follows_sql(text, expected):
    assert values(text) == expected


@pytest.mark.parametrize("text", ["a + 1", "a - (b - 1)", "(a + b) / 2", "a * -2", "a / (2 * b)", "'it''s'",
                                  "1.50", "NULL", "\"odd name\" + 1"])
def test_text_round_trips(text):
    term = parse_term(text)
    assert parse_term(str(term)) == term


def test_builder_matches_parser():
    assert col("a") + 1 == parse_term("a + 1")
    assert 2 * col("a") - col("b") == parse_term("2 * a - b")
    assert (col("a") + 1) / col("b") == Arithmetic("/", Arithmetic("+", Ref("a"), Literal(1)), Ref("b"))
    assert to_term("a") == Ref("a") and to_term(5) == Literal(5) and to_term(lit("a")) == Literal("a")
    assert str(to_term(col("a") > 1)) == str(parse("a > 1"))


@pytest.mark.parametrize("text, message", [
    ("s + 1", r"cannot apply \+ to s of type string"),
    ("nope * 2", "unknown column 'nope'"),
    ("a +", "expected a column name, a literal"),
    ("a b", "expected an operator"),
    ("(a + 1", r"expected '\)'"),
    ("", "empty"),
])
def test_bad_terms_are_filter_errors(text, message):
    with pytest.raises(InvalidFilterError, match=message):
        parse_term(text).bind(SCHEMA)


@pytest.mark.parametrize("text, message", [("a / 0", "divide by zero"), ("b / 0", "divide by zero")])
def test_division_by_zero_is_an_error(text, message):
    with pytest.raises(pa.ArrowInvalid, match=message):
        values(text)


def test_filters_still_refuse_arithmetic():
    with pytest.raises(InvalidFilterError, match="unexpected character '-'"):
        parse("x = - 1")

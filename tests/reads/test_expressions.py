"""Filter expressions: parser, binding, Arrow evaluation and statistics pruning.

Row evaluation and pruning are checked against a brute-force Python reference with SQL
three-valued logic, over random expressions and random tables with nulls.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import operator
import re
from dataclasses import replace
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manifest_table.errors import InvalidFilterError
from manifest_table.expressions import (
    And,
    Arithmetic,
    ColumnStats,
    Comparison,
    Computed,
    Expr,
    Function,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    Ref,
    Term,
    col,
    parse,
    to_expr,
)


# --- parser ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("id >= 5", "id >= 5"),
        ("id=5", "id = 5"),
        ("x <> 1", "x != 1"),
        ("x != -1", "x != -1"),
        ("x < 1.5 AND x > -2e3", "x < 1.5 AND x > -2000.0e0"),  # exact decimal, double
        ("x = .5", "x = 0.5"),
        ("name = 'it''s'", "name = 'it''s'"),
        ("flag = true OR flag = FALSE", "flag = TRUE OR flag = FALSE"),
        ("d = DATE '2025-10-04'", "d = DATE '2025-10-04'"),
        ("t > TIMESTAMP '2025-10-04 12:30:00'", "t > TIMESTAMP '2025-10-04 12:30:00'"),
        ("t > TIMESTAMP '2025-10-04T12:30:00.5Z'", "t > TIMESTAMP '2025-10-04 12:30:00.500000+00:00'"),
        ("t > timestamp '2025-10-04 12:30:00+02:00'", "t > TIMESTAMP '2025-10-04 12:30:00+02:00'"),
        ("date = DATE '2025-10-04'", "date = DATE '2025-10-04'"),
        ('"my col" = 1', '"my col" = 1'),
        ('"say ""hi""" = 1', '"say ""hi""" = 1'),
        ('"and" = 1', '"and" = 1'),
        ('"plain" = 1', "plain = 1"),
        ("a.b_c1 = 1", "a.b_c1 = 1"),
        ("5 < x", "x > 5"),
        ("5 <= x", "x >= 5"),
        ("'a' = s", "s = 'a'"),
        ("DATE '2025-01-01' > d", "d < DATE '2025-01-01'"),
        ("x BETWEEN 1 AND 5", "x >= 1 AND x <= 5"),
        ("x not between 1 and 5", "NOT (x >= 1 AND x <= 5)"),
        ("x IN (1, 2, 3)", "x IN (1, 2, 3)"),
        ("x NOT IN ('a','b')", "x NOT IN ('a', 'b')"),
        ("x is null", "x IS NULL"),
        ("x Is Not Null", "x IS NOT NULL"),
        ("s LIKE 'ab%'", "s LIKE 'ab%'"),
        ("s NOT LIKE '_b'", "s NOT LIKE '_b'"),
        # precedence: NOT > AND > OR, both binary operators left-associative
        ("a = 1 OR b = 2 AND c = 3", "a = 1 OR b = 2 AND c = 3"),
        ("(a = 1 OR b = 2) AND c = 3", "(a = 1 OR b = 2) AND c = 3"),
        ("NOT a = 1 AND b = 2", "NOT (a = 1) AND b = 2"),
        ("NOT (a = 1 AND b = 2)", "NOT (a = 1 AND b = 2)"),
        ("a = 1 AND b = 2 AND c = 3", "a = 1 AND b = 2 AND c = 3"),
        ("a = 1 AND (b = 2 AND c = 3)", "a = 1 AND b = 2 AND c = 3"),  # associative: flattened
        ("(a = 1 OR b = 2) OR c = 3", "a = 1 OR b = 2 OR c = 3"),
        ("((a = 1))", "a = 1"),
        ("NOT NOT a = 1", "NOT (NOT (a = 1))"),
        # what SQL users type (issue 30): ILIKE, lower()/upper(), % (modulo)
        ("s ilike 'A%'", "s ILIKE 'A%'"),
        ("s NOT ILIKE 'a_'", "s NOT ILIKE 'a_'"),
        ("LOWER(country) = 'de'", "lower(country) = 'de'"),
        ("'DE' = upper(country)", "upper(country) = 'DE'"),
        ("upper(lower(s)) IN ('A', 'B')", "upper(lower(s)) IN ('A', 'B')"),
        ('lower("my col") LIKE \'a%\'', 'lower("my col") LIKE \'a%\''),
        ("lower(s) IS NOT NULL", "lower(s) IS NOT NULL"),
        ("id%10=0", "id % 10 = 0"),
        ("id % -3 NOT IN (1, 2)", "id % -3 NOT IN (1, 2)"),
        ("id % 7 BETWEEN 1 AND 2", "id % 7 >= 1 AND id % 7 <= 2"),
        ("1 = id % 2", "id % 2 = 1"),
        ("lower = 1", "lower = 1"),  # a column named lower, not a call
    ],
)
def test_parse_renders(text: str, rendered: str) -> None:
    expr = parse(text)
    assert str(expr) == rendered
    assert parse(rendered) == expr


def test_parse_structure() -> None:
    assert parse("a = 1 OR b = 2 AND c = 3") == Or(
        Comparison("a", "=", 1), And(Comparison("b", "=", 2), Comparison("c", "=", 3))
    )
    assert parse("NOT a IS NULL OR b LIKE 'x'") == Or(Not(IsNull("a")), Like("b", "x"))
    assert parse("x IN (1, 2.5, 'a', TRUE)") == In("x", (1, 2.5, "a", True))


def test_literal_kinds() -> None:
    def value(text: str) -> object:
        expr = parse(f"x = {text}")
        assert isinstance(expr, Comparison)
        return expr.value

    assert value("42") == 42 and type(value("42")) is int
    assert value("-7") == -7
    assert value("2.0") == Decimal("2.0") and type(value("2.0")) is Decimal  # exact, as in SQL
    assert value("1.0000000000000000001") == Decimal("1.0000000000000000001")
    assert value("2e0") == 2.0 and type(value("2e0")) is float  # an exponent makes a double
    assert value("-2e3") == -2000.0
    assert value("99999999999999999999") == 99999999999999999999  # beyond int64: still exact
    assert value("'O''Brien'") == "O'Brien"
    assert value("TRUE") is True and value("false") is False
    assert value("DATE '2025-10-04'") == dt.date(2025, 10, 4)
    assert value("TIMESTAMP '2025-10-04 01:02:03.000004'") == dt.datetime(2025, 10, 4, 1, 2, 3, 4)
    utc = dt.datetime(2025, 10, 4, 1, 2, 3, tzinfo=dt.UTC)
    assert value("TIMESTAMP '2025-10-04T01:02:03Z'") == utc
    assert value("TIMESTAMP '2025-10-04 03:02:03+02:00'") == utc


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("id >= AND x = 1", 6, "expected a literal after '>='"),
        ("x = NULL", 4, "IS NULL"),
        ("x != NULL", 5, "IS NOT NULL"),
        ("x IN (1, NULL)", 9, "IS NULL"),
        ("x = 'abc", 4, "unterminated string"),
        ('"abc = 1', 0, "unterminated quoted column name"),
        ('"" = 1', 0, "empty quoted column name"),
        ("x IN ()", 6, "expected a literal"),
        ("x IN (1 2)", 8, "expected ',' or ')'"),
        ("x IN 1", 5, "expected '('"),
        ("x NOT = 1", 6, "expected BETWEEN, IN, LIKE or ILIKE"),
        ("id == 5", 3, "'==' is not SQL: compare with a single '='"),
        ("id % x = 1", 5, "expected an integer divisor"),
        ("id % 1.5 = 1", 5, "expected an integer divisor"),
        ("lower('a') = s", 6, "expected a column name"),
        ("lower(s = 'a'", 8, "expected ')'"),
        ("id + 1 = 2", 3, "unexpected character '+'"),
        ("x = 1 y = 2", 6, "expected AND, OR or the end"),
        ("(x = 1", 6, "expected ')'"),
        ("x = 1)", 5, "expected AND, OR or the end"),
        ("= 1", 0, "expected a column name, a literal"),
        ("x", 1, "expected a comparison operator"),
        ("x =", 3, "expected a literal after '='"),
        ("x = 1 AND", 9, "expected a column name"),
        ("1 = 2", 4, "expected a column name"),
        ("1 IN (1)", 2, "expected a comparison operator"),
        ("x LIKE 5", 7, "expected a quoted pattern"),
        ("x IS 5", 5, "expected NULL"),
        ("x BETWEEN 1 OR 2", 12, "expected AND"),
        ("d = DATE '2025-13-01'", 4, "invalid DATE literal"),
        ("t = TIMESTAMP 'noon'", 4, "invalid TIMESTAMP literal"),
        ("x = 1e999", 4, "out of range"),
        ("x @ 1", 2, "unexpected character '@'"),
        ("x = - 1", 4, "unexpected character '-'"),
        ("AND = 1", 0, "expected a column name"),
    ],
)
def test_syntax_errors(text: str, position: int, fragment: str) -> None:
    with pytest.raises(InvalidFilterError) as caught:
        parse(text)
    message = str(caught.value)
    assert fragment in message
    assert caught.value.position == position  # type: ignore[attr-defined]
    assert f"at position {position}:" in message
    assert message.endswith(f"\n  {text}\n  {' ' * position}^")


def test_caret_stays_aligned_on_multiline_text() -> None:
    with pytest.raises(InvalidFilterError) as caught:
        parse("x = 1\nAND")
    assert str(caught.value).endswith("\n  x = 1 AND\n           ^")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_filter(text: str) -> None:
    with pytest.raises(InvalidFilterError, match="empty"):
        parse(text)


def test_to_expr() -> None:
    expr = col("a") == 1
    assert to_expr(None) is None
    assert to_expr(expr) is expr
    assert to_expr("a = 1") == expr
    with pytest.raises(InvalidFilterError):
        to_expr(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidFilterError):
        parse(b"a = 1")  # type: ignore[arg-type]


# --- builder -------------------------------------------------------------------------------
def test_builder() -> None:
    expr = (col("id") > 5) & col("country").isin(["DE", "FR"])
    assert str(expr) == "id > 5 AND country IN ('DE', 'FR')"
    assert str(~(col("x") == 1)) == "NOT (x = 1)"
    assert str((col("a") != 1) | col("b").is_null()) == "a != 1 OR b IS NULL"
    assert str(5 < col("x")) == "x > 5"
    assert str(col("x").not_in([1])) == "x NOT IN (1)"
    assert str(col("x").is_not_null()) == "x IS NOT NULL"
    assert str(col("s").like("a%")) == "s LIKE 'a%'"
    assert str(col("x").between(1, 2)) == "x >= 1 AND x <= 2"
    assert expr.columns() == frozenset({"id", "country"})
    assert (~(col("a") <= 1) | col("b").like("x")).columns() == frozenset({"a", "b"})
    assert hash(col("a") == 1) == hash(parse("a = 1"))


@pytest.mark.parametrize(
    "build",
    [
        lambda: col("x") == None,  # noqa: E711 - that is the mistake being tested
        lambda: col("x").isin("abc"),
        lambda: col("x").isin([]),
        lambda: col("x") < float("nan"),
        lambda: col("x") == object(),
        lambda: col("") == 1,
        lambda: col("s").like(5),
        lambda: Comparison("x", "~", 1),
        lambda: And(col("x") == 1, "y = 2"),
        lambda: And(col("x") == 1),
        lambda: Or(),
    ],
)
def test_builder_rejects(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidFilterError):
        build()


@pytest.mark.parametrize(
    "use",
    [
        lambda: 5 < col("id") < 60,  # Python: (5 < id) and (id < 60)
        lambda: (col("a") == 1) and (col("b") == 2),
        lambda: (col("a") == 1) or (col("b") == 2),
        lambda: not (col("a") == 1),
        lambda: bool(parse("a = 1 OR b = 2")),
        lambda: [e for e in [col("a") == 1] if e],
    ],
)
def test_an_expression_has_no_truth_value(use) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidFilterError, match=r"use|& \(AND\), \| \(OR\) and ~ \(NOT\)"):
        use()


def test_junctions_flatten_and_nesting_is_bounded() -> None:
    a, b, c = (col(name) == 1 for name in "abc")
    assert And(And(a, b), c) == And(a, And(b, c)) == And(a, b, c) == a & b & c
    assert (a & b & c).operands == (a, b, c)  # type: ignore[attr-defined]
    assert Or(a, And(b, c)) != Or(a, b, c)
    deep: Expr = a
    for _ in range(99):
        deep = ~deep
    with pytest.raises(InvalidFilterError, match="more than 100 levels deep"):
        ~deep
    with pytest.raises(InvalidFilterError, match="more than 100 levels deep"):
        parse("(" * 1000 + "a = 1" + ")" * 1000)
    with pytest.raises(InvalidFilterError, match="more than 100 levels deep"):
        parse("NOT " * 1000 + "a = 1")
    assert parse("(" * 99 + "a = 1" + ")" * 99) == a


@pytest.mark.parametrize("keyword", ["OR", "AND"])
def test_long_filters_work(keyword: str) -> None:
    """10,000 operands: one node; binding, pruning, text and rows never recurse per operand."""
    text = f" {keyword} ".join(f"x = {i}" for i in range(10_000))
    expr = parse(text)
    assert str(expr) == text and len(expr.operands) == 10_000  # type: ignore[attr-defined]
    table = pa.table({"x": pa.array([5, 20_000, None], pa.int64())})
    expected = [True, False, None] if keyword == "OR" else [False, False, None]
    assert expr.evaluate(table).to_pylist() == expected
    bound = expr.bind(table.schema)
    assert bound.may_match({"x": ColumnStats(0, 9, 0, 3)}.get) is (keyword == "OR")
    assert bound.may_match({"x": ColumnStats(10_001, 20_000, 0, 3)}.get) is False
    assert Not(bound).may_match({"x": ColumnStats(5, 5, 0, 3)}.get) is (keyword == "AND")
    built = col("x") == 0
    for i in range(1, 2_000):
        built = built | (col("x") == i)
    assert str(built) == " OR ".join(f"x = {i}" for i in range(2_000))


def test_combining_with_non_expressions_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        (col("a") == 1) & "b = 2"  # type: ignore[operator]


# --- bind --------------------------------------------------------------------------------
SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ls", pa.large_string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us")),
        ("tz", pa.timestamp("ns", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
    ]
)


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("i = 2.0", "i = 2"),
        ("f > 1", "f > 1.0e0"),
        ("f IN (1, 2.5)", "f IN (1.0e0, 2.5e0)"),
        ("d = '2025-10-04'", "d = DATE '2025-10-04'"),
        ("d IN (DATE '2025-10-04')", "d IN (DATE '2025-10-04')"),
        ("t < TIMESTAMP '2025-10-04 12:00:00'", "t < TIMESTAMP '2025-10-04 12:00:00'"),
        ("t >= DATE '2025-10-04'", "t >= TIMESTAMP '2025-10-04 00:00:00'"),
        ("t >= '2025-10-04 01:00'", "t >= TIMESTAMP '2025-10-04 01:00:00'"),
        ("tz < TIMESTAMP '2025-10-04 12:00:00'", "tz < TIMESTAMP '2025-10-04 12:00:00+00:00'"),
        ("tz < TIMESTAMP '2025-10-04 14:00:00+02:00'", "tz < TIMESTAMP '2025-10-04 12:00:00+00:00'"),
        ("b = TRUE AND ls LIKE 'a%'", "b = TRUE AND ls LIKE 'a%'"),
        ("NOT (dec < 1.5)", "NOT (dec < 1.5)"),
        ("s IS NULL OR i IS NOT NULL", "s IS NULL OR i IS NOT NULL"),
    ],
)
def test_bind_converts_literals(text: str, rendered: str) -> None:
    bound = parse(text).bind(SCHEMA)
    assert str(bound) == rendered
    assert bound.bind(SCHEMA) == bound


def test_bind_literal_types() -> None:
    assert parse("dec < 1.5").bind(SCHEMA) == Comparison("dec", "<", Decimal("1.5"))
    tz_bound = parse("tz = TIMESTAMP '2025-10-04 12:00:00'").bind(SCHEMA)
    assert isinstance(tz_bound, Comparison) and tz_bound.value.utcoffset() == dt.timedelta(0)  # type: ignore[union-attr]


def test_bind_unknown_column() -> None:
    with pytest.raises(InvalidFilterError, match="unknown column 'nope'.*available columns: i, f, s"):
        parse("i = 1 AND nope = 2").bind(SCHEMA)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("i = 'a'", "'i' of type int32 with 'a'"),
        ("i = TRUE", "'i' of type int32 with TRUE"),
        ("i IN (1, 'x')", "'i' of type int32 with 'x'"),
        ("f IN (1.5e0, TRUE)", "'f' of type double with TRUE"),  # a double in the list makes no number of TRUE
        ("f = 'a'", "'f' of type double with 'a'"),
        ("s = 1", "'s' of type string with 1"),
        ("s = DATE '2025-01-01'", "'s' of type string with DATE '2025-01-01'"),
        ("b = 1", "'b' of type bool with 1"),
        ("d = 'yesterday'", "'d' of type date32[day] with 'yesterday'"),
        ("d = 20251004", "'d' of type date32[day] with 20251004"),
        ("d = TIMESTAMP '2025-10-04 00:00:00'", "'d' of type date32[day] with TIMESTAMP"),
        ("t = 5", "'t' of type timestamp[us] with 5"),
        ("t = TIMESTAMP '2025-10-04 00:00:00Z'", "no time zone"),
        ("dec = 'a'", "'dec' of type decimal128(10, 2) with 'a'"),
        ("i LIKE 'a%'", "LIKE needs a string column; column 'i' has type int32"),
    ],
)
def test_bind_rejects_wrong_types(text: str, fragment: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(fragment)):
        parse(text).bind(SCHEMA)


# --- evaluation ------------------------------------------------------------------------------
def test_null_semantics_on_a_small_table() -> None:
    table = pa.table({"x": pa.array([1, 2, None], pa.int64()), "s": ["ab", None, "b"]})

    def mask(text: str) -> list[bool | None]:
        return parse(text).evaluate(table).to_pylist()

    assert mask("x = 1") == [True, False, None]
    assert mask("NOT x = 1") == [False, True, None]
    assert mask("x IN (1)") == [True, False, None]
    assert mask("x NOT IN (1)") == [False, True, None]
    assert mask("NOT x IN (1)") == [False, True, None]
    assert mask("x IS NULL") == [False, False, True]
    assert mask("s NOT LIKE 'a%'") == [False, None, True]
    assert mask("x = 1 OR x IS NULL") == [True, False, True]
    assert mask("x = 2 AND s = 'zz'") == [False, None, False]
    assert mask("x = 2 OR s = 'zz'") == [False, True, None]
    assert table.filter(parse("NOT x IN (1)").to_arrow())["x"].to_pylist() == [2]
    batch_mask = parse("x > 1").evaluate(table.to_batches()[0])
    assert isinstance(batch_mask, pa.BooleanArray) and batch_mask.to_pylist() == [False, True, None]


def test_timestamps_in_another_zone_than_the_column() -> None:
    moment = dt.datetime(2025, 1, 1, 12, tzinfo=dt.UTC)
    table = pa.table({"t": pa.array([moment, None], pa.timestamp("ns", tz="Europe/Berlin"))})
    assert parse("t = TIMESTAMP '2025-01-01 13:00:00+01:00'").evaluate(table).to_pylist() == [True, None]
    assert parse("t IN (TIMESTAMP '2025-01-01 12:00:00')").evaluate(table).to_pylist() == [True, None]


def _like_regex(pattern: str) -> str:
    parts, chars = [], iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        else:
            parts.append({"%": ".*", "_": "."}.get(char) or re.escape(char))
    return "".join(parts)


def reference(expr: Expr, row: dict[str, object]) -> bool | None:
    """SQL three-valued logic, by hand."""
    match expr:
        case And(operands=operands):
            verdicts = [reference(operand, row) for operand in operands]
            return False if False in verdicts else None if None in verdicts else True
        case Or(operands=operands):
            verdicts = [reference(operand, row) for operand in operands]
            return True if True in verdicts else None if None in verdicts else False
        case Not(child=child):
            value = reference(child, row)
            return None if value is None else not value
        case Computed(term=term, predicate=leaf):
            return reference(leaf, {leaf.column: computed(term, row)})
        case IsNull(column=column, negated=negated):
            return (row[column] is None) != negated
    value = row[expr.column]  # type: ignore[attr-defined]
    if value is None:
        return None
    match expr:
        case Comparison(op=op, value=literal):
            ops = {"=": operator.eq, "!=": operator.ne, "<": operator.lt,
                   "<=": operator.le, ">": operator.gt, ">=": operator.ge}
            return ops[op](value, literal)
        case In(values=values, negated=negated):
            return (value in values) != negated
        case Like(pattern=pattern, negated=negated, case_insensitive=False):
            return bool(re.fullmatch(_like_regex(pattern), value, re.DOTALL)) != negated  # type: ignore[arg-type]
        case Like(pattern=pattern, negated=negated, case_insensitive=True):
            matched = re.fullmatch(_like_regex(pattern.lower()), value.lower(), re.DOTALL)  # type: ignore[union-attr]
            return bool(matched) != negated
    raise AssertionError(expr)


def computed(term: Term, row: dict[str, object]) -> object:
    """A term's value by hand: SQL's remainder has the dividend's sign (Python's the divisor's)."""
    match term:
        case Ref(name=name):
            return row[name]
        case Function(name=name, arg=arg):
            value = computed(arg, row)
            return None if value is None else getattr(value, name)()
        case Arithmetic(op="%", left=left, right=Literal(value=divisor)):
            value = computed(left, row)
            return None if value is None else int(math.copysign(abs(value) % abs(divisor), value))  # type: ignore[arg-type]
    raise AssertionError(term)


INTS = st.integers(-3, 3)
FLOATS = st.sampled_from([-1.5, 0.0, 0.25, 1.0, 2.5])
STRINGS = st.sampled_from(["", "a", "ab", "abc", "a%c", "a_", "b", "ba", "\\", "A", "aB", "Ab"])
PATTERNS = st.one_of(
    st.lists(st.sampled_from(["a", "b", "c", "%", "_", "\\%", "\\_"]), max_size=4).map("".join),
    # prefix patterns, the ones pruning reasons about
    st.tuples(st.sampled_from(["a", "ab", "b", "a\\%"]), st.sampled_from(["", "%", "_", "%c", "_%"])).map("".join),
)
OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
TYPED_VALUES = {"i": INTS, "f": st.one_of(FLOATS, INTS), "s": STRINGS}


def leaf(column: str) -> st.SearchStrategy[Expr]:
    values = TYPED_VALUES[column]
    choices = [
        st.builds(Comparison, st.just(column), OPS, values),
        st.builds(In, st.just(column), st.lists(values, min_size=1, max_size=3), st.booleans()),
        st.builds(IsNull, st.just(column), st.booleans()),
        st.builds(lambda low, high: col(column).between(low, high), values, values),
    ]
    if column == "s":
        choices.append(st.builds(Like, st.just(column), PATTERNS, st.booleans(), st.booleans()))
        function = st.sampled_from(["lower", "upper"]).map(lambda name: Function(name, Ref(column)))
        choices.append(st.builds(on_value, function, st.one_of(
            st.builds(Comparison, st.just("v"), OPS, values),
            st.builds(In, st.just("v"), st.lists(values, min_size=1, max_size=3), st.booleans()),
            st.builds(Like, st.just("v"), PATTERNS, st.booleans()),
            st.builds(IsNull, st.just("v"), st.booleans()))))
    if column == "i":
        remainder = st.integers(-4, 4).filter(bool).map(lambda k: Arithmetic("%", Ref(column), Literal(k)))
        choices.append(st.builds(on_value, remainder, st.one_of(
            st.builds(Comparison, st.just("v"), OPS, values),
            st.builds(In, st.just("v"), st.lists(values, min_size=1, max_size=3), st.booleans()))))
    return st.one_of(choices)


def on_value(term: Term, leaf: Expr) -> Expr:
    """``leaf`` (on the stand-in column ``v``) on the value of ``term``, as the parser builds it."""
    return Computed(term, replace(leaf, column=str(term)))  # type: ignore[type-var]


LEAVES = st.one_of(leaf("i"), leaf("f"), leaf("s"))
EXPRESSIONS = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.builds(And, children, children), st.builds(Or, children, children), st.builds(Not, children)
    ),
    max_leaves=8,
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {"i": st.none() | INTS, "f": st.none() | FLOATS, "s": st.none() | STRINGS}
    ),
    max_size=8,
)
TABLE_SCHEMA = pa.schema([("i", pa.int64()), ("f", pa.float64()), ("s", pa.string())])


def to_table(rows: list[dict[str, object]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TABLE_SCHEMA)


@settings(max_examples=200, deadline=None)
@given(EXPRESSIONS, ROWS)
def test_arrow_filter_matches_reference(expr: Expr, rows: list[dict[str, object]]) -> None:
    table = to_table(rows)
    bound = expr.bind(TABLE_SCHEMA)
    expected = [reference(bound, row) for row in rows]
    assert expr.evaluate(table).to_pylist() == expected
    kept = table.filter(bound.to_arrow()).to_pylist()
    assert kept == [row for row, verdict in zip(rows, expected) if verdict is True]


def stats_of(rows: list[dict[str, object]], column: str, forget: str) -> ColumnStats | None:
    """Exact statistics of one column, minus what `forget` says is unknown."""
    values = [row[column] for row in rows if row[column] is not None]
    full = ColumnStats(
        min=min(values, default=None),
        max=max(values, default=None),
        null_count=len(rows) - len(values),
        row_count=len(rows),
    )
    return {
        "nothing": full,
        "all": None,
        "min": ColumnStats(None, full.max, full.null_count, full.row_count),
        "max": ColumnStats(full.min, None, full.null_count, full.row_count),
        "counts": ColumnStats(full.min, full.max),
        "rows": ColumnStats(full.min, full.max, full.null_count, None),
    }[forget]


FORGET_MODES = ["nothing", "all", "min", "max", "counts", "rows"]
FORGET = st.sampled_from(FORGET_MODES)


@settings(max_examples=250, deadline=None)
@given(st.one_of(LEAVES, EXPRESSIONS), ROWS, st.fixed_dictionaries({"i": FORGET, "f": FORGET, "s": FORGET}))
def test_pruning_is_sound(expr: Expr, rows: list[dict[str, object]], forget: dict[str, str]) -> None:
    bound = expr.bind(TABLE_SCHEMA)
    if any(reference(bound, row) is True for row in rows):
        assert bound.may_match(lambda name: stats_of(rows, name, forget[name]))


DOMAINS = {
    "i": [-1, 0, 1, 2],
    "f": [-1.5, 0.0, 1.0, 2.5],
    "s": ["", "a", "ab", "abc", "a%c", "a_", "b", "\\"],
}
LIKE_PATTERNS = [
    prefix + tail
    for prefix in ["", "a", "ab", "b", "a\\%", "a\\_"]
    for tail in ["", "%", "_", "%c", "_%", "%%"]
]


def every_leaf(column: str) -> list[Expr]:
    values = DOMAINS[column]
    value_lists = [[value] for value in values] + [list(pair) for pair in itertools.combinations(values, 2)]
    leaves: list[Expr] = [IsNull(column), IsNull(column, negated=True)]
    leaves += [Comparison(column, op, value) for op in ["=", "!=", "<", "<=", ">", ">="] for value in values]
    leaves += [In(column, listed, negated) for listed in value_lists for negated in (False, True)]
    if column == "s":
        leaves += [Like(column, pattern, negated) for pattern in LIKE_PATTERNS for negated in (False, True)]
    return [bound for leaf in leaves for bound in (leaf, Not(leaf))]


@pytest.mark.parametrize("column", ["i", "f", "s"])
def test_leaf_pruning_is_sound_exhaustively(column: str) -> None:
    """Every leaf (and its negation) against every file of up to three rows over a small domain."""
    leaves = every_leaf(column)
    for size in range(4):
        for values in itertools.combinations_with_replacement([None, *DOMAINS[column]], size):
            rows = [{column: value} for value in values]
            lookups = [{column: stats_of(rows, column, forget)}.get for forget in FORGET_MODES]
            for leaf in leaves:
                if any(reference(leaf, row) is True for row in rows):
                    assert all(leaf.may_match(lookup) for lookup in lookups), (leaf, values)


# --- pruning precision: sound is not enough, it must also prune ------------------------------
def stats(**by_column: ColumnStats) -> object:
    return by_column.get


@pytest.mark.parametrize(
    ("text", "column_stats", "may_match"),
    [
        ("x = 5", ColumnStats(6, 9, 0, 10), False),
        ("x = 5", ColumnStats(1, 4, 0, 10), False),
        ("x = 5", ColumnStats(1, 9, 0, 10), True),
        ("x = 5", ColumnStats(None, 4, 0, 10), False),
        ("x = 5", ColumnStats(None, None, 0, 10), True),
        ("x = 5", ColumnStats(1, 9, 10, 10), False),  # all null
        ("x = 5", ColumnStats(None, None, 10, 10), False),
        ("x = 5", ColumnStats(0, 0, 0, 0), False),  # no rows
        ("x < 5", ColumnStats(5, 9), False),
        ("x <= 5", ColumnStats(5, 9), True),
        ("x > 5", ColumnStats(1, 5), False),
        ("x >= 5", ColumnStats(1, 5), True),
        ("x != 5", ColumnStats(5, 5, 0, 10), False),
        ("x != 5", ColumnStats(5, 5, 3, 10), False),  # nulls never match !=
        ("x != 5", ColumnStats(5, 6, 0, 10), True),
        ("x != 5.0", ColumnStats(5.0, 5.0, 0, 10), True),  # NaN is not in float stats
        ("NOT x = 5", ColumnStats(5, 5, 2, 10), False),
        ("NOT x != 5", ColumnStats(6, 9), False),
        ("NOT x < 5", ColumnStats(1, 4), False),
        ("NOT (x < 5 OR x > 8)", ColumnStats(1, 4), False),
        ("NOT (x > 2 AND x < 5)", ColumnStats(3, 4), False),
        ("NOT NOT x = 5", ColumnStats(6, 9), False),
        ("x IS NULL", ColumnStats(1, 2, 0, 10), False),
        ("x IS NULL", ColumnStats(1, 2, None, 10), True),
        ("x IS NULL", ColumnStats(None, None, 1, 10), True),
        ("NOT x IS NULL", ColumnStats(None, None, 10, 10), False),
        ("x IS NOT NULL", ColumnStats(None, None, 10, 10), False),
        ("x IS NOT NULL", ColumnStats(None, None, 10, None), True),
        ("NOT x IS NOT NULL", ColumnStats(1, 2, 0, 10), False),
        ("x IN (1, 7)", ColumnStats(2, 6), False),
        ("x IN (1, 5)", ColumnStats(2, 6), True),
        ("x NOT IN (1, 5)", ColumnStats(5, 5, 4, 10), False),
        ("NOT x IN (5)", ColumnStats(5, 5), False),
        ("x NOT IN (1, 5)", ColumnStats(4, 5), True),
        ("s LIKE 'ab%'", ColumnStats("ac", "b"), False),
        ("s LIKE 'ab%'", ColumnStats("a", "aa"), False),
        ("s LIKE 'ab%'", ColumnStats("aa", "ac"), True),
        ("s LIKE 'ab%'", ColumnStats("abz", "abzz"), True),
        ("s LIKE 'ab%'", ColumnStats(None, "ab"), True),
        ("s LIKE 'ab_x'", ColumnStats("b", "c"), False),
        ("s LIKE 'a\\%'", ColumnStats("a&", "a("), False),  # escaped: exactly 'a%'
        ("s LIKE 'a\\%'", ColumnStats("a!", "a("), True),
        ("s LIKE '%b'", ColumnStats("x", "y"), True),
        ("s LIKE '_b'", ColumnStats("x", "y"), True),
        ("s LIKE '%'", ColumnStats(None, None, 10, 10), False),
        ("s NOT LIKE 'ab%'", ColumnStats("ab", "abz"), False),
        ("s NOT LIKE 'ab%'", ColumnStats("aa", "abz"), True),
        ("s NOT LIKE 'ab%c'", ColumnStats("ab", "abz"), True),
        ("s NOT LIKE 'ab'", ColumnStats("ab", "ab"), False),
        ("NOT s LIKE 'ab%'", ColumnStats("ab", "abz"), False),
        ("s NOT LIKE '%'", ColumnStats("a", "b", 10, 10), False),
        ("s ILIKE 'AB%'", ColumnStats("ab", "abz", 0, 10), True),  # bounds order by case: no range
        ("s ILIKE 'ab%'", ColumnStats("X", "Y", 0, 10), True),
        ("s NOT ILIKE 'ab%'", ColumnStats("ab", "ab", 0, 10), True),
        ("s ILIKE 'ab%'", ColumnStats(None, None, 10, 10), False),  # all null
        ("x = 5", ColumnStats(float("nan"), float("nan")), True),  # NaN bounds are unknown
        ("x = 5", ColumnStats("a", "b"), True),  # type mismatch: cannot tell
        ("s LIKE 'a%'", ColumnStats(1, 2), True),
        ("x = 5 OR y = 1", ColumnStats(6, 9), True),  # nothing known about y
        ("x = 5 AND y = 1", ColumnStats(6, 9), False),
    ],
)
def test_pruning_decisions(text: str, column_stats: ColumnStats, may_match: bool) -> None:
    known = {"x": column_stats, "s": column_stats}
    assert parse(text).may_match(known.get) is may_match


def test_pruning_on_dates() -> None:
    expr = parse("d BETWEEN '2025-01-01' AND '2025-01-31'").bind(pa.schema([("d", pa.date32())]))
    january = ColumnStats(dt.date(2025, 1, 5), dt.date(2025, 1, 9))
    february = ColumnStats(dt.date(2025, 2, 1), dt.date(2025, 2, 9))
    assert expr.may_match({"d": january}.get)
    assert not expr.may_match({"d": february}.get)


# --- text round trip ---------------------------------------------------------------------------
NAMES = st.one_of(
    st.sampled_from(["id", "a.b", "date", "timestamp", "and", "Not", "my col", 'q"uote', "x1"]),
    st.text(min_size=1, max_size=6),
)
ANY_LITERAL = st.one_of(
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.booleans(),
    st.dates(),
    st.datetimes(
        timezones=st.sampled_from(
            [None, dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(-dt.timedelta(hours=8))]
        )
    ),
)
ANY_LEAF = st.one_of(
    st.builds(Comparison, NAMES, OPS, ANY_LITERAL),
    st.builds(In, NAMES, st.lists(ANY_LITERAL, min_size=1, max_size=3), st.booleans()),
    st.builds(IsNull, NAMES, st.booleans()),
    # a pattern ending in an odd number of backslashes has a dangling escape: rejected
    st.builds(Like, NAMES, st.text(max_size=6).filter(lambda p: (len(p) - len(p.rstrip("\\"))) % 2 == 0),
              st.booleans(), st.booleans()),
    st.builds(on_value, st.builds(Function, st.sampled_from(["lower", "upper"]), NAMES.map(Ref)),
              st.builds(Comparison, st.just("v"), OPS, ANY_LITERAL)),
    st.builds(on_value, st.builds(lambda name, k: Arithmetic("%", Ref(name), Literal(k)), NAMES,
                                  st.integers().filter(bool)),
              st.builds(In, st.just("v"), st.lists(ANY_LITERAL, min_size=1, max_size=3), st.booleans())),
)
ANY_EXPRESSION = st.recursive(
    ANY_LEAF,
    lambda children: st.one_of(
        st.builds(And, children, children), st.builds(Or, children, children), st.builds(Not, children)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(ANY_EXPRESSION)
def test_text_round_trip(expr: Expr) -> None:
    text = str(expr)
    reparsed = parse(text)
    assert str(reparsed) == text
    assert reparsed == expr


# --- SQL semantics: NaN, -0.0, float32, big integers, decimals, LIKE escapes, zones ------------
SQL_TABLE = pa.table({
    "f": pa.array([float("nan"), -0.0, 0.0, 1.0, None], pa.float64()),
    "f32": pa.array([0.1, 16777216.0, float("nan"), -0.0, None], pa.float32()),
    "i": pa.array([-(2**63), 0, 1, 2**63 - 1, None], pa.int64()),
    "u": pa.array([0, 5, 2**63, 2**64 - 1, None], pa.uint64()),
    "d": pa.array([Decimal("1.00"), Decimal("1.10"), Decimal("-0.01"), Decimal("99999999.99"), None],
                  pa.decimal128(10, 2)),
    "s": ["a\\b", "ab", "a%", "x\\", None],
})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # NaN equals itself and sorts above every number (DuckDB, Spark, PostgreSQL)
        ("f > 5", [True, False, False, False, None]),
        ("f >= 1", [True, False, False, True, None]),
        ("f < 5", [False, True, True, True, None]),
        ("f != 1", [True, True, True, False, None]),
        ("NOT (f > 5)", [False, True, True, True, None]),
        ("f BETWEEN 0 AND 5", [False, True, True, True, None]),
        ("f NOT IN (1, 2)", [True, True, True, False, None]),
        # -0.0 = 0.0, in comparisons and in IN lists
        ("f = 0.0", [False, True, True, False, None]),
        ("f IN (0.0)", [False, True, True, False, None]),
        ("f IN (-0.0e0, 7)", [False, True, True, False, None]),
        ("f NOT IN (0)", [True, False, False, True, None]),
        # float32: an exact literal is cast to float32, a double widens the column
        ("f32 = 0.1", [True, False, False, False, None]),
        ("f32 IN (0.1)", [True, False, False, False, None]),
        ("f32 = 0.1e0", [False, False, False, False, None]),
        ("f32 IN (0.1, 1)", [True, False, False, False, None]),
        ("f32 IN (0.1, 1e0)", [False, False, False, False, None]),  # one double: all doubles
        ("f32 = 16777217", [False, True, False, False, None]),  # int -> float32 rounds
        ("f32 = 16777217e0", [False, False, False, False, None]),
        ("f32 < 0.1e0", [False, False, False, True, None]),
        ("f32 > 0.1e0", [True, True, True, False, None]),
        ("f32 IN (-0.0)", [False, False, False, True, None]),
        # integers beyond the column's type
        ("i = 99999999999999999999", [False, False, False, False, None]),
        ("i != 99999999999999999999", [True, True, True, True, None]),
        ("i < 99999999999999999999", [True, True, True, True, None]),
        ("i > -99999999999999999999", [True, True, True, True, None]),
        ("i <= -9223372036854775809", [False, False, False, False, None]),
        ("NOT (i >= 9223372036854775808)", [True, True, True, True, None]),
        ("i IN (9223372036854775808, 1)", [False, False, True, False, None]),
        ("i IN (9223372036854775808, 1e0)", [False, False, True, True, None]),  # doubles: 2**63-1 is 2**63
        ("i = 0.5", [False, False, False, False, None]),  # an exact fraction: i = 0.5 is never true
        ("i < 0.5", [True, True, False, False, None]),
        ("i >= 0.5", [False, False, True, True, None]),
        ("i > 0.5e0", [False, False, True, True, None]),
        ("i IN (1.5, 0)", [False, True, False, False, None]),
        ("i NOT IN (9223372036854775808)", [True, True, True, True, None]),
        ("u > 5", [False, False, True, True, None]),
        ("u >= 9223372036854775808", [False, False, True, True, None]),
        ("u = 18446744073709551615", [False, False, False, True, None]),
        ("u IN (-1, 18446744073709551616, 5)", [False, True, False, False, None]),
        ("u > -1", [True, True, True, True, None]),
        ("u < 18446744073709551616", [True, True, True, True, None]),
        # decimals compare exactly
        ("d = 1.0000000000000000001", [False, False, False, False, None]),
        ("d != 1.0000000000000000001", [True, True, True, True, None]),
        ("d < 1.0000000000000000001", [True, False, True, False, None]),
        ("d > 1.001", [False, True, False, True, None]),
        ("d >= 1.001", [False, True, False, True, None]),
        ("d = 1.1", [False, True, False, False, None]),
        ("d IN (1.100, 1.0000000000000000001)", [False, True, False, False, None]),
        ("d > 99999999.991", [False, False, False, False, None]),
        ("d < 123456789012.5", [True, True, True, True, None]),
        ("d > -123456789012.5", [True, True, True, True, None]),
        ("d IN (1.0000000000000000001, 1.5e0)", [True, False, False, False, None]),  # a double: all doubles
        # LIKE: a backslash escapes, in every shape of pattern
        ("s LIKE 'a\\b%'", [False, True, False, False, None]),
        ("s LIKE 'a\\\\b%'", [True, False, False, False, None]),
        ("s LIKE '%\\\\'", [False, False, False, True, None]),
        ("s LIKE '%\\%%'", [False, False, True, False, None]),
        ("s LIKE 'a\\%'", [False, False, True, False, None]),
        ("s NOT LIKE '%b'", [False, False, True, True, None]),
        ("s LIKE '_\\\\_'", [True, False, False, False, None]),
        ("s LIKE '%'", [True, True, True, True, None]),
    ],
)
def test_sql_semantics(text: str, expected: list[bool | None]) -> None:
    bound = parse(text).bind(SQL_TABLE.schema)
    assert bound.evaluate(SQL_TABLE).to_pylist() == expected
    # pruning is sound against each row alone and the whole table
    from manifest_table.format.stats import table_stats
    for row in range(SQL_TABLE.num_rows):
        if expected[row]:
            assert bound.may_match(table_stats(SQL_TABLE.slice(row, 1)).get), row
    if True in expected:
        assert bound.may_match(table_stats(SQL_TABLE).get)


@pytest.mark.parametrize(("text", "expected"), [
    ("d = 1e17", [True, False, None]),
    ("d IN (1e17, 5)", [True, False, None]),
    ("d < 1e17", [False, True, None]),
    ("d >= 1e17", [True, False, None]),
    ("d != 1e17", [False, True, None]),
    ("d BETWEEN -0.3e0 AND 2e0", [False, True, None]),
    ("d = -0.3e0", [False, True, None]),  # Arrow's decimal-to-double cast gives -0.30000000000000004
    ("d IN (-0.3e0)", [False, True, None]),
])
def test_a_double_against_a_decimal_column_compares_as_doubles(text: str, expected: list[bool | None]) -> None:
    """As DuckDB, Spark and PostgreSQL compare them (and as an integer column already was):
    99999999999999999.9 is the double 1e17. The literal used to become the decimal of its
    shortest repr, so ``d = 1e17`` matched nothing where DuckDB matches the row (found by
    tests/reads/test_differential.py). The doubles are the nearest ones. Pruning keeps every
    matching row."""
    from manifest_table.format.stats import table_stats
    table = pa.table({"d": pa.array([Decimal("99999999999999999.9"), Decimal("-0.3"), None], pa.decimal128(18, 1))})
    bound = parse(text).bind(table.schema)
    assert bound.evaluate(table).to_pylist() == expected
    assert all(bound.may_match(table_stats(table.slice(row, 1)).get) for row in (0, 1) if expected[row])


def test_decimal_literal_beyond_decimal128_precision() -> None:
    table = pa.table({"d": pa.array([Decimal("1.00"), None], pa.decimal128(38, 2))})
    assert parse("d = 1.0000000000000000001").evaluate(table).to_pylist() == [False, None]
    assert parse("d < 1.0000000000000000001").evaluate(table).to_pylist() == [True, None]
    assert parse("d IN (1.0000000000000000001, 1)").evaluate(table).to_pylist() == [True, None]


def test_decimal_literal_below_a_wide_decimal_columns_range() -> None:
    """decimal(38, 10) holds down to -(10**28 - 1e-10): negating that bound in Python's
    default 28-digit context rounded it to -10**28, which Arrow refused as a decimal(38, 10)."""
    table = pa.table({"d": pa.array([Decimal("-9999999999999999999999999999.9999999999"), None],
                                    pa.decimal128(38, 10))})
    assert parse("d > -10000000000000000000000000000").evaluate(table).to_pylist() == [True, None]
    assert parse("d <= -1E40").evaluate(table).to_pylist() == [False, None]


def test_timestamp_literals_below_the_column_unit() -> None:
    table = pa.table({"t": pa.array([dt.datetime(2024, 1, 1, 0, 0, 1)], pa.timestamp("s"))})
    assert parse("t < TIMESTAMP '2024-01-01 00:00:01.5'").evaluate(table).to_pylist() == [True]
    assert parse("t = TIMESTAMP '2024-01-01 00:00:01.5'").evaluate(table).to_pylist() == [False]
    assert parse("t > TIMESTAMP '2024-01-01 00:00:00.5'").evaluate(table).to_pylist() == [True]
    ns = pa.table({"t": pa.array([10**18 + 1], pa.timestamp("ns"))})
    assert parse("t > TIMESTAMP '2300-01-01 00:00:00'").evaluate(ns).to_pylist() == [False]  # beyond int64 ns


@pytest.mark.parametrize("literal", [
    "TIMESTAMP '1970-01-01 00:00:01.0000005'", "'1970-01-01 00:00:01.000000400'",
    "TIMESTAMP '1970-01-01T00:00:01,0000001+00:00'",
])
def test_timestamp_literals_finer_than_a_microsecond_are_refused(literal: str) -> None:
    """Python's ISO parser drops digits past the sixth: `t > ...01.0000005` selected
    01.0000004 of a nanosecond column, and `t = ...01.000000400` matched 01.000000000."""
    with pytest.raises(InvalidFilterError, match="finer than a microsecond"):
        parse(f"t > {literal}").bind(pa.schema([("t", pa.timestamp("ns", "UTC"))]))


def test_pandas_timestamp_literals_keep_their_instant() -> None:
    import pandas as pd
    with pytest.raises(InvalidFilterError, match="finer than a microsecond"):
        col("t") > pd.Timestamp(1_000_000_500)
    exact = col("t") == pd.Timestamp("1970-01-01 00:00:01.000001")
    assert type(exact.value) is dt.datetime and exact == parse(str(exact))
    assert parse("t = TIMESTAMP '1970-01-01 00:00:01.000001000'") == exact  # trailing zeros are exact


@pytest.mark.parametrize("pattern", ["a\\", "\\", "%\\", "a\\\\\\"])
def test_dangling_like_escape_is_rejected(pattern: str) -> None:
    with pytest.raises(InvalidFilterError, match="ends with the escape character"):
        Like("s", pattern)
    with pytest.raises(InvalidFilterError, match="ends with the escape character"):
        parse(f"s LIKE '{pattern}'")


def test_zoned_timestamps_prune_as_instants_across_a_repeated_hour() -> None:
    """00:30Z is 02:30 CEST and 01:10Z is 02:10 CET: by wall clock the later instant looks
    earlier, and stats compared as wall clocks pruned the file that held 01:10Z."""
    import manifest_table as mt
    from manifest_table.storage import MemoryStore

    zone = pa.timestamp("us", tz="Europe/Berlin")
    first, second = (dt.datetime(2024, 10, 27, h, m, tzinfo=dt.UTC) for h, m in [(0, 30), (1, 10)])
    table = mt.create_table("test://t", pa.schema([("t", zone)]), store=MemoryStore())
    table.append(pa.table({"t": pa.array([first, second], zone)}))
    stats = table.scan().plan_files()[0].stats["t"]
    assert (stats.min, stats.max) == (first, second)
    for text, rows in [
        ("t = TIMESTAMP '2024-10-27 02:10:00+01:00'", 1),
        ("t = TIMESTAMP '2024-10-27 01:10:00'", 1),  # naive: UTC
        ("t > TIMESTAMP '2024-10-27 02:30:00+02:00'", 1),
        ("t <= TIMESTAMP '2024-10-27 02:10:00+02:00'", 0),  # 00:10Z: before both
        ("t IN (TIMESTAMP '2024-10-27 02:30:00+02:00', TIMESTAMP '2024-10-27 02:10:00+01:00')", 2),
    ]:
        assert table.scan(where=text).count() == rows, text


def test_nan_keeps_the_min_and_has_no_max() -> None:
    import manifest_table as mt
    from manifest_table.format.stats import merge_stats, table_stats
    from manifest_table.storage import MemoryStore

    stats = table_stats(pa.table({"f": [1.0, float("nan"), None, -2.0]}))["f"]
    assert (stats.min, stats.max, stats.null_count) == (-2.0, None, 1)
    only_nan = table_stats(pa.table({"f": [float("nan")]}))["f"]
    assert (only_nan.min, only_nan.max) == (None, None)
    assert merge_stats(stats, table_stats(pa.table({"f": [5.0]}))["f"]) == ColumnStats(-2.0, None, 1, 5)
    table = mt.create_table("test://t", pa.schema([("f", pa.float64())]), store=MemoryStore(), row_group_size=64)
    table.append(pa.table({"f": [1.0, 2.0] * 8}))
    table.append(pa.table({"f": [1.0, float("nan")] * 8}))
    assert table.scan(where="f > 5").count() == 8
    assert table.scan(where="f < -5").count() == 0
    assert len(table.scan(where="f < -5").plan_files()) == 0  # the min still prunes
    # The max prunes the first append's files (max 2.0), never the second's (NaN: no max).
    # (The parallel writer may cut either append into more than one file.)
    first = {f.path for f in table.manifest(1).files}
    planned = {f.path for f in table.scan(where="f > 5").plan_files()}
    assert planned == {f.path for f in table.manifest().files} - first


@pytest.mark.parametrize("rows", [1_000, 700_000])
def test_matching_rows_are_the_rows_where_the_filter_is_true(rows: int) -> None:
    """``expressions.arrow.matching_rows``: ascending indexes, null as not matching, over one
    chunk or many."""
    import numpy as np

    from manifest_table.expressions.arrow import matching_rows

    values = np.arange(rows) % 7
    x = pa.array(values, mask=np.arange(rows) % 11 == 0)
    table = pa.Table.from_batches(pa.table({"x": x}).to_batches(max_chunksize=300_000))
    where = col("x").isin([2, 5]).bind(table.schema).to_arrow()
    expected = np.flatnonzero(((values == 2) | (values == 5)) & (np.arange(rows) % 11 != 0))
    assert np.array_equal(matching_rows(table, where), expected)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(0, 3_000),
    trues=st.lists(st.integers(0, 2_999), max_size=40),
    nulls=st.lists(st.integers(0, 2_999), max_size=40),
    cut=st.tuples(st.integers(0, 70), st.integers(0, 70)),
    chunks=st.integers(1, 2),
)
def test_matching_rows_of_masks_with_few_rows_true(
    rows: int, trues: list[int], nulls: list[int], cut: tuple[int, int], chunks: int
) -> None:
    """A mask with few rows true is read by the words of its bitmap (``_sparse_true``):
    the same rows as every row's value, over a slice that starts inside a byte (the bits
    before and after it set), with nulls whose value bits are set, in one chunk or two."""
    import numpy as np
    import pyarrow.compute as pc

    from manifest_table.expressions.arrow import _sparse_true, matching_rows

    values = np.zeros(rows, dtype=bool)
    values[[i for i in trues if i < rows]] = True
    valid = np.ones(rows, dtype=bool)
    valid[[i for i in nulls if i < rows]] = False
    values[~valid] = True  # (a null's value bit set: it must still not match)
    start, end = min(cut[0], rows), max(min(cut[0], rows), rows - cut[1])
    around = np.zeros(rows, dtype=bool)
    around[max(0, start - 8) : start] = around[end : end + 8] = True  # (bits outside the slice)
    values |= around
    valid |= around
    column = pa.array(values, mask=~valid).slice(start, end - start)
    half = len(column) // 2 if chunks == 2 else len(column)
    table = pa.table({"m": pa.chunked_array([column.slice(0, half), column.slice(half)], pa.bool_())})
    expected = np.flatnonzero((values & valid)[start:end])
    got = matching_rows(table, pc.field("m"))
    assert got.dtype == np.int64 and got.tolist() == expected.tolist()
    if len(expected) * 64 <= len(column):  # (Acero's mask starts at a byte: the slice itself)
        without_nulls = pa.array(values & valid).slice(start, end - start)
        assert _sparse_true(without_nulls).tolist() == expected.tolist()

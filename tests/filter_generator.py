"""Random filters as text in two dialects: ours and DuckDB's (the SQL oracle, docs/expressions.md
"SQL semantics"). Shared by tests/reads/test_filters_duckdb.py (fixed columns, hand-picked literals) and
the differential read-path test (random schemas: tests/differential_types.py).

A column says how each dialect names it and draws its literals; the generator builds
comparisons either way round, IN / NOT IN, [NOT] BETWEEN, [NOT] LIKE and ILIKE with escapes,
IS [NOT] NULL, AND / OR / NOT, and leaves on computed values: `lower(s)` / `upper(s)` of
string columns (compared, listed, LIKE) and `i % k` of integer columns (compared, listed). Where the dialects differ:
LIKE gains `ESCAPE '\\'` (DuckDB has
no escape character by default), and BETWEEN is spelled as its two comparisons for DuckDB
(see `leaf`); a column or literal may differ too (a column's `duck` text, a literal's
`Text`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Text:
    ours: str
    duck: str
    parts: tuple[Text, ...] = ()
    """The sub-filters it combines (AND, OR, NOT), to shrink a failing filter to a smaller one."""

    def smaller(self) -> Iterator[Text]:
        """Every sub-filter, largest first: candidates when shrinking a failure."""
        for part in self.parts:
            yield part
        for part in self.parts:
            yield from part.smaller()


def same(text: str) -> Text:
    return Text(text, text)


def string_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def quoted_name(name: str) -> str:
    """A column name as both dialects read it whatever its characters."""
    return '"' + name.replace('"', '""') + '"'


Literal = Callable[[random.Random], Text]


@dataclass(frozen=True)
class FilterColumn:
    ours: str
    """The column as our filter text names it."""
    duck: str
    """A DuckDB expression with the same values (a name, or e.g. ``epoch_ns("t")``)."""
    literal: Literal | None
    """Literals of the column's type (None: the column is only tested with IS [NOT] NULL)."""
    like: Callable[[random.Random], str] | None = None
    """LIKE patterns (string columns only)."""
    integer: bool = False
    """An integer column, whose remainders (`i % k`) filters test."""


LIKE_PIECES = ["a", "b", "ä", "%", "%", "_", "\\%", "\\_", "\\\\", "\\a", "'", "\n", "it"]


def like_pattern(rng: random.Random) -> str:
    return "".join(rng.choice(LIKE_PIECES) for _ in range(rng.randint(0, 4)))


def computed(rng: random.Random, column: FilterColumn) -> Text | None:
    """A leaf on `lower()` / `upper()` of a string column or on `column % k` of an integer
    one (DuckDB gets `% |k|`: a truncated remainder ignores the divisor's sign), or None."""
    negated = "NOT " if rng.random() < 0.3 else ""
    if column.like is not None and column.literal is not None:
        function = rng.choice(["lower", "upper"])
        ours, duck = f"{function}({column.ours})", f"{function}({column.duck})"
        roll = rng.random()
        if roll < 0.3:
            pattern = string_literal(column.like(rng))
            return Text(f"{ours} {negated}LIKE {pattern}", f"{duck} {negated}LIKE {pattern} ESCAPE '\\'")
        value = column.literal(rng)
        if roll < 0.5:
            return Text(f"{ours} {negated}IN ({value.ours})", f"{duck} {negated}IN ({value.duck})")
        op = rng.choice(["=", "!=", "<", ">="])
        return Text(f"{ours} {op} {value.ours}", f"{duck} {op} {value.duck}")
    if column.integer:
        k = rng.choice([-7, -3, -2, 2, 3, 5, 10])
        ours, duck = f"{column.ours} % {k}", f"({column.duck} % {abs(k)})"
        values = [str(rng.randint(-abs(k), abs(k))) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            listed = ", ".join(values)
            return Text(f"{ours} {negated}IN ({listed})", f"{duck} {negated}IN ({listed})")
        op = rng.choice(["=", "!=", "<", "<=", ">", ">="])
        return Text(f"{ours} {op} {values[0]}", f"{duck} {op} {values[0]}")
    return None


def leaf(rng: random.Random, columns: Sequence[FilterColumn]) -> Text:
    column = rng.choice(columns)
    ours, duck, literal = column.ours, column.duck, column.literal
    kind = rng.random()
    if kind < 0.12 and (found := computed(rng, column)) is not None:
        return found
    if column.like is not None and kind < 0.3:
        negated = "NOT " if rng.random() < 0.3 else ""
        keyword = "ILIKE" if rng.random() < 0.3 else "LIKE"
        pattern = string_literal(column.like(rng))
        return Text(f"{ours} {negated}{keyword} {pattern}", f"{duck} {negated}{keyword} {pattern} ESCAPE '\\'")
    if kind < 0.08 or literal is None:
        negated = "NOT " if rng.random() < 0.5 else ""
        return Text(f"{ours} IS {negated}NULL", f"{duck} IS {negated}NULL")
    if kind < 0.25:
        values = [literal(rng) for _ in range(rng.randint(1, 3))]
        negated = "NOT " if rng.random() < 0.4 else ""
        return Text(
            f"{ours} {negated}IN ({', '.join(v.ours for v in values)})",
            f"{duck} {negated}IN ({', '.join(v.duck for v in values)})",
        )
    if kind < 0.35:
        low, high = literal(rng), literal(rng)
        negated = "NOT " if rng.random() < 0.3 else ""
        # BETWEEN is two comparisons (SQL standard, PostgreSQL, Spark); DuckDB binds all three
        # operands to one type instead (f32 BETWEEN 16777217 AND 3.4e38 compares as doubles).
        return Text(
            f"{ours} {negated}BETWEEN {low.ours} AND {high.ours}",
            f"{negated}({duck} >= {low.duck} AND {duck} <= {high.duck})",
        )
    op = rng.choice(["=", "!=", "<>", "<", "<=", ">", ">="])
    value = literal(rng)
    if rng.random() < 0.2:  # literal op column
        return Text(f"{value.ours} {op} {ours}", f"{value.duck} {op} {duck}")
    return Text(f"{ours} {op} {value.ours}", f"{duck} {op} {value.duck}")


def random_filter(rng: random.Random, columns: Sequence[FilterColumn], depth: int = 0) -> Text:
    roll = rng.random()
    if depth >= 3 or roll < 0.4:
        return leaf(rng, columns)
    if roll < 0.55:
        inner = random_filter(rng, columns, depth + 1)
        return Text(f"NOT ({inner.ours})", f"NOT ({inner.duck})", (inner,))
    keyword = rng.choice(["AND", "OR"])
    parts = tuple(random_filter(rng, columns, depth + 1) for _ in range(rng.randint(2, 3)))
    return Text(
        f" {keyword} ".join(f"({p.ours})" for p in parts), f" {keyword} ".join(f"({p.duck})" for p in parts), parts
    )

"""Pruning: could any row described by a file's or row group's statistics satisfy a leaf?

Every answer errs towards "may match": a wrong no silently loses rows, a wrong yes only costs
a read. NOT is never evaluated here; nodes push it down to the leaves first (see nodes.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..format.stats import ColumnStats
from .like import parse_like
from .literals import OPERATORS, Value

StatsLookup = Callable[[str], ColumnStats | None]


def comparison_may_match(op: str, value: Value, stats: ColumnStats) -> bool:
    if not _has_values(stats):
        return False
    low, high = _bounds(stats, doubles=isinstance(value, float))
    if op == "=":
        return _in_range(low, high, value) and _may_hold(stats, value)
    if op == "!=":
        return not _all_equal(low, high, value)
    bound = low if op in ("<", "<=") else high
    return bound is None or bool(OPERATORS[op](bound, value))


def in_may_match(values: tuple[Value, ...], negated: bool, stats: ColumnStats) -> bool:
    if not _has_values(stats):
        return False
    low, high = _bounds(stats, doubles=any(isinstance(value, float) for value in values))
    if negated:
        return not any(_all_equal(low, high, value) for value in values)
    return any(_in_range(low, high, value) and _may_hold(stats, value) for value in values)


def is_null_may_match(negated: bool, stats: ColumnStats) -> bool:
    if negated:
        return _has_values(stats)
    return stats.null_count is None or stats.null_count > 0


def like_may_match(pattern: str, negated: bool, stats: ColumnStats) -> bool:
    if not _has_values(stats):
        return False
    low, high = _bounds(stats)
    parsed = parse_like(pattern)
    prefix = parsed.prefix
    if negated:
        if parsed.literal is not None:
            return not _all_equal(low, high, parsed.literal)
        # 'p%' cannot fail on a file whose values all start with p.
        all_prefixed = parsed.prefix_only and low is not None and high is not None
        return not (all_prefixed and low.startswith(prefix) and high.startswith(prefix))
    if parsed.literal is not None:
        return _in_range(low, high, parsed.literal)
    # Some string starting with prefix lies in [low, high] iff these two hold.
    return (high is None or high >= prefix) and (low is None or low[: len(prefix)] <= prefix)


def _has_values(stats: ColumnStats) -> bool:
    """False when every row is null: then no comparison can be true."""
    if stats.null_count is None or stats.row_count is None:
        return True
    return stats.null_count < stats.row_count


def _may_hold(stats: ColumnStats, value: Value) -> bool:
    """False when the rows' membership test (a bloom filter) rules ``value`` out."""
    return stats.may_contain is None or stats.may_contain(value)


def _bounds(stats: ColumnStats, doubles: bool = False) -> tuple[Any, Any]:
    """(min, max), a NaN bound treated as unknown. Against a double literal, integer and
    decimal bounds become doubles, as the rows are compared (float() keeps their order, ties
    included)."""

    def known(bound: Any) -> Any:
        if isinstance(bound, float) and math.isnan(bound):
            return None
        return float(bound) if doubles and type(bound) in (int, Decimal) else bound

    return known(stats.min), known(stats.max)


def _in_range(low: Any, high: Any, value: Any) -> bool:
    return (low is None or low <= value) and (high is None or value <= high)


def _all_equal(low: Any, high: Any, value: Any) -> bool:
    """Every non-null value equals `value`. Never claimed for floats: statistics leave out
    NaN, and NaN != value is true."""
    if isinstance(value, float) or isinstance(low, float) or low is None or high is None:
        return False
    return bool(low == value == high)

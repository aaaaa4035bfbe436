"""Pruning many files at once: a filter as an Arrow expression over columns of per-file
min / max, so that planning over a segment of 32,768 file entries is one vectorised filter
instead of 32,768 calls of ``may_match``.

The expression is a coarse pre-filter: it only ever says "may match" where ``may_match``
could (tests/reads/test_pruning_literals.py checks it on random stats and literals), and the
entries it keeps are checked by ``may_match`` afterwards. So it handles the
leaves that decide point lookups and ranges (comparisons and short IN lists of integers,
strings, dates, timestamps and decimals) and keeps every entry for any other leaf (floats,
whose NaN and widening rules stay in pruning.py; LIKE; IS NULL; NOT IN)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.types as pat

from ..lazy import lazy
from . import arrow
from .literals import Value
from .nodes import And, Comparison, Expr, In, Or, PruneOnly

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
else:
    pc = lazy("pyarrow.compute")
    ds = lazy("pyarrow.dataset")

MAX_IN_VALUES = 64
StatsColumns = Callable[[str], tuple[str, str, pa.DataType] | None]
"""Column name -> (its min column, its max column, their Arrow type), or None if it has none."""


def stats_filter(expr: Expr, columns: StatsColumns) -> pc.Expression | None:
    """An expression true for every entry whose stats may match the bound ``expr``; None
    when it would keep every entry."""
    if isinstance(expr, PruneOnly):
        return stats_filter(expr.expr, columns)
    if isinstance(expr, And):
        parts = [p for p in (stats_filter(o, columns) for o in expr.operands) if p is not None]
        return _combine(parts, pc.Expression.__and__) if parts else None
    if isinstance(expr, Or):
        parts = [stats_filter(o, columns) for o in expr.operands]
        return None if any(p is None for p in parts) else _combine(parts, pc.Expression.__or__)
    if isinstance(expr, Comparison) and expr.op != "!=":
        return _compare(expr.column, expr.op, expr.value, columns)
    if isinstance(expr, In) and not expr.negated and len(expr.values) <= MAX_IN_VALUES:
        parts = [_compare(expr.column, "=", value, columns) for value in expr.values]
        return None if any(p is None for p in parts) else _combine(parts, pc.Expression.__or__)
    return None


def _combine(parts: list[pc.Expression], op: Callable[[pc.Expression, pc.Expression], pc.Expression]) -> pc.Expression:
    out = parts[0]
    for part in parts[1:]:
        out = op(out, part)
    return out


def _compare(column: str, op: str, value: Value | None, columns: StatsColumns) -> pc.Expression | None:
    """Entries whose [min, max] may hold a value ``op value``: each bound compared as a row
    would be (``arrow.comparison``), so a literal the type cannot hold (``2.5`` on an integer
    column, a fraction of a second on ``timestamp[s]``, ``-1`` or ``2**64`` on ``uint64``)
    compares with the nearest values the type holds, exactly as ``may_match`` compares it in
    Python. (Casting it to the column's type truncated: ``id < 1.5`` skipped ``id = 1``.)"""
    found = columns(column)
    if found is None or value is None:
        return None
    low_name, high_name, dtype = found
    if not (
        pat.is_integer(dtype)
        or pat.is_string(dtype)
        or pat.is_large_string(dtype)
        or pat.is_date(dtype)
        or pat.is_timestamp(dtype)
        or pat.is_decimal(dtype)
    ) or isinstance(value, float | bool):
        return None
    low, high = ds.field(low_name), ds.field(high_name)
    below = low.is_null() | arrow.comparison(low, "<" if op == "<" else "<=", value, dtype)
    above = high.is_null() | arrow.comparison(high, ">" if op == ">" else ">=", value, dtype)
    if op == "=":
        return below & above
    return below if op in ("<", "<=") else above

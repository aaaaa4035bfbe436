"""Arrow translation: each leaf as a `pyarrow.compute.Expression` with SQL's null semantics,
and `evaluate`, which runs a bound expression over a table or batch."""

from __future__ import annotations

import functools
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow.acero import Declaration, ProjectNodeOptions, TableSourceNodeOptions

from .literals import OPERATORS, Value


_TRUE, _FALSE = pa.scalar(True), pa.scalar(False)


def comparison(column: str, op: str, value: Value) -> pc.Expression:
    return OPERATORS[op](pc.field(column), value)


def is_in(column: str, values: tuple[Value, ...], negated: bool) -> pc.Expression:
    field = pc.field(column)
    # Arrow's is_in says false for a null input; SQL says unknown, which NOT must keep.
    found = pc.if_else(field.is_valid(), field.isin(list(values)), pa.scalar(None, pa.bool_()))
    return ~found if negated else found


def is_null(column: str, negated: bool) -> pc.Expression:
    field = pc.field(column)
    return field.is_valid() if negated else field.is_null()


def like(column: str, pattern: str, negated: bool) -> pc.Expression:
    matched = pc.match_like(pc.field(column), pattern)
    return ~matched if negated else matched


_GROUP = 64
"""Operands Arrow may see as one chain. Arrow canonicalises an AND/OR tree into one chain
(associative calls are refolded) and recurses along it: 10,000 ORs crashed the process with a
stack overflow at about 9,000 (measured on pyarrow 26). Groups are joined through an identity
`if_else(g, true, false)` (null stays null), which Arrow does not refold."""


def all_of(conditions: list[pc.Expression]) -> pc.Expression:
    """AND of all `conditions` (Kleene)."""
    return _grouped(conditions, lambda a, b: a & b)


def any_of(conditions: list[pc.Expression]) -> pc.Expression:
    """OR of all `conditions` (Kleene)."""
    return _grouped(conditions, lambda a, b: a | b)


def _grouped(items: list[pc.Expression], combine: Callable[[pc.Expression, pc.Expression], pc.Expression]) -> pc.Expression:
    while True:
        groups = [functools.reduce(combine, items[i:i + _GROUP]) for i in range(0, len(items), _GROUP)]
        if len(groups) == 1:
            return groups[0]
        items = [pc.if_else(group, _TRUE, _FALSE) for group in groups]


def evaluate(condition: pc.Expression, table: pa.Table) -> pa.ChunkedArray:
    """The boolean mask of `condition` over `table`, in row order."""
    plan = Declaration.from_sequence([
        Declaration("table_source", TableSourceNodeOptions(table)),
        Declaration("project", ProjectNodeOptions([condition], ["mask"])),
    ])
    return plan.to_table(use_threads=False).column(0)  # one thread keeps row order

"""Arrow translation: each leaf as a `pyarrow.compute.Expression` with SQL's null semantics,
and `evaluate`, which runs a bound expression over a table or batch."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow.acero import Declaration, ProjectNodeOptions, TableSourceNodeOptions

from .literals import OPERATORS, Value


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


def evaluate(condition: pc.Expression, table: pa.Table) -> pa.ChunkedArray:
    """The boolean mask of `condition` over `table`, in row order."""
    plan = Declaration.from_sequence([
        Declaration("table_source", TableSourceNodeOptions(table)),
        Declaration("project", ProjectNodeOptions([condition], ["mask"])),
    ])
    return plan.to_table(use_threads=False).column(0)  # one thread keeps row order

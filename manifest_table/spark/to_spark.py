"""Our filter expressions as Spark Columns, where Spark evaluates them exactly as we do.

Used to narrow what a native delete hands to our own evaluator: Spark prunes row groups by
it and drops most non-matching rows without leaving the JVM. Only leaves on columns whose
values Spark sees unchanged (``same_in_spark``, less two types, see ``_translatable``), the
remainders of integer columns (``id % 10 = 0``) and the SQL connectives are translated;
both sides use SQL's three-valued logic. Anything else is left out of a top-level AND,
which only ever keeps more rows, never fewer."""

from __future__ import annotations

import functools
import operator
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from ..expressions import And, Arithmetic, Comparison, Computed, Expr, In, IsNull, Literal, Not, Or, Ref, Term
from ..expressions.literals import OPERATORS
from .schema import same_in_spark


def quoted(name: str) -> Column:
    """The top-level column ``name``, whatever characters it holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def narrowing(where: Expr, schema: pa.Schema) -> Column | None:
    """A Spark filter keeping every row ``where`` (bound to ``schema``) keeps, or None."""
    if isinstance(where, And):
        parts = [p for p in (narrowing(operand, schema) for operand in where.operands) if p is not None]
        return functools.reduce(operator.and_, parts) if parts else None
    return exact(where, schema)


def exact(where: Expr, schema: pa.Schema) -> Column | None:
    """A Spark filter keeping exactly the rows ``where`` keeps, or None."""
    if isinstance(where, (And, Or)):
        parts = [exact(operand, schema) for operand in where.operands]
        if any(part is None for part in parts):
            return None
        return functools.reduce(operator.and_ if isinstance(where, And) else operator.or_, parts)
    if isinstance(where, Not):
        child = exact(where.child, schema)
        return None if child is None else ~child
    if isinstance(where, Computed):
        remainder = _remainder(where.term, schema)
        return None if remainder is None else _leaf(where.predicate, remainder, where.term.arrow_type)
    if not isinstance(where, (IsNull, Comparison, In)) or not _translatable(schema.field(where.column).type):
        return None
    return _leaf(where, quoted(where.column), schema.field(where.column).type)


def _leaf(leaf: Expr, column: Column, arrow_type: pa.DataType) -> Column | None:
    """``leaf`` (bound) on ``column``, a Spark value of type ``arrow_type``."""
    if isinstance(leaf, IsNull):
        return column.isNotNull() if leaf.negated else column.isNull()
    if not isinstance(leaf, (Comparison, In)):
        return None
    values = (leaf.value,) if isinstance(leaf, Comparison) else leaf.values
    if not all(_fits(value, arrow_type) for value in values):
        return None
    if isinstance(leaf, Comparison):
        return OPERATORS[leaf.op](column, F.lit(leaf.value))
    matched = column.isin([F.lit(v) for v in leaf.values])
    return ~matched if leaf.negated else matched


def _remainder(term: Term, schema: pa.Schema) -> Column | None:
    """``column % k`` of an integer column as Spark's ``%``, which is SQL's (the dividend's
    sign). ``lower``/``upper`` are not translated: Spark maps case with Java's rules, which
    differ from Unicode's simple mapping ours use for a few characters (``İ``)."""
    if not (isinstance(term, Arithmetic) and term.op == "%" and isinstance(term.left, Ref)):
        return None
    arrow_type = schema.field(term.left.name).type
    if not (pa.types.is_integer(arrow_type) and _translatable(arrow_type) and isinstance(term.right, Literal)):
        return None
    return quoted(term.left.name) % F.lit(term.right.value)


def _fits(value: object, arrow_type: pa.DataType) -> bool:
    """A bound literal the column's own type holds exactly. Binding keeps literals a column
    cannot hold (``i = 10**20``, ``i < 0.5``, a decimal finer than its scale), which our
    evaluator compares exactly; Spark would cast them its own way, so they are left out."""
    if value is None:
        return False
    if pa.types.is_integer(arrow_type):
        if type(value) is not int:
            return False
        try:
            pa.scalar(value, arrow_type)
        except (pa.ArrowInvalid, OverflowError):
            return False
        return True
    if pa.types.is_decimal(arrow_type):
        return (
            isinstance(value, Decimal)
            and -int(value.as_tuple().exponent) <= arrow_type.scale
            and len(value.as_tuple().digits) <= arrow_type.precision
        )
    if pa.types.is_floating(arrow_type):
        return type(value) is float
    return True


def _translatable(arrow_type: pa.DataType) -> bool:
    """Naive timestamps are left out (a naive literal would be read in the session's zone),
    and ``uint64`` (its literals may not fit Spark's long)."""
    return (
        same_in_spark(arrow_type)
        and arrow_type != pa.uint64()
        and not (pa.types.is_timestamp(arrow_type) and arrow_type.tz is None)
    )

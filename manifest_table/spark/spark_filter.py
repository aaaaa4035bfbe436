"""Our filter expressions as Spark Columns, where Spark evaluates them exactly as we do.

Used to narrow what a native delete hands to our own evaluator: Spark prunes row groups by
it and drops most non-matching rows without leaving the JVM. Only leaves on columns whose
values Spark sees unchanged (``same_in_spark``, less two types, see ``_translatable``) and
the SQL connectives are translated; both sides use SQL's three-valued logic. Anything else is left out of a
top-level AND, which only ever keeps more rows, never fewer."""

from __future__ import annotations

import operator
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from ..expressions import And, Comparison, Expr, In, IsNull, Not, Or
from .schema import same_in_spark

_OPERATORS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
              ">": operator.gt, ">=": operator.ge}


def quoted(name: str) -> Column:
    """The top-level column ``name``, whatever characters it holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def narrowing(where: Expr, schema: pa.Schema) -> Column | None:
    """A Spark filter keeping every row ``where`` (bound to ``schema``) keeps, or None."""
    if isinstance(where, And):
        parts = [p for p in (narrowing(where.left, schema), narrowing(where.right, schema)) if p is not None]
        return parts[0] & parts[1] if len(parts) == 2 else (parts[0] if parts else None)
    return exact(where, schema)


def exact(where: Expr, schema: pa.Schema) -> Column | None:
    """A Spark filter keeping exactly the rows ``where`` keeps, or None."""
    if isinstance(where, (And, Or)):
        left, right = exact(where.left, schema), exact(where.right, schema)
        if left is None or right is None:
            return None
        return left & right if isinstance(where, And) else left | right
    if isinstance(where, Not):
        child = exact(where.child, schema)
        return None if child is None else ~child
    if isinstance(where, IsNull):
        column = quoted(where.column)
        return column.isNotNull() if where.negated else column.isNull()
    if not isinstance(where, (Comparison, In)) or not _translatable(schema.field(where.column).type):
        return None
    column = quoted(where.column)
    if isinstance(where, Comparison):
        return _OPERATORS[where.op](column, F.lit(where.value))
    if any(v is None for v in where.values):
        return None
    matched = column.isin([F.lit(v) for v in where.values])
    return ~matched if where.negated else matched


def _translatable(arrow_type: pa.DataType) -> bool:
    """Naive timestamps are left out (a naive literal would be read in the session's zone),
    and ``uint64`` (its literals may not fit Spark's long)."""
    return (same_in_spark(arrow_type) and arrow_type != pa.uint64()
            and not (pa.types.is_timestamp(arrow_type) and arrow_type.tz is None))

"""Spark's pushed-down filters as our expressions.

A filter we accept is removed from Spark's plan, so we must apply it exactly as Spark would:
only filters on top-level columns whose values Spark sees unchanged (``same_in_spark``) are
taken, and anything we cannot express or bind stays with Spark. Both sides use SQL's
three-valued logic, so ``Not`` maps onto ``Not``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import datasource as sds

from ..errors import InvalidFilterError
from ..expressions import Comparison, Expr, In, IsNull, Like, Not
from .schema import same_in_spark

_COMPARISONS: dict[type, str] = {
    sds.EqualTo: "=",
    sds.GreaterThan: ">",
    sds.GreaterThanOrEqual: ">=",
    sds.LessThan: "<",
    sds.LessThanOrEqual: "<=",
}
_LIKE_PATTERNS: dict[type, str] = {
    sds.StringStartsWith: "{}%",
    sds.StringEndsWith: "%{}",
    sds.StringContains: "%{}%",
}


def from_spark_filter(spark_filter: sds.Filter, schema: pa.Schema) -> Expr | None:
    """The bound expression for ``spark_filter``, or None when Spark must apply it."""
    if isinstance(spark_filter, sds.Not):
        child = from_spark_filter(spark_filter.child, schema)
        return None if child is None else Not(child)
    path: tuple[str, ...] = getattr(spark_filter, "attribute", ())
    value: Any = getattr(spark_filter, "value", None)
    if len(path) != 1 or schema.get_field_index(path[0]) < 0:
        return None  # a nested field, or a column we do not have
    name, kind = path[0], type(spark_filter)
    try:
        if kind is sds.IsNull or kind is sds.IsNotNull:
            return IsNull(name, negated=kind is sds.IsNotNull).bind(schema)
        if not same_in_spark(schema.field(name).type):
            return None
        if kind in _COMPARISONS:
            return Comparison(name, _COMPARISONS[kind], value).bind(schema)
        if kind is sds.In:
            return In(name, tuple(value)).bind(schema)
        if kind in _LIKE_PATTERNS:
            return Like(name, _LIKE_PATTERNS[kind].format(_escape_like(value))).bind(schema)
    except InvalidFilterError:
        return None  # e.g. a null in an IN list or a literal type we do not compare with
    return None


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

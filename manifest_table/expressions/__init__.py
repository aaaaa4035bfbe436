"""Filter expressions: `parse("id > 5 AND country IN ('DE')")` or `(col("id") > 5) & ...`.

One tree serves row filtering (`to_arrow`), file pruning (`may_match`) and the predicate text
recorded in manifests (`str`). See docs/expressions.md.
"""

from .parser import parse, to_expr
from .tree import (
    And,
    Column,
    ColumnStats,
    Comparison,
    Expr,
    In,
    IsNull,
    Like,
    Not,
    Or,
    col,
)

__all__ = [
    "And",
    "Column",
    "ColumnStats",
    "Comparison",
    "Expr",
    "In",
    "IsNull",
    "Like",
    "Not",
    "Or",
    "col",
    "parse",
    "to_expr",
]

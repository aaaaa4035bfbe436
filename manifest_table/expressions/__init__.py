"""Filter expressions: `parse("id > 5 AND country IN ('DE')")` or `(col("id") > 5) & ...`.

One tree serves row filtering (`to_arrow`), file pruning (`may_match`) and the predicate text
recorded in manifests (`str`). See docs/expressions.md.

Modules, lowest first: `literals` (values, types, text), `like` (LIKE patterns), `pruning`
(statistics), `arrow` (rows), `terms` (value expressions: arithmetic, what `update` assigns),
`nodes` (the tree, delegating to those), `builder` (`col(...)`), `parser` (text).
"""

from ..format.stats import ColumnStats
from .builder import Column, col
from .nodes import (
    And,
    Comparison,
    Computed,
    Expr,
    In,
    IsNull,
    Like,
    Not,
    Or,
)
from .parser import parse, parse_term, to_expr, to_term
from .terms import Arithmetic, Condition, Function, Literal, Ref, Term, lit

__all__ = [
    "And",
    "Arithmetic",
    "Condition",
    "Computed",
    "Function",
    "Literal",
    "Ref",
    "Term",
    "lit",
    "parse_term",
    "to_term",
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

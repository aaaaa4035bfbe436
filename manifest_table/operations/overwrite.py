"""Overwrite: replace every row, or the rows matching a condition, in one commit.

1. Without a condition, every file of the snapshot is removed whole and the files staged
   before are dropped (``Staging.remove_all``); with one, the matching rows are deleted as
   ``delete.py`` deletes them, the condition bound to the schema first so that conflict checks
   compare its literals as the columns' types.
2. The commit is serializable against the condition: a concurrent commit adding rows it may
   match, or deleting rows it read, makes it fail (commit/conflicts.py).
3. The new rows are appended (``append.py``)."""

from __future__ import annotations

from typing import Any

from ..expressions import Expr, to_expr
from .append import append
from .delete import delete
from .staging import Staging


def overwrite(staging: Staging, data: Any, where: str | Expr | None = None, schema_mode: str | None = None) -> None:
    """Stage replacing every row (or the rows matching ``where``) with ``data``."""
    expr = to_expr(where)
    if expr is None:
        staging.remove_all()
    else:
        # Bound, so that conflict checks compare the literal as the column's type (a
        # decimal column's 1.10 with Decimal('1.1'), not with the binary float 1.1).
        expr = expr.bind(staging.base.schema)
        delete(staging, expr)
    staging.serialize_against(expr)
    staging.record("overwrite", ("predicates", None if expr is None else str(expr)))
    append(staging, data, schema_mode)

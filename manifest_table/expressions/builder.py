"""The Python builder of filters and value expressions: ``col("id") > 5``,
``col("country").isin(["DE"])``, ``col("qty") + 1`` (docs/expressions.md, "Python builder API")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .nodes import And, Comparison, Expr, In, IsNull, Like
from .terms import Ref, Term, term


@dataclass(frozen=True, eq=False)
class Column:
    """Builder for predicates on one column: `col("id") > 5`, `col("c").isin(["DE"])`.

    Not an Expr itself, and its `==` builds a comparison, so it is never compared as a value.
    """

    name: str

    def __eq__(self, value: Any) -> Expr:  # type: ignore[override]
        return Comparison(self.name, "=", value)

    def __ne__(self, value: Any) -> Expr:  # type: ignore[override]
        return Comparison(self.name, "!=", value)

    def __lt__(self, value: Any) -> Expr:
        return Comparison(self.name, "<", value)

    def __le__(self, value: Any) -> Expr:
        return Comparison(self.name, "<=", value)

    def __gt__(self, value: Any) -> Expr:
        return Comparison(self.name, ">", value)

    def __ge__(self, value: Any) -> Expr:
        return Comparison(self.name, ">=", value)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Iterable[Any]) -> Expr:
        return In(self.name, values)  # type: ignore[arg-type]  # In checks and makes a tuple

    def not_in(self, values: Iterable[Any]) -> Expr:
        return In(self.name, values, negated=True)  # type: ignore[arg-type]

    def is_null(self) -> Expr:
        return IsNull(self.name)

    def is_not_null(self) -> Expr:
        return IsNull(self.name, negated=True)

    def like(self, pattern: str) -> Expr:
        return Like(self.name, pattern)

    def ilike(self, pattern: str) -> Expr:
        return Like(self.name, pattern, case_insensitive=True)

    def between(self, low: Any, high: Any) -> Expr:
        """Inclusive range, desugared so pruning and rendering need no extra node."""
        return And(Comparison(self.name, ">=", low), Comparison(self.name, "<=", high))

    # In arithmetic a Column stands for the column's value: `col("qty") + 1` (terms.py).
    def __add__(self, other: Any) -> Term:
        return Ref(self.name) + other

    def __radd__(self, other: Any) -> Term:
        return term(other) + Ref(self.name)

    def __sub__(self, other: Any) -> Term:
        return Ref(self.name) - other

    def __rsub__(self, other: Any) -> Term:
        return term(other) - Ref(self.name)

    def __mul__(self, other: Any) -> Term:
        return Ref(self.name) * other

    def __rmul__(self, other: Any) -> Term:
        return term(other) * Ref(self.name)

    def __truediv__(self, other: Any) -> Term:
        return Ref(self.name) / other

    def __mod__(self, other: Any) -> Term:
        return Ref(self.name) % other

    def __rtruediv__(self, other: Any) -> Term:
        return term(other) / Ref(self.name)

    def __neg__(self) -> Term:
        return -Ref(self.name)


def col(name: str) -> Column:
    """Start a predicate on column `name`."""
    return Column(name)

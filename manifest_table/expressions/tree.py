"""Filter expression trees: build, bind to a schema, prune with statistics, evaluate with Arrow.

Every node follows SQL's three-valued logic: a comparison with a null value is unknown, and a
row is kept only when the whole predicate is true. The same tree serves three consumers that
must agree on that: `to_arrow()` (row filtering), `may_match()` (file and row-group pruning)
and `str()` (the text recorded in manifests, which `parse()` reads back).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import operator
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, ClassVar, Iterable

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow.acero import Declaration, ProjectNodeOptions, TableSourceNodeOptions

from ..errors import InvalidFilterError

Value = bool | int | float | str | Decimal | dt.date | dt.datetime
"""A literal. `bool` is its own kind: TRUE never stands for 1 against an integer column."""

BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
RESERVED = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "BETWEEN", "TRUE", "FALSE"})
"""Words that cannot be bare column names. DATE and TIMESTAMP are not here: they only start a
literal when a string follows, so columns called `date` need no quoting."""

_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "!=": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_INVERSE = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def filter_error(message: str, position: int | None = None) -> InvalidFilterError:
    """An InvalidFilterError carrying `.position` (index into the filter text, or None)."""
    error = InvalidFilterError(message)
    error.position = position  # type: ignore[attr-defined]
    return error


@dataclass(frozen=True)
class ColumnStats:
    """What a file or row group says about one column; None means unknown. min/max are Python
    values of the column's type (over non-null values), comparable with bound literals."""

    min: Any = None
    max: Any = None
    null_count: int | None = None
    row_count: int | None = None


StatsLookup = Callable[[str], ColumnStats | None]


# --- literals ----------------------------------------------------------------------------
def _literal(value: Any) -> Value:
    """Validate a literal; numpy scalars become Python values so they render and compare."""
    if type(value).__module__ == "numpy":
        value = value.item()
    if value is None:
        raise filter_error("NULL is not a value to compare with; use IS NULL / IS NOT NULL")
    if isinstance(value, bool | str | dt.date):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float | Decimal):
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        if not finite:
            raise filter_error(f"literal {value!r} is not a finite number")
        return float(value) if isinstance(value, float) else value
    raise filter_error(f"unsupported literal {value!r} of type {type(value).__name__}")


def quote_name(name: str) -> str:
    """A column name as filter text: bare when it can be, else double-quoted."""
    if BARE_NAME.fullmatch(name) and name.upper() not in RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def render_literal(value: Value) -> str:
    """A literal as filter text that `parse()` reads back to the same value."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, Decimal):
        return format(value, "f")
    return float.__repr__(value) if isinstance(value, float) else str(value)


def _convert(arrow_type: pa.DataType, value: Value) -> Value:
    """`value` as the Python type of `arrow_type`; TypeError/ValueError when incompatible."""
    types = pa.types
    if types.is_boolean(arrow_type) and isinstance(value, bool):
        return value
    if isinstance(value, bool):
        raise TypeError
    if types.is_integer(arrow_type) and isinstance(value, int | float | Decimal):
        if value != int(value):
            raise ValueError("fractional literal against an integer column")
        return int(value)
    if types.is_floating(arrow_type) and isinstance(value, int | float | Decimal):
        return float(value)
    if types.is_decimal(arrow_type) and isinstance(value, int | float | Decimal):
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if _is_string(arrow_type) and isinstance(value, str):
        return value
    if types.is_timestamp(arrow_type):
        return _to_timestamp(value, arrow_type.tz)
    if types.is_date(arrow_type) and not isinstance(value, dt.datetime):
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            return dt.date.fromisoformat(value)
    raise TypeError


def _to_timestamp(value: Value, tz: str | None) -> dt.datetime:
    """Naive literals against a zoned column are UTC; zoned literals move into the column's
    zone, because Arrow will not compare timestamps of different zones."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise TypeError
    if tz is None:
        if value.tzinfo is not None:
            raise TypeError("the column has no time zone; drop the offset from the literal")
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(pa.lib.string_to_tzinfo(tz))


def _is_string(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


# --- statistics helpers -------------------------------------------------------------------
def _has_values(stats: ColumnStats) -> bool:
    """False when every row is null: then no comparison can be true."""
    known = stats.null_count is not None and stats.row_count is not None
    return not (known and stats.null_count >= stats.row_count)


def _bounds(stats: ColumnStats) -> tuple[Any, Any]:
    """(min, max), with NaN treated as unknown since every comparison with it is false."""
    def known(bound: Any) -> Any:
        return None if isinstance(bound, float) and math.isnan(bound) else bound
    return known(stats.min), known(stats.max)


def _in_range(low: Any, high: Any, value: Any) -> bool:
    return (low is None or low <= value) and (high is None or value <= high)


def _all_equal(low: Any, high: Any, value: Any) -> bool:
    """Every non-null value equals `value`. Never claimed for floats: statistics leave out
    NaN, and NaN != value is true."""
    if isinstance(value, float) or isinstance(low, float) or low is None or high is None:
        return False
    return bool(low == value == high)


def _like_prefix(pattern: str) -> tuple[str, str]:
    """Split a LIKE pattern into its literal prefix (escapes resolved) and the rest, which
    starts at the first wildcard ('' when the pattern has none)."""
    prefix: list[str] = []
    index = 0
    while index < len(pattern) and pattern[index] not in "%_":
        if pattern[index] == "\\" and index + 1 < len(pattern):
            index += 1
        prefix.append(pattern[index])
        index += 1
    return "".join(prefix), pattern[index:]


# --- nodes ---------------------------------------------------------------------------------
class Expr(ABC):
    """A boolean filter over rows. Immutable; combine with `&`, `|`, `~`."""

    @abstractmethod
    def columns(self) -> frozenset[str]:
        """Names of the columns the expression reads."""

    @abstractmethod
    def bind(self, schema: pa.Schema) -> Expr:
        """Check columns and literal types against `schema`; literals become the columns' types."""

    @abstractmethod
    def may_match(self, stats: StatsLookup) -> bool:
        """False only if no row described by `stats` can satisfy the expression."""

    @abstractmethod
    def to_arrow(self) -> pc.Expression:
        """The row filter as an Arrow expression (null where SQL says unknown)."""

    @abstractmethod
    def _negate(self) -> Expr:
        """The expression true exactly where this one is false (unknown stays unknown), with
        the negation pushed to the leaves so pruning can reason about it."""

    def evaluate(self, data: pa.Table | pa.RecordBatch) -> pa.ChunkedArray | pa.BooleanArray:
        """Boolean mask over `data` (null where unknown); binds to `data`'s schema first."""
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        plan = Declaration.from_sequence([
            Declaration("table_source", TableSourceNodeOptions(table)),
            Declaration("project", ProjectNodeOptions([self.bind(table.schema).to_arrow()], ["mask"])),
        ])
        mask = plan.to_table(use_threads=False).column(0)  # one thread keeps row order
        return mask.combine_chunks() if isinstance(data, pa.RecordBatch) else mask

    def __and__(self, other: Expr) -> Expr:
        return And(self, other) if isinstance(other, Expr) else NotImplemented

    def __or__(self, other: Expr) -> Expr:
        return Or(self, other) if isinstance(other, Expr) else NotImplemented

    def __invert__(self) -> Expr:
        return Not(self)


@dataclass(frozen=True)
class _Predicate(Expr):
    """A leaf: one column against literals. Shares schema lookup and the pruning guards."""

    column: str

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise filter_error(f"column name must be a non-empty string, got {self.column!r}")

    def columns(self) -> frozenset[str]:
        return frozenset({self.column})

    def bind(self, schema: pa.Schema) -> Expr:
        index = schema.get_field_index(self.column)
        if index < 0:
            available = ", ".join(schema.names) or "(none)"
            raise filter_error(f"unknown column {self.column!r}; available columns: {available}")
        return self._bind(schema.field(index).type)

    def _coerce(self, arrow_type: pa.DataType, value: Value) -> Value:
        try:
            return _convert(arrow_type, value)
        except (TypeError, ValueError, OverflowError) as error:
            reason = f" ({error})" if str(error) else ""
            raise filter_error(
                f"cannot compare column {self.column!r} of type {arrow_type} "
                f"with {render_literal(value)}{reason}"
            ) from None

    def may_match(self, stats: StatsLookup) -> bool:
        known = stats(self.column)
        if known is None:
            return True
        if known.row_count == 0:
            return False
        try:
            return self._may_match(known)
        except TypeError:  # statistics of another type than the literal: cannot tell
            return True

    @abstractmethod
    def _bind(self, arrow_type: pa.DataType) -> Expr: ...

    @abstractmethod
    def _may_match(self, stats: ColumnStats) -> bool: ...


@dataclass(frozen=True)
class Comparison(_Predicate):
    """`column op value` with op one of = != < <= > >=."""

    op: str
    value: Value

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.op not in _OPERATORS:
            raise filter_error(f"unknown comparison operator {self.op!r}")
        object.__setattr__(self, "value", _literal(self.value))

    def __str__(self) -> str:
        return f"{quote_name(self.column)} {self.op} {render_literal(self.value)}"

    def _bind(self, arrow_type: pa.DataType) -> Expr:
        return dataclasses.replace(self, value=self._coerce(arrow_type, self.value))

    def _may_match(self, stats: ColumnStats) -> bool:
        if not _has_values(stats):
            return False
        low, high = _bounds(stats)
        if self.op == "=":
            return _in_range(low, high, self.value)
        if self.op == "!=":
            return not _all_equal(low, high, self.value)
        bound = low if self.op in ("<", "<=") else high
        return bound is None or bool(_OPERATORS[self.op](bound, self.value))

    def to_arrow(self) -> pc.Expression:
        return _OPERATORS[self.op](pc.field(self.column), self.value)

    def _negate(self) -> Expr:
        return dataclasses.replace(self, op=_INVERSE[self.op])


@dataclass(frozen=True)
class In(_Predicate):
    """`column [NOT] IN (values)`; NOT IN is never true for a null value, as in SQL."""

    values: tuple[Value, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.values, str | bytes) or not isinstance(self.values, Iterable):
            raise filter_error(f"IN needs a list of values, got {self.values!r}")
        values = tuple(_literal(value) for value in self.values)
        if not values:
            raise filter_error(f"IN on column {self.column!r} needs at least one value")
        object.__setattr__(self, "values", values)

    def __str__(self) -> str:
        listed = ", ".join(render_literal(value) for value in self.values)
        return f"{quote_name(self.column)} {'NOT ' if self.negated else ''}IN ({listed})"

    def _bind(self, arrow_type: pa.DataType) -> Expr:
        values = tuple(self._coerce(arrow_type, value) for value in self.values)
        return dataclasses.replace(self, values=values)

    def _may_match(self, stats: ColumnStats) -> bool:
        if not _has_values(stats):
            return False
        low, high = _bounds(stats)
        if self.negated:
            return not any(_all_equal(low, high, value) for value in self.values)
        return any(_in_range(low, high, value) for value in self.values)

    def to_arrow(self) -> pc.Expression:
        field = pc.field(self.column)
        # Arrow's is_in says false for a null input; SQL says unknown, which NOT must keep.
        found = pc.if_else(field.is_valid(), field.isin(list(self.values)), pa.scalar(None, pa.bool_()))
        return ~found if self.negated else found

    def _negate(self) -> Expr:
        return dataclasses.replace(self, negated=not self.negated)


@dataclass(frozen=True)
class IsNull(_Predicate):
    """`column IS [NOT] NULL`: the only predicates that are true or false for nulls."""

    negated: bool = False

    def __str__(self) -> str:
        return f"{quote_name(self.column)} IS {'NOT ' if self.negated else ''}NULL"

    def _bind(self, arrow_type: pa.DataType) -> Expr:
        return self

    def _may_match(self, stats: ColumnStats) -> bool:
        if self.negated:
            return _has_values(stats)
        return stats.null_count is None or stats.null_count > 0

    def to_arrow(self) -> pc.Expression:
        field = pc.field(self.column)
        return field.is_valid() if self.negated else field.is_null()

    def _negate(self) -> Expr:
        return dataclasses.replace(self, negated=not self.negated)


@dataclass(frozen=True)
class Like(_Predicate):
    """`column [NOT] LIKE pattern`: `%` any run, `_` one character, backslash escapes."""

    pattern: str
    negated: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.pattern, str):
            raise filter_error(f"LIKE pattern must be a string, got {self.pattern!r}")

    def __str__(self) -> str:
        keyword = "NOT LIKE" if self.negated else "LIKE"
        return f"{quote_name(self.column)} {keyword} {render_literal(self.pattern)}"

    def _bind(self, arrow_type: pa.DataType) -> Expr:
        if not _is_string(arrow_type):
            raise filter_error(
                f"LIKE needs a string column; column {self.column!r} has type {arrow_type}"
            )
        return self

    def _may_match(self, stats: ColumnStats) -> bool:
        if not _has_values(stats):
            return False
        low, high = _bounds(stats)
        prefix, rest = _like_prefix(self.pattern)
        if self.negated:
            if rest == "":
                return not _all_equal(low, high, prefix)
            # 'p%' cannot fail on a file whose values all start with p.
            all_prefixed = rest == "%" and low is not None and high is not None
            return not (all_prefixed and low.startswith(prefix) and high.startswith(prefix))
        if rest == "":
            return _in_range(low, high, prefix)
        # Some string starting with prefix lies in [low, high] iff these two hold.
        return (high is None or high >= prefix) and (low is None or low[: len(prefix)] <= prefix)

    def to_arrow(self) -> pc.Expression:
        matched = pc.match_like(pc.field(self.column), self.pattern)
        return ~matched if self.negated else matched

    def _negate(self) -> Expr:
        return dataclasses.replace(self, negated=not self.negated)


@dataclass(frozen=True)
class _Binary(Expr):
    """AND / OR: shared rendering (minimal parentheses, left-associative) and binding."""

    left: Expr
    right: Expr
    keyword: ClassVar[str]
    precedence: ClassVar[int]

    def __post_init__(self) -> None:
        if not (isinstance(self.left, Expr) and isinstance(self.right, Expr)):
            raise filter_error(f"{self.keyword} needs two expressions")

    def __str__(self) -> str:
        return f"{self._operand(self.left, False)} {self.keyword} {self._operand(self.right, True)}"

    def _operand(self, child: Expr, is_right: bool) -> str:
        if isinstance(child, _Binary) and (
            child.precedence < self.precedence or (is_right and child.precedence == self.precedence)
        ):
            return f"({child})"
        return str(child)

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def bind(self, schema: pa.Schema) -> Expr:
        return dataclasses.replace(self, left=self.left.bind(schema), right=self.right.bind(schema))


@dataclass(frozen=True)
class And(_Binary):
    keyword: ClassVar[str] = "AND"
    precedence: ClassVar[int] = 2

    def may_match(self, stats: StatsLookup) -> bool:
        return self.left.may_match(stats) and self.right.may_match(stats)

    def to_arrow(self) -> pc.Expression:
        return self.left.to_arrow() & self.right.to_arrow()

    def _negate(self) -> Expr:
        return Or(self.left._negate(), self.right._negate())


@dataclass(frozen=True)
class Or(_Binary):
    keyword: ClassVar[str] = "OR"
    precedence: ClassVar[int] = 1

    def may_match(self, stats: StatsLookup) -> bool:
        return self.left.may_match(stats) or self.right.may_match(stats)

    def to_arrow(self) -> pc.Expression:
        return self.left.to_arrow() | self.right.to_arrow()

    def _negate(self) -> Expr:
        return And(self.left._negate(), self.right._negate())


@dataclass(frozen=True)
class Not(Expr):
    """NOT child. Kept as a node so the text reads as written; pruning pushes it down."""

    child: Expr

    def __post_init__(self) -> None:
        if not isinstance(self.child, Expr):
            raise filter_error("NOT needs an expression")

    def __str__(self) -> str:
        return f"NOT ({self.child})"

    def columns(self) -> frozenset[str]:
        return self.child.columns()

    def bind(self, schema: pa.Schema) -> Expr:
        return Not(self.child.bind(schema))

    def may_match(self, stats: StatsLookup) -> bool:
        return self.child._negate().may_match(stats)

    def to_arrow(self) -> pc.Expression:
        return ~self.child.to_arrow()

    def _negate(self) -> Expr:
        return self.child


# --- builder -------------------------------------------------------------------------------
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

    def between(self, low: Any, high: Any) -> Expr:
        """Inclusive range, desugared so pruning and rendering need no extra node."""
        return And(Comparison(self.name, ">=", low), Comparison(self.name, "<=", high))


def col(name: str) -> Column:
    """Start a predicate on column `name`."""
    return Column(name)

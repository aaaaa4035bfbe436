"""Value expressions: what ``Table.update`` assigns to a column. A literal, a column, or
arithmetic (``+ - * /``) over them: ``col("price") * 1.1``, ``parse_term("qty + 1")``.

SQL's semantics, as Spark 4 (ANSI mode), DuckDB and PostgreSQL agree on them:

- a null operand gives null;
- ``/`` of two integers is a double division (``7 / 2`` is 3.5, as in Spark and DuckDB; not
  PostgreSQL's truncation), with a decimal it is a decimal division;
- an integer result that leaves int64, and a division by zero, are errors, never a wrapped or
  infinite value (Arrow's ``*_checked`` kernels), so an update that would write one fails
  whole and commits nothing;
- ``%`` is the remainder of a division truncated towards zero: its sign is the dividend's
  (``-7 % 3`` is -1, as in PostgreSQL, DuckDB and Spark; Python's and Arrow's ``modulo``
  take the divisor's sign, which ``Arithmetic`` corrects); ``x % 0`` is an error;
- ``lower(s)`` and ``upper(s)`` map each character of a string by Unicode's simple case
  mapping (``Function``);
- mixed types widen as SQL does (an integer with a double is a double); an integer literal
  is an int64, so ``small_int_column * 1000`` is computed in int64, while two int8 columns
  add as int8 (an overflow is an error, as in Spark's ANSI mode).

The result is then stored into its column by a safe cast (``assigned``): 2.0 goes into an
integer column, 2.5 does not, and neither does a value outside the column's range.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import InvalidFilterError
from ..lazy import lazy
from .literals import Value, filter_error, literal, quote_name, render_literal, unknown_column
from .pruning import ColumnStats, StatsLookup

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")

_KERNELS = {
    "+": "add_checked",
    "-": "subtract_checked",
    "*": "multiply_checked",
    "/": "divide_checked",
    "%": "modulo_checked",
}
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}
FUNCTIONS = {"lower": "utf8_lower", "upper": "utf8_upper"}
"""The functions of one string a term may call, and their Arrow kernels: each maps a character
by Unicode's simple case mapping, as DuckDB's ``lower`` and ``upper`` do."""


class Term(ABC):
    """A value computed per row. Immutable; combine with ``+ - * /``."""

    arrow_type: pa.DataType | None = None
    """The result's type once bound (None before)."""

    @abstractmethod
    def columns(self) -> frozenset[str]:
        """Names of the columns the term reads."""

    @abstractmethod
    def bind(self, schema: pa.Schema) -> Term:
        """Check columns and operand types against ``schema``; the copy knows its type."""

    @abstractmethod
    def to_arrow(self) -> pc.Expression:
        """The term as an Arrow expression (bind first: division needs the operand types)."""

    def value_stats(self, stats: StatsLookup) -> ColumnStats | None:
        """What the columns' ``stats`` say of the term's values (bound), for pruning a filter
        on it (``lower(name) = 'x'``, ``id % 10 = 0``); None: nothing."""
        return None

    def __add__(self, other: Any) -> Term:
        return Arithmetic("+", self, term(other))

    def __radd__(self, other: Any) -> Term:
        return Arithmetic("+", term(other), self)

    def __sub__(self, other: Any) -> Term:
        return Arithmetic("-", self, term(other))

    def __rsub__(self, other: Any) -> Term:
        return Arithmetic("-", term(other), self)

    def __mul__(self, other: Any) -> Term:
        return Arithmetic("*", self, term(other))

    def __rmul__(self, other: Any) -> Term:
        return Arithmetic("*", term(other), self)

    def __truediv__(self, other: Any) -> Term:
        return Arithmetic("/", self, term(other))

    def __mod__(self, other: Any) -> Term:
        return Arithmetic("%", self, term(other))

    def __rtruediv__(self, other: Any) -> Term:
        return Arithmetic("/", term(other), self)

    def __neg__(self) -> Term:
        return Arithmetic("-", Literal(0), self)


@dataclass(frozen=True)
class Literal(Term):
    """A constant; ``None`` is SQL's NULL (setting a column to null)."""

    value: Value | None
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.value is not None:
            object.__setattr__(self, "value", literal(self.value))

    def __str__(self) -> str:
        return "NULL" if self.value is None else render_literal(self.value)

    def columns(self) -> frozenset[str]:
        return frozenset()

    def bind(self, schema: pa.Schema) -> Term:
        try:
            scalar = _scalar(self.value)
        except (pa.ArrowException, OverflowError) as error:
            raise filter_error(f"literal {self} has no Arrow type ({error})") from None
        return dataclasses.replace(self, arrow_type=scalar.type)

    def to_arrow(self) -> pc.Expression:
        return pc.scalar(_scalar(self.value) if self.arrow_type is None else pa.scalar(self.value, self.arrow_type))


def _scalar(value: Value | None) -> pa.Scalar:
    """The literal as Arrow infers it, except an integer beyond int64 (which Arrow refuses):
    it takes the first exact type that holds it, uint64 or decimal128(38, 0), so that
    ``set={"u": 2**64 - 1}`` stores into a uint64 column (the checked cast into the column
    decides the rest)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        if 0 <= value < 2**64:
            return pa.scalar(value, pa.uint64())
        return pa.scalar(Decimal(value), pa.decimal128(38, 0))
    return pa.scalar(value)


@dataclass(frozen=True)
class Constant(Term):
    """A value already converted to its column's type (``update(values=...)``): stored as
    given, NaN, infinities and bytes included, which filter literals do not take."""

    scalar: pa.Scalar
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        value = self.scalar.as_py()
        if value is None:
            return "NULL"
        try:
            return render_literal(literal(value))
        except InvalidFilterError:  # no filter text for it (NaN, bytes, a list): as Python writes it
            return repr(value)

    def columns(self) -> frozenset[str]:
        return frozenset()

    def bind(self, schema: pa.Schema) -> Term:
        return dataclasses.replace(self, arrow_type=self.scalar.type)

    def to_arrow(self) -> pc.Expression:
        return pc.scalar(self.scalar)


@dataclass(frozen=True)
class Ref(Term):
    """The value of column ``name`` in the same row (``col(name)`` builds one too)."""

    name: str
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return quote_name(self.name)

    def columns(self) -> frozenset[str]:
        return frozenset({self.name})

    def bind(self, schema: pa.Schema) -> Term:
        index = schema.get_field_index(self.name)
        if index < 0:
            raise unknown_column(self.name, schema.names)
        return dataclasses.replace(self, arrow_type=schema.field(index).type)

    def to_arrow(self) -> pc.Expression:
        return pc.field(self.name)

    def value_stats(self, stats: StatsLookup) -> ColumnStats | None:
        return stats(self.name)


@dataclass(frozen=True)
class Arithmetic(Term):
    """``left op right`` with op one of ``+ - * /``."""

    op: str
    left: Term
    right: Term
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.op not in _KERNELS:
            raise filter_error(f"unknown arithmetic operator {self.op!r}; use + - * / %")
        if not isinstance(self.left, Term) or not isinstance(self.right, Term):
            raise filter_error(f"{self.op} needs two value expressions")

    def __str__(self) -> str:
        left, right = str(self.left), str(self.right)
        mine = PRECEDENCE[self.op]
        if isinstance(self.left, Arithmetic) and PRECEDENCE[self.left.op] < mine:
            left = f"({left})"
        if isinstance(self.right, Arithmetic) and (
            PRECEDENCE[self.right.op] < mine or (PRECEDENCE[self.right.op] == mine and self.op in "-/")
        ):
            right = f"({right})"
        return f"{left} {self.op} {right}"

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def bind(self, schema: pa.Schema) -> Term:
        left, right = self.left.bind(schema), self.right.bind(schema)
        if self.op == "%" and _integral(left.arrow_type) and isinstance(right, Literal) and type(right.value) is int:
            right = _divisor(right.value, left.arrow_type)
        for side in (left, right):
            if not _numeric(side.arrow_type):
                raise filter_error(
                    f"cannot apply {self.op} to {side} of type {side.arrow_type}: "
                    "arithmetic takes integer, floating-point and decimal values"
                )
        bound = dataclasses.replace(self, left=left, right=right)
        empty = [pa.array([], t) for t in bound._operand_types()]
        try:
            result = pc.call_function(_KERNELS[self.op], empty)
        except pa.ArrowNotImplementedError:
            raise filter_error(
                f"cannot apply {self.op} to {left} of type {left.arrow_type} and {right} of type {right.arrow_type}"
            ) from None
        return dataclasses.replace(bound, arrow_type=result.type)

    def to_arrow(self) -> pc.Expression:
        types = self._operand_types()
        if not any(pa.types.is_decimal(t) for t in types):
            # Both sides as the result type bind() found for arrays: inside an expression
            # Arrow would narrow a literal (int8 * 1000 computed as int16 overflows).
            types = (self.arrow_type, self.arrow_type)
        pairs = zip((self.left, self.right), types)
        operands = [side.to_arrow() if side.arrow_type == t else side.to_arrow().cast(t) for side, t in pairs]
        result = pc.Expression._call(_KERNELS[self.op], operands)
        if self.op == "%" and not pa.types.is_unsigned_integer(types[0]):  # Arrow's takes the divisor's sign
            dividend, divisor = operands
            wrong_sign = (result != 0) & ((result < 0) != (dividend < 0))
            result = pc.if_else(wrong_sign, pc.Expression._call("subtract_checked", [result, divisor]), result)
        return result

    def value_stats(self, stats: StatsLookup) -> ColumnStats | None:
        """``column % k`` (an integer literal ``k``): the remainders of the values between the
        column's bounds, a range of length below ``|k|`` on the dividend's side of zero."""
        known = self.left.value_stats(stats)
        k = self.right.value if isinstance(self.right, Literal) else None
        if self.op != "%" or known is None or type(k) is not int or not k or not _integral(self.left.arrow_type):
            return None
        low, high = known.min, known.max
        if low is None or high is None:
            return ColumnStats(None, None, known.null_count, known.row_count)
        k = abs(k)
        if 0 <= low and high // k == low // k or high <= 0 and -low // k == -high // k:
            return ColumnStats(_rem(low, k), _rem(high, k), known.null_count, known.row_count)
        return ColumnStats(-(k - 1) if low < 0 else 0, k - 1 if high > 0 else 0, known.null_count, known.row_count)

    def _operand_types(self) -> tuple[pa.DataType, pa.DataType]:
        """The types the kernel gets. Integer / integer divides as doubles (Spark, DuckDB),
        not with truncation; an integer meets a decimal as decimal(19, 0), which holds every
        int64 (Arrow's own implicit cast picks a precision too small for the product)."""
        left, right = self.left.arrow_type, self.right.arrow_type
        integral = [t is not None and (pa.types.is_integer(t) or pa.types.is_null(t)) for t in (left, right)]
        if self.op == "/" and all(integral):
            return pa.float64(), pa.float64()
        if pa.types.is_decimal(left) and integral[1]:
            return left, pa.decimal128(19, 0)
        if pa.types.is_decimal(right) and integral[0]:
            return pa.decimal128(19, 0), right
        return left, right


@dataclass(frozen=True)
class Function(Term):
    """``lower(arg)`` or ``upper(arg)`` of a string (``FUNCTIONS``)."""

    name: str
    arg: Term
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.name not in FUNCTIONS:
            raise filter_error(f"unknown function {self.name!r}; known: {', '.join(FUNCTIONS)}")
        if not isinstance(self.arg, Term):
            raise filter_error(f"{self.name}() needs a value expression")

    def __str__(self) -> str:
        return f"{self.name}({self.arg})"

    def columns(self) -> frozenset[str]:
        return self.arg.columns()

    def bind(self, schema: pa.Schema) -> Term:
        arg = self.arg.bind(schema)
        if not (pa.types.is_string(arg.arrow_type) or pa.types.is_large_string(arg.arrow_type)):
            raise filter_error(f"{self.name}() takes a string, not {arg} of type {arg.arrow_type}")
        return dataclasses.replace(self, arg=arg, arrow_type=arg.arrow_type)

    def to_arrow(self) -> pc.Expression:
        return pc.Expression._call(FUNCTIONS[self.name], [self.arg.to_arrow()])

    def value_stats(self, stats: StatsLookup) -> ColumnStats | None:
        """Only whether values are null: case mapping does not keep the order of strings."""
        known = self.arg.value_stats(stats)
        return None if known is None else ColumnStats(None, None, known.null_count, known.row_count)


@dataclass(frozen=True)
class Condition(Term):
    """A boolean filter (an ``Expr``) as a value: ``set={"late": col("ts") > cutoff}``.
    True, false, or null where SQL says unknown."""

    expr: Any  # an Expr (nodes.py builds on this module)
    arrow_type: pa.DataType | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return str(self.expr)

    def columns(self) -> frozenset[str]:
        return self.expr.columns()

    def bind(self, schema: pa.Schema) -> Term:
        return dataclasses.replace(self, expr=self.expr.bind(schema), arrow_type=pa.bool_())

    def to_arrow(self) -> pc.Expression:
        return self.expr.to_arrow()


def _divisor(k: int, dividend: pa.DataType) -> Term:
    """An integer divisor of ``%`` in the dividend's type when it holds ``|k|`` (the sign of
    the divisor does not change a truncated remainder, ``x % -3 = x % 3``), so that
    ``uint64_column % 10`` is computed in uint64, not in int64 (Arrow's common type, which
    refuses values past 2**63)."""
    for kind in dict.fromkeys((dividend, pa.int64())):
        try:
            return Literal(abs(k), pa.scalar(abs(k), kind).type)
        except (pa.ArrowInvalid, OverflowError):
            continue
    raise filter_error(f"the divisor {k} of % is beyond the range of {dividend}")


def _integral(arrow_type: pa.DataType | None) -> bool:
    return arrow_type is not None and pa.types.is_integer(arrow_type)


def _rem(value: int, k: int) -> int:
    """SQL's ``value % k``: the sign of ``value``."""
    return value % k if value >= 0 else -(-value % k)


def _numeric(arrow_type: pa.DataType | None) -> bool:
    t = pa.types
    return arrow_type is not None and (
        t.is_integer(arrow_type) or t.is_floating(arrow_type) or t.is_decimal(arrow_type) or t.is_null(arrow_type)
    )


def term(value: Any) -> Term:
    """A Python value as a term: a term stays, ``col(name)`` is the column's value, anything
    else becomes a ``Literal``."""
    from .builder import Column  # the builder builds on this module

    if isinstance(value, Column):
        return Ref(value.name)
    return value if isinstance(value, Term) else Literal(value)


def lit(value: Value | None) -> Literal:
    """A literal value to assign, e.g. ``lit("DE")`` (a plain string would be parsed as a term)."""
    return Literal(value)

"""Arrow translation: each leaf as a `pyarrow.compute.Expression` with SQL's semantics, and
`evaluate`, which runs one over a table or batch.

Arrow's kernels differ from SQL in ways this module makes up for, once the expression is
bound (the leaf then knows its column's Arrow type):

- NaN: Arrow compares by IEEE 754 (NaN > 5 is false), SQL engines sort NaN above every
  number (NaN > 5 is true), so `>` and `>=` on a float column also accept NaN.
- -0.0: `is_in` hashes -0.0 apart from 0.0, which compare equal; a listed zero is matched
  with `=` instead.
- Literals the column type cannot hold (an integer beyond int64, 2**63 against uint64 with
  its int64 inference, a decimal with more digits than the column's scale, a double between
  two float32 values): Arrow would overflow or cast the wrong side, so the comparison is
  rewritten against the nearest values the type can hold (`x < 2.5` on an integer column
  is `x <= 2`; `x = 2**70` on int64 is false for every non-null x).
- A double literal against an integer column compares the column as doubles (SQL's rule).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..lazy import lazy
from .like import ANY, parse_like
from .literals import OPERATORS, Value, to_float32

if TYPE_CHECKING:
    import pyarrow.acero as acero
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")
    acero = lazy("pyarrow.acero")


def _boolean(value: bool | None) -> pa.Scalar:
    """TRUE, FALSE or a null boolean (made when used: pyarrow's first conversion of a Python
    value imports pandas, which a module import must not)."""
    return pa.scalar(value, pa.bool_())


_INT64 = (-(2**63), 2**63 - 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)


def comparison(field: pc.Expression, op: str, value: Value, arrow_type: pa.DataType | None) -> pc.Expression:
    """`field op value` (`field`: a column, or a value computed from one); `arrow_type` is its
    type once bound (None: Arrow decides)."""
    if arrow_type is None:  # unbound: Arrow's own casts
        return OPERATORS[op](field, value)
    if isinstance(value, float) and not pa.types.is_floating(arrow_type):
        field, arrow_type = _as_double(field, arrow_type), pa.float64()  # an integer or decimal column vs a double
    low, high, exact = _neighbours(value, arrow_type)
    if exact:
        result = OPERATORS[op](field, low)
    elif op in ("=", "!="):
        result = _for_every_value(field, op == "!=")
    elif op in ("<", "<="):
        result = field <= low if low is not None else _for_every_value(field, False)
    else:
        result = field >= high if high is not None else _for_every_value(field, False)
    if pa.types.is_floating(arrow_type) and op in (">", ">="):
        result = result | pc.is_nan(field)
    return result


def _as_double(field: pc.Expression, arrow_type: pa.DataType) -> pc.Expression:
    """The column's values as the nearest doubles, as SQL compares them with a double. A
    decimal goes through its text, which Arrow parses correctly rounded; its decimal-to-double
    cast is not (decimal(5, 1) -0.3 became -0.30000000000000004, which ``-0.3e0`` missed)."""
    if pa.types.is_decimal(arrow_type):
        return field.cast(pa.string()).cast(pa.float64())
    return field.cast(pa.float64(), safe=False)


def is_in(
    field: pc.Expression, values: tuple[Value, ...], negated: bool, arrow_type: pa.DataType | None
) -> pc.Expression:
    """`field [NOT] IN values`, unknown (not false) for a null value, as in SQL."""
    if arrow_type is not None and not pa.types.is_floating(arrow_type) and any(isinstance(v, float) for v in values):
        field, arrow_type = _as_double(field, arrow_type), pa.float64()  # an integer or decimal column vs doubles
    if arrow_type is None:
        members: list[object] = list(values)
    else:  # a value the type cannot hold equals no value of the column
        members = [low for low, _, exact in (_neighbours(v, arrow_type) for v in values) if exact]
    if members:
        value_set = pa.array(members) if arrow_type is not None else members
        # Arrow's is_in says false for a null input; SQL says unknown, which NOT must keep.
        found = pc.if_else(field.is_valid(), field.isin(value_set), _boolean(None))
        if arrow_type is not None and pa.types.is_floating(arrow_type) and 0.0 in values:
            found = found | (field == pa.scalar(0.0, arrow_type))  # -0.0 IN (0.0)
    else:
        found = _for_every_value(field, False)
    return ~found if negated else found


def is_null(field: pc.Expression, negated: bool) -> pc.Expression:
    return field.is_valid() if negated else field.is_null()


def like(field: pc.Expression, pattern: str, negated: bool, case_insensitive: bool = False) -> pc.Expression:
    """LIKE with the kernels that keep its meaning: equality, starts_with, ends_with and
    substring for the common shapes, an anchored RE2 regex for the rest. ILIKE
    (``case_insensitive``) is LIKE of the lower-cased value and pattern, as PostgreSQL, DuckDB
    and Spark define it (``lower``: Unicode's simple case mapping, expressions/terms.py)."""
    if case_insensitive:
        field, pattern = pc.utf8_lower(field), pc.utf8_lower(pa.scalar(pattern)).as_py()
    parsed = parse_like(pattern)
    pieces = parsed.pieces
    if parsed.literal is not None:
        matched = field == parsed.literal
    elif parsed.prefix_only:
        matched = pc.starts_with(field, pattern=parsed.prefix)
    elif len(pieces) == 2 and pieces[0] == (True, ANY) and not pieces[1][0]:
        matched = pc.ends_with(field, pattern=pieces[1][1])
    elif len(pieces) == 3 and pieces[0] == pieces[2] == (True, ANY) and not pieces[1][0]:
        matched = pc.match_substring(field, pattern=pieces[1][1])
    else:
        matched = pc.match_substring_regex(field, pattern=parsed.regex())
    return ~matched if negated else matched


_GROUP = 64
"""Operands Arrow may see as one chain. Arrow canonicalises an AND/OR tree into one chain
(associative calls are refolded) and recurses along it: 10,000 ORs crashed the process with a
stack overflow at about 9,000 (measured on pyarrow 26). Groups are joined through an identity
`if_else(g, true, false)` (null stays null), which Arrow does not refold."""


def all_of(conditions: list[pc.Expression]) -> pc.Expression:
    """AND of all `conditions` (Kleene)."""
    return _grouped(conditions, lambda a, b: a & b)


def any_of(conditions: list[pc.Expression]) -> pc.Expression:
    """OR of all `conditions` (Kleene)."""
    return _grouped(conditions, lambda a, b: a | b)


def evaluate(condition: pc.Expression, table: pa.Table) -> pa.ChunkedArray:
    """The boolean mask of `condition` over `table`, in row order."""
    return project(table, {"mask": condition}).column(0)


def project(table: pa.Table, columns: dict[str, pc.Expression]) -> pa.Table:
    """A table of `columns` (name -> expression over `table`'s columns), in row order."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions(list(columns.values()), list(columns))),
        ]
    )
    return plan.to_table(use_threads=False)  # one thread keeps row order


def matching_rows(table: pa.Table, where: pc.Expression) -> np.ndarray:
    """The indexes of the rows of ``table`` where ``where`` is true (not false, not null),
    ascending: its mask, evaluated on the calling thread. ``Table.filter`` on an index column
    hands its plan to a thread pool: with pyarrow 26 no faster even over 10M rows (21 ms
    against 15-19 ms), and a lookup of a key spread over two files' row groups, each file read
    on a thread of its own, took 0.81-0.88x the time once their filters no longer contended
    for that pool (design note 008, part seven)."""
    mask = evaluate(where, table).combine_chunks()
    if mask.true_count * _SPARSE > len(mask):
        return pc.indices_nonzero(mask).to_numpy().astype(np.int64)  # (null: not a match)
    if mask.null_count:  # (a null's value bit may be set; fill_null took 0.4 ms for 32k rows)
        mask = pc.and_kleene(mask, mask.is_valid())
    return _sparse_true(mask)


_SPARSE = 64
"""A mask with at most one row in this many true is read by its words (``_sparse_true``)."""


def _sparse_true(mask: pa.BooleanArray) -> np.ndarray:
    """The true positions of a mask without nulls, few of them: the nonzero 64-bit words of
    its bitmap, then their bits. ``indices_nonzero`` visits every bit: 3.1 ms for a 5M-row
    mask of one match (a lookup by a key the file is not clustered by), this about 0.3 ms."""
    if not mask.true_count:
        return np.empty(0, dtype=np.int64)
    rows, offset = len(mask), mask.offset
    used = (offset + rows + 7) // 8
    words = np.zeros((used + 7) // 8, dtype=np.uint64)
    words.view(np.uint8)[:used] = np.frombuffer(mask.buffers()[1], dtype=np.uint8, count=used)
    hit = np.flatnonzero(words)
    word, bit = np.nonzero(np.unpackbits(words[hit].view(np.uint8), bitorder="little").reshape(-1, 64))
    positions = hit[word].astype(np.int64) * 64 + bit - offset
    return positions[(positions >= 0) & (positions < rows)]  # (bits outside the slice are not its)


def _grouped(
    items: list[pc.Expression], combine: Callable[[pc.Expression, pc.Expression], pc.Expression]
) -> pc.Expression:
    while True:
        groups = [functools.reduce(combine, items[i : i + _GROUP]) for i in range(0, len(items), _GROUP)]
        if len(groups) == 1:
            return groups[0]
        items = [pc.if_else(group, _boolean(True), _boolean(False)) for group in groups]


def _for_every_value(field: pc.Expression, answer: bool) -> pc.Expression:
    """`answer` for every non-null value, unknown for null (a comparison decided by types)."""
    return pc.if_else(field.is_valid(), _boolean(answer), _boolean(None))


def _neighbours(value: Value, arrow_type: pa.DataType) -> tuple[pa.Scalar | None, pa.Scalar | None, bool]:
    """The values of `arrow_type` nearest `value` from below and from above (None beyond the
    type's range), and whether `value` is itself one of them (then both are it)."""
    types = pa.types
    if types.is_integer(arrow_type) or types.is_timestamp(arrow_type):
        floor, ceiling = _physical(value, arrow_type)
        if types.is_integer(arrow_type):
            info = np.iinfo(arrow_type.to_pandas_dtype())
            least, most = int(info.min), int(info.max)
        else:
            least, most = _INT64
        low = min(floor, most) if floor >= least else None
        high = max(ceiling, least) if ceiling <= most else None
        exact = floor == ceiling and least <= floor <= most
        return _scalar(low, arrow_type), _scalar(high, arrow_type), exact
    if types.is_decimal(arrow_type):
        return _decimal_neighbours(Decimal(value), arrow_type)  # type: ignore[arg-type]
    if types.is_float32(arrow_type):
        return _float32_neighbours(float(value))  # type: ignore[arg-type]
    scalar = pa.scalar(value, arrow_type)
    return scalar, scalar, True


def _physical(value: Value, arrow_type: pa.DataType) -> tuple[int, int]:
    """Floor and ceiling of `value` in the type's integers (a timestamp's units since 1970)."""
    if pa.types.is_integer(arrow_type):  # bound: an int, or an exact Decimal with a fraction
        return math.floor(value), math.ceil(value)  # type: ignore[arg-type]
    assert isinstance(value, dt.datetime)
    epoch = _EPOCH.replace(tzinfo=dt.UTC) if value.tzinfo is not None else _EPOCH
    micros = (value - epoch) // dt.timedelta(microseconds=1)
    per_second = _PER_SECOND[arrow_type.unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000), micros * (per_second // 1_000_000)
    step = 1_000_000 // per_second
    return micros // step, -(-micros // step)


def _decimal_neighbours(value: Decimal, arrow_type: pa.DataType) -> tuple[pa.Scalar | None, pa.Scalar | None, bool]:
    exact = decimal.Context(prec=2 * arrow_type.precision + 2, rounding=decimal.ROUND_FLOOR)
    quantum = Decimal(1).scaleb(-arrow_type.scale)
    most = exact.subtract(Decimal(1).scaleb(arrow_type.precision - arrow_type.scale), quantum)
    least = exact.minus(most)  # not -most: that rounds to the thread's context (28 digits)
    if value > most:
        return pa.scalar(most, arrow_type), None, False
    if value < least:
        return None, pa.scalar(least, arrow_type), False
    floor = value.quantize(quantum, context=exact)
    ceiling = floor if floor == value else exact.add(floor, quantum)
    return pa.scalar(floor, arrow_type), pa.scalar(ceiling, arrow_type), floor == value


def _float32_neighbours(value: float) -> tuple[pa.Scalar | None, pa.Scalar | None, bool]:
    try:
        nearest = to_float32(value)
    except OverflowError:  # beyond float32's largest finite value: only infinity lies past it
        nearest = float("inf") if value > 0 else float("-inf")
    below = nearest if nearest <= value else float(np.nextafter(np.float32(nearest), np.float32(-np.inf)))
    above = nearest if nearest >= value else float(np.nextafter(np.float32(nearest), np.float32(np.inf)))
    return pa.scalar(below, pa.float32()), pa.scalar(above, pa.float32()), nearest == value


def _scalar(physical: int | None, arrow_type: pa.DataType) -> pa.Scalar | None:
    return None if physical is None else pa.scalar(physical, arrow_type)

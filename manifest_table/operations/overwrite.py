"""Overwrite: replace every row, or the rows matching a condition, in one commit.

1. Without a condition, every file of the snapshot is removed whole and the files staged
   before are dropped (``Staging.remove_all``); with one, the matching rows are deleted as
   ``delete.py`` deletes them, the condition bound to the schema first so that conflict checks
   compare its literals as the columns' types.
2. The commit is serializable against the condition: a concurrent commit adding rows it may
   match, or deleting rows it read, makes it fail (commit/conflicts.py).
3. The new rows are appended (``append.py``).
4. With a condition, every new row must satisfy it (``check_within``), unless the caller
   passed ``require_match=False``: a new row outside the condition would sit beside the rows
   it was meant to replace (ids 1, 2, 2 after overwriting ids 1 and 2), which a later
   overwrite of the same condition would not remove either. deltalake refuses such a write too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap

from ..arguments import check_bool
from ..data.scan import Scan, Snapshot
from ..errors import InvalidArgumentError
from ..expressions import Expr, Not, to_expr
from ..expressions.literals import render_literal
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..lazy import lazy
from ..storage import FileIO
from ..wording import count
from .append import append
from .delete import delete
from .staging import Staging

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")


def overwrite(
    staging: Staging,
    data: Any,
    where: str | Expr | None = None,
    schema_mode: str | None = None,
    require_match: bool = True,
) -> None:
    """Stage replacing every row (or the rows matching ``where``) with ``data``."""
    check_bool("require_match", require_match)
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
    before = len(staging.changes.added)
    append(staging, data, schema_mode)
    if expr is not None and require_match:
        check_within(staging.handle.io, staging.fields(), staging.changes.added[before:], expr)


def check_within(
    io: FileIO,
    fields: FieldIds,
    files: Sequence[DataFile],
    where: Expr,
    remedy: str = "pass require_match=False to write them anyway",
) -> None:
    """Every row of the new ``files`` satisfies the bound ``where`` (true: not false, not
    unknown, by the evaluator scans use), else ``InvalidArgumentError`` naming how many rows
    do not and one of them. A file whose statistics prove it (no row can make the negation
    true, and no column the condition reads holds a null) is not read; the others are read,
    the condition's columns only. ``remedy``: how the caller's interface turns the check off."""
    doubtful = [f for f in files if not _proven(f, where)]
    if not doubtful:
        return
    columns = sorted(where.columns())
    snapshot = Snapshot(-1, fields.schema, doubtful, lambda _: BitMap(), fields=fields)
    outside, example = 0, None
    for batch in Scan(snapshot, io, columns).to_batches():
        failing = pc.invert(pc.fill_null(where.evaluate(batch), False))
        found = pc.sum(failing).as_py() or 0
        if found and example is None:
            row = batch.filter(failing).slice(0, 1)
            example = ", ".join(f"{name} = {_shown(row.column(name))}" for name in row.column_names)
        outside += found
    if outside:
        total = sum(f.rows for f in files)
        raise InvalidArgumentError(
            f"{outside} of the {count(total, 'new row')} {'does' if outside == 1 else 'do'} not satisfy "
            f"the overwrite's condition {where} "
            f"(e.g. the row with {example}): an overwrite replaces only the rows matching its "
            f"condition, so these would be kept beside them; nothing was written (filter the rows "
            f"first, or {remedy})"
        )


def _proven(file: DataFile, where: Expr) -> bool:
    stats = file.stats
    no_nulls = all(stats.get(c) is not None and stats[c].null_count == 0 for c in where.columns())
    return no_nulls and not Not(where).may_match(stats.get)


def _shown(column: pa.Array) -> str:
    """A 1-value column's value as a literal; in Arrow's text where Python cannot hold it (a
    zoned time of the year 1 whose local time falls in the year 0)."""
    try:
        value = column[0].as_py()
    except (OverflowError, ValueError):
        return str(column.cast("string")[0])
    try:
        return "NULL" if value is None else render_literal(value)
    except (TypeError, ValueError):
        return repr(value)

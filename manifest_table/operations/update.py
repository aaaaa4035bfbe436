"""Update as merge-on-read: new versions of the matching rows, no data rewritten.

1. Bind the assignments (column -> term, expressions/terms.py; ``values`` are literals) and
   the condition to the table's schema: an unknown column or a wrong type fails before
   anything is read.
2. Scan the transaction's snapshot for the live matching rows with their positions (pruned
   by file and row-group stats like any filtered scan).
3. Compute each row's new values with Arrow and store them into the columns' types by a
   safe cast, streaming into one append (new files hold only the changed rows), in the
   order the rows were read: file by file, ascending positions.
4. Stage deleting the old positions, and which new row replaces which (``parameters.replaced``:
   the change feed's update pairs). The commit is serializable against the condition, as
   ``overwrite(where=...)`` is: a concurrent commit that adds rows the condition may match,
   or deletes rows this one read, makes it fail (commit/conflicts.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from ..arguments import did_you_mean
from ..data.ingest import column_of
from ..data.scan import POSITION_COLUMN
from ..errors import InvalidArgumentError, InvalidFilterError, SchemaMismatchError
from ..expressions import Column, Expr, Term, parse_term, to_expr, to_term
from ..expressions.arrow import project
from ..expressions.terms import Constant
from ..format.column_types import assignable, cast_safely
from ..lazy import lazy
from .append import append
from .staging import Staging

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")


def bind_assignments(assignments: Any, schema: pa.Schema, values: Any = None) -> dict[str, Term]:
    """``set=`` and ``values=`` as bound terms, one per column: ``set`` maps a column to a term,
    filter or expression text, ``values`` to a plain value (never parsed). A string in ``set``
    that is no expression over the table's columns (``"shipped"``) is an error that points at
    ``values=``, never a guess at which was meant."""
    for name, given in (("set", assignments), ("values", values)):
        if given is not None and not isinstance(given, Mapping):
            raise InvalidArgumentError(f"{name} must be a dict of column name -> new value, not {given!r}")
    expressions, plain = dict(assignments or {}), dict(values or {})
    if not expressions and not plain:
        raise InvalidArgumentError(
            "update needs set= (expressions) or values= (plain values) naming at least one column"
        )
    both = sorted(expressions.keys() & plain.keys(), key=str)
    if both:
        raise InvalidArgumentError(f"columns {both} are in both set and values; assign each column once")
    unknown = [name for name in [*expressions, *plain] if name not in schema.names]
    if unknown:
        raise InvalidArgumentError(
            f"update names unknown columns {unknown}{did_you_mean(unknown, schema.names)}; the table has {schema.names}"
        )
    terms = {name: _expression(name, value, schema) for name, value in expressions.items()}
    for name, value in plain.items():
        if isinstance(value, Term | Expr | Column):
            raise InvalidArgumentError(f"values[{name!r}] is an expression ({value}); pass it in set=")
        terms[name] = _plain_value(schema.field(name), value)
    return terms


def _plain_value(field: pa.Field, value: Any) -> Term:
    """``value`` converted as ``append`` converts a row's value for ``field`` (ingest.py):
    stored as given when the column holds it, NaN, infinities and bytes included."""
    try:
        array = column_of(field, [value])
    except SchemaMismatchError as exc:
        raise InvalidArgumentError(f"update cannot store values[{field.name!r}] = {value!r}: {exc}") from None
    return Constant(array[0]).bind(pa.schema([field]))


def _expression(name: str, value: Any, schema: pa.Schema) -> Term:
    if not isinstance(value, str):
        return to_term(value).bind(schema)
    try:
        return parse_term(value).bind(schema)
    except InvalidFilterError as exc:
        raise InvalidFilterError(
            f"set[{name!r}] = {value!r} is not an expression over the table's columns "
            f"({exc}); to store the text itself, pass values={{{name!r}: {value!r}}}"
        ) from None


def update(staging: Staging, assignments: Any, where: str | Expr | None, values: Any = None) -> int:
    """Stage steps 1-4; returns the number of rows updated."""
    schema = staging.scan().schema
    terms = bind_assignments(assignments, schema, values)
    expr = to_expr(where)
    expr = expr.bind(schema) if expr is not None else None
    positions: dict[str, BitMap] = {}

    def new_rows() -> Iterator[pa.RecordBatch]:
        for file, rows in staging.scan(where=expr).matching_rows():
            positions[file.path] = BitMap(rows.column(POSITION_COLUMN).to_numpy().astype(np.uint32))
            yield from assigned(rows.drop_columns([POSITION_COLUMN]), terms, schema).to_batches()

    staged = len(staging.changes.added)
    append(staging, pa.RecordBatchReader.from_batches(schema, new_rows()), in_order=True)
    staging.stage_replacement(list(positions.items()), staging.changes.added[staged:])
    updated = staging.stage_deletes(positions.items())
    staging.serialize_against(expr)
    staging.record(
        "update",
        (
            "updates",
            {"set": {name: str(term) for name, term in terms.items()}, "where": None if expr is None else str(expr)},
        ),
        rows_updated=updated,
    )
    return updated


def assigned(rows: pa.Table, terms: dict[str, Term], schema: pa.Schema) -> pa.Table:
    """``rows`` with the assigned columns computed from the old values (all at once, as SQL
    does: ``set={"a": "b", "b": "a"}`` swaps) and cast safely into the columns' types."""
    try:
        computed = project(
            rows, {name: terms[name].to_arrow() if name in terms else pc.field(name) for name in schema.names}
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        shown = ", ".join(f"{name} = {term}" for name, term in terms.items())
        raise InvalidArgumentError(f"update cannot compute {shown}: {exc}") from None
    columns = []
    for field in schema:
        column = computed.column(field.name)
        if column.type != field.type:
            column = cast_safely(
                column,
                field.type,
                assignable,
                InvalidArgumentError,
                f"update cannot store {terms[field.name]} (of type {column.type}) in column "
                f"{field.name!r} of type {field.type}",
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)

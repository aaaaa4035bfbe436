"""Update as merge-on-read: new versions of the matching rows, no data rewritten.

1. Bind the assignments (column -> term, expressions/terms.py) and the condition to the
   table's schema: an unknown column or a wrong type fails before anything is read.
2. Scan the transaction's snapshot for the live matching rows with their positions (pruned
   by file and row-group stats like any filtered scan).
3. Compute each row's new values with Arrow and store them into the columns' types by a
   safe cast, streaming into one append (new files hold only the changed rows).
4. Stage deleting the old positions. The commit is serializable against the condition, as
   ``overwrite(where=...)`` is: a concurrent commit that adds rows the condition may match,
   or deletes rows this one read, makes it fail (commit/conflicts.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from ..data.scan import POSITION_COLUMN
from ..errors import InvalidArgumentError
from ..expressions import Expr, Term, to_expr, to_term
from ..expressions.arrow import project
from ..format.column_types import assignable, cast_safely
from .append import append
from .staging import Staging


def bind_assignments(assignments: Any, schema: pa.Schema) -> dict[str, Term]:
    """``set=`` as bound terms: a non-empty dict of column name -> value, term, filter or text."""
    if not isinstance(assignments, Mapping) or not assignments:
        raise InvalidArgumentError(f"set must be a non-empty dict of column name -> new value, not {assignments!r}")
    unknown = [name for name in assignments if name not in schema.names]
    if unknown:
        raise InvalidArgumentError(f"set names unknown columns {unknown}; the table has {schema.names}")
    return {name: to_term(value).bind(schema) for name, value in assignments.items()}


def update(staging: Staging, assignments: Any, where: str | Expr | None) -> int:
    """Stage steps 1-4; returns the number of rows updated."""
    schema = staging.scan().schema
    terms = bind_assignments(assignments, schema)
    expr = to_expr(where)
    expr = expr.bind(schema) if expr is not None else None
    positions: dict[str, BitMap] = {}

    def new_rows() -> Iterator[pa.RecordBatch]:
        for file, rows in staging.scan(where=expr).matching_rows():
            positions[file.path] = BitMap(rows.column(POSITION_COLUMN).to_numpy().astype(np.uint32))
            yield from assigned(rows.drop_columns([POSITION_COLUMN]), terms, schema).to_batches()

    append(staging, pa.RecordBatchReader.from_batches(schema, new_rows()))
    updated = staging.stage_deletes(positions.items())
    staging.serialize_against(expr)
    staging.record("update", ("updates", {"set": {name: str(term) for name, term in terms.items()},
                                          "where": None if expr is None else str(expr)}), rows_updated=updated)
    return updated


def assigned(rows: pa.Table, terms: dict[str, Term], schema: pa.Schema) -> pa.Table:
    """``rows`` with the assigned columns computed from the old values (all at once, as SQL
    does: ``set={"a": "b", "b": "a"}`` swaps) and cast safely into the columns' types."""
    try:
        computed = project(rows, {name: terms[name].to_arrow() if name in terms else pc.field(name)
                                  for name in schema.names})
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        shown = ", ".join(f"{name} = {term}" for name, term in terms.items())
        raise InvalidArgumentError(f"update cannot compute {shown}: {exc}") from None
    columns = []
    for field in schema:
        column = computed.column(field.name)
        if column.type != field.type:
            column = cast_safely(column, field.type, assignable, InvalidArgumentError,
                                 f"update cannot store {terms[field.name]} (of type {column.type}) in column "
                                 f"{field.name!r} of type {field.type}")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)

"""Upsert (merge by key) as merge-on-read: the matched rows' positions deleted, the new rows
appended, in one commit whose cost follows the source, not the table.

1. Check the source: conformed to the table's schema, key columns of types with exact
   equality, no key twice (``DuplicateKeyError``, nothing staged). A key holding a null
   matches nothing, as SQL's ``=`` never holds for null: such a source row is inserted
   (``when_not_matched="insert"``), and a target row with a null key is never replaced.
2. A filter on the keys (``IN`` of the distinct values of each key column, or their range
   when there are many) prunes files by manifest stats and row groups by footer stats; only
   the key columns of the remaining files are read, with row positions (``PruneOnly``: the
   join, not the filter, decides which rows match).
3. An Arrow hash join of those keys with the source's gives the matched target positions,
   and for each matched target row the source row that replaces it (a key the target holds
   twice is replaced twice, as SQL's MERGE updates every matching row).
4. Stage deleting the matched positions and one append of the replacements and the
   unmatched source rows. The commit is serializable against the key filter, as
   ``overwrite(where=...)`` is: a concurrent commit adding rows that may hold one of the
   keys, or deleting a row this one replaces, makes it fail (commit/conflicts.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from ..arguments import check_choice, check_columns
from ..data.ingest import batches_of
from ..data.scan import POSITION_COLUMN
from ..errors import DuplicateKeyError, InvalidArgumentError
from ..expressions import And, Comparison, Expr, In
from ..expressions.nodes import PruneOnly
from .append import append
from .staging import Staging

WHEN_MATCHED = ("update", "ignore")
WHEN_NOT_MATCHED = ("insert", "ignore")
IN_LIMIT = 1024
"""Distinct values of a key column above which the key filter is their range instead of an
IN list: pruning checks an IN list value by value against every file's stats."""
_SOURCE_ROW = "__source_row"


class UpsertCounts(NamedTuple):
    rows_updated: int
    rows_inserted: int


def check_keys(on: Any, schema: pa.Schema) -> list[str]:
    """At least one distinct key column, each of a type whose equality is exact."""
    keys = check_columns(on, schema.names)
    if not keys:
        raise InvalidArgumentError("on must name at least one key column")
    for name in keys:
        t = schema.field(name).type
        if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
                or pa.types.is_decimal(t)):
            raise InvalidArgumentError(f"key column {name!r} has type {t}; keys must be integers, strings, "
                                       "booleans, dates, timestamps or decimals (floats: NaN and -0.0 make "
                                       "equality inexact)")
    return keys


def upsert(staging: Staging, data: Any, on: Sequence[str], when_matched: str,
           when_not_matched: str) -> UpsertCounts:
    """Stage steps 1-4."""
    check_choice("when_matched", when_matched, WHEN_MATCHED)
    check_choice("when_not_matched", when_not_matched, WHEN_NOT_MATCHED)
    schema = staging.scan().schema
    keys = check_keys(on, schema)
    source = pa.Table.from_batches(list(batches_of(data, schema)), schema)
    valid = _all_valid(source, keys)
    keyed = source.select(keys).filter(pa.array(valid))
    _check_unique(keyed, keys)
    where = key_filter(keyed, keys, schema)
    positions: dict[str, BitMap] = {}
    replacing: list[pa.ChunkedArray] = []
    if where is not None:
        probe = keyed.select(keys).append_column(_SOURCE_ROW, pa.array(np.flatnonzero(valid)))
        for file, rows in staging.scan(columns=keys, where=PruneOnly(where)).matching_rows():
            matched = rows.join(probe, keys=keys, join_type="inner")
            if matched.num_rows:
                positions[file.path] = BitMap(matched.column(POSITION_COLUMN).to_numpy().astype(np.uint32))
                replacing.append(matched.column(_SOURCE_ROW))
    matched_rows = np.concatenate([c.to_numpy() for c in replacing]) if replacing else np.zeros(0, np.int64)
    parts = []
    if when_matched == "update":
        parts.append(source.take(pa.array(matched_rows)))
    if when_not_matched == "insert":
        unmatched = np.ones(source.num_rows, dtype=bool)
        unmatched[matched_rows] = False
        parts.append(source.filter(pa.array(unmatched)))
    new_rows = pa.concat_tables(parts) if parts else schema.empty_table()
    append(staging, new_rows)
    return stage_replacements(staging, positions, where, keys, when_matched, when_not_matched, new_rows.num_rows)


def stage_replacements(staging: Staging, positions: dict[str, BitMap], where: Expr | None, keys: list[str],
                       when_matched: str, when_not_matched: str, rows_written: int) -> UpsertCounts:
    """Step 4 once the new rows are staged (here, or written by Spark): delete the matched
    positions, serialize against the key filter, record the counts."""
    updated = staging.stage_deletes(positions.items()) if when_matched == "update" else 0
    if where is not None:
        staging.serialize_against(where)
    counts = UpsertCounts(updated, rows_written - updated)
    staging.record("upsert", ("upserts", {"on": keys, "when_matched": when_matched,
                                          "when_not_matched": when_not_matched}), **counts._asdict())
    return counts


def key_filter(keyed: pa.Table, keys: list[str], schema: pa.Schema, in_limit: int = IN_LIMIT) -> Expr | None:
    """A filter (bound) that every target row matching a key of ``keyed`` satisfies: per key
    column, ``IN`` its distinct values or, past ``in_limit`` of them, their range. None: no key."""
    if not keyed.num_rows:
        return None
    parts: list[Expr] = []
    for name in keys:
        values = pc.unique(keyed.column(name))
        if len(values) <= in_limit:
            parts.append(In(name, values.to_pylist()))
        else:
            low, high = pc.min_max(values).values()
            parts.append(And(Comparison(name, ">=", low.as_py()), Comparison(name, "<=", high.as_py())))
    return (parts[0] if len(parts) == 1 else And(*parts)).bind(schema)


def _all_valid(source: pa.Table, keys: list[str]) -> np.ndarray:
    """Rows whose every key column is non-null: the only ones that can match."""
    valid = np.ones(source.num_rows, dtype=bool)
    for name in keys:
        valid &= source.column(name).is_valid().to_numpy(zero_copy_only=False)
    return valid


def _check_unique(keyed: pa.Table, keys: list[str]) -> None:
    counts = keyed.group_by(keys).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if repeated.num_rows:
        shown = repeated.select(keys).slice(0, 5).to_pylist()
        raise DuplicateKeyError(f"the source holds {repeated.num_rows} key(s) more than once, e.g. {shown}; "
                                f"each key of {keys} may appear once (nothing was written)")

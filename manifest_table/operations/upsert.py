"""Upsert (merge by key) as merge-on-read: the matched rows' positions deleted, the new rows
appended, in one commit whose cost follows the source, not the table.

1. Check the rules (``MergeRules``) and the source: conformed to the table's columns it holds
   (every column, unless ``columns`` names the ones a matched update sets: then the keys and
   those), key columns of types with exact equality, no key twice (``DuplicateKeyError``,
   nothing staged). A key holding a null matches nothing, as SQL's ``=`` never holds for
   null: such a source row is inserted (``when_not_matched="insert"``), and a target row with
   a null key is never matched (``when_not_matched_by_source="delete"`` deletes it).
2. A filter on the keys (``IN`` of the distinct values of each key column, or their range
   when there are many) prunes files by manifest stats and row groups by footer stats; only
   the key columns of the remaining files are read, with row positions (``PruneOnly``: the
   join, not the filter, decides which rows match). A partial update (``columns``) also reads
   the other columns, which the new versions keep; ``when_not_matched_by_source="delete"``
   reads the keys of every file, since any row may be missing from the source.
3. An Arrow hash join of those keys with the source's gives the matched target positions,
   and for each matched target row the source row that replaces it (a key the target holds
   twice is replaced twice, as SQL's MERGE updates every matching row); an anti join gives
   the target rows no source row matches.
4. Stage deleting the matched positions (``when_matched`` "update" or "delete") and those
   of target rows missing from the source (``when_not_matched_by_source="delete"``), and one
   append of the new versions and the unmatched source rows (null in the columns the source
   lacks), the new versions first, in the order of the rows they replace (file by file,
   ascending positions: ``parameters.replaced`` pairs them for the change feed). The
   commit is serializable against the key filter (every row, when rows missing
   from the source are deleted), as ``overwrite(where=...)`` is: a concurrent commit adding
   rows it may match, or deleting a row this one replaces, deletes or keeps because it
   matched, makes it fail (commit/conflicts.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from ..arguments import check_choice, check_columns
from ..data.ingest import arrow_input, batches_of, schema_of
from ..data.scan import POSITION_COLUMN
from ..errors import DuplicateKeyError, InvalidArgumentError, SchemaMismatchError
from ..expressions import And, Comparison, Expr, In
from ..expressions.nodes import PruneOnly
from ..lazy import lazy
from .append import append, apply_schema_mode
from .staging import Staging

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")

WHEN_MATCHED = ("update", "ignore", "delete")
WHEN_NOT_MATCHED = ("insert", "ignore")
WHEN_NOT_MATCHED_BY_SOURCE = ("ignore", "delete")
IN_LIMIT = 1024
"""Distinct values of a key column above which the key filter is their range instead of an
IN list: pruning checks an IN list value by value against every file's stats."""
_SOURCE_ROW = "__source_row"
_TARGET_ROW = "__target_row"


class UpsertCounts(NamedTuple):
    rows_updated: int
    rows_inserted: int


@dataclass(frozen=True)
class MergeRules:
    """What an upsert does with each kind of row, checked against the table's schema (step 1)."""

    keys: list[str]
    when_matched: str = "update"
    when_not_matched: str = "insert"
    when_not_matched_by_source: str = "ignore"
    columns: list[str] | None = None
    """The columns a matched update sets (None: every column)."""

    @classmethod
    def of(
        cls,
        schema: pa.Schema,
        on: Any,
        when_matched: str = "update",
        when_not_matched: str = "insert",
        when_not_matched_by_source: str = "ignore",
        columns: Any = None,
    ) -> MergeRules:
        check_choice("when_matched", when_matched, WHEN_MATCHED)
        check_choice("when_not_matched", when_not_matched, WHEN_NOT_MATCHED)
        check_choice("when_not_matched_by_source", when_not_matched_by_source, WHEN_NOT_MATCHED_BY_SOURCE)
        keys = check_keys(on, schema)
        chosen = check_columns(columns, schema.names)
        if chosen is not None and when_matched != "update":
            raise InvalidArgumentError(
                f"columns names what a matched update sets; it needs when_matched='update', not {when_matched!r}"
            )
        if chosen is not None and not [c for c in chosen if c not in keys]:
            raise InvalidArgumentError(f"columns must name at least one column besides the keys {keys}")
        return cls(keys, when_matched, when_not_matched, when_not_matched_by_source, chosen)

    @property
    def reads_every_file(self) -> bool:
        return self.when_not_matched_by_source == "delete"

    def source_schema(self, data: Any, schema: pa.Schema) -> pa.Schema:
        """The table's columns the source must hold: every one when its rows are written whole;
        else the ones it holds, which must include the keys and ``columns`` (a partial update),
        or just the keys when no source row is written (matches deleted or kept, the rest
        ignored), as deltalake's ``when_matched_delete`` needs only the keys."""
        if self.columns is None and (self.when_matched == "update" or self.when_not_matched == "insert"):
            return schema
        held = set(schema_of(data).names)
        missing = [n for n in dict.fromkeys([*self.keys, *(self.columns or [])]) if n not in held]
        if missing:
            needs = f"with columns={self.columns} it needs the keys {self.keys} and those columns"
            raise SchemaMismatchError(
                f"the source lacks columns {missing}: "
                + (needs if self.columns is not None else f"it needs the keys {self.keys}")
            )
        return pa.schema([f for f in schema if f.name in held])

    def parameters(self) -> dict[str, Any]:
        """The manifest's record; the newer options only when set, so a plain upsert records
        what earlier releases did."""
        recorded: dict[str, Any] = {
            "on": self.keys,
            "when_matched": self.when_matched,
            "when_not_matched": self.when_not_matched,
        }
        if self.reads_every_file:
            recorded["when_not_matched_by_source"] = self.when_not_matched_by_source
        if self.columns is not None:
            recorded["columns"] = self.columns
        return recorded


@dataclass
class Matches:
    """What the join found (step 3): positions per data file, and the target rows matched."""

    replaced: dict[str, BitMap] = field(default_factory=dict)
    removed: dict[str, BitMap] = field(default_factory=dict)
    kept: dict[str, BitMap] = field(default_factory=dict)
    """Matched rows left as they are (``when_matched="ignore"``)."""
    matched: list[pa.Table] = field(default_factory=list)
    """Per file, the matched target rows (the columns read) with the source row of each."""

    def source_rows(self) -> np.ndarray:
        return (
            np.concatenate([m.column(_SOURCE_ROW).to_numpy() for m in self.matched])
            if self.matched
            else np.zeros(0, np.int64)
        )


def check_keys(on: Any, schema: pa.Schema) -> list[str]:
    """At least one distinct key column, each of a type whose equality is exact."""
    keys = check_columns(on, schema.names)
    if not keys:
        raise InvalidArgumentError("on must name at least one key column")
    for name in keys:
        t = schema.field(name).type
        if not (
            pa.types.is_integer(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_boolean(t)
            or pa.types.is_date(t)
            or pa.types.is_timestamp(t)
            or pa.types.is_decimal(t)
        ):
            raise InvalidArgumentError(
                f"key column {name!r} has type {t}; keys must be integers, strings, "
                "booleans, dates, timestamps or decimals (floats: NaN and -0.0 make "
                "equality inexact)"
            )
    return keys


def upsert(staging: Staging, data: Any, rules: MergeRules, schema_mode: str | None = None) -> UpsertCounts:
    """Stage steps 1-4 (``schema_mode="merge"``: adding the source's new columns first)."""
    data = arrow_input(data)
    apply_schema_mode(staging, data, schema_mode)
    schema = staging.scan().schema
    source_schema = rules.source_schema(data, schema)
    source = pa.Table.from_batches(list(batches_of(data, source_schema)), source_schema)
    keys = rules.keys
    valid = _all_valid(source, keys)
    keyed = source.select(keys).filter(pa.array(valid))
    _check_unique(keyed, keys)
    where = key_filter(keyed, keys, schema)
    probe = keyed.append_column(_SOURCE_ROW, pa.array(np.flatnonzero(valid)))
    found = _join(staging, rules, probe, where, schema)
    parts = []
    if rules.when_matched == "update":
        parts.append(_new_versions(found, source, rules, schema))
    if rules.when_not_matched == "insert":
        unmatched = np.ones(source.num_rows, dtype=bool)
        unmatched[found.source_rows()] = False
        parts.append(_with_nulls(source.filter(pa.array(unmatched)), schema))
    new_rows = pa.concat_tables(parts) if parts else schema.empty_table()
    staged = len(staging.changes.added)
    append(staging, new_rows, in_order=True)
    if rules.when_matched == "update":  # the new versions come first, in the order of found.replaced
        staging.stage_replacement(list(found.replaced.items()), staging.changes.added[staged:])
    staging.stage_kept(found.kept.items())
    return stage_replacements(staging, found.replaced, found.removed, where, rules, new_rows.num_rows)


def _join(staging: Staging, rules: MergeRules, probe: pa.Table, where: Expr | None, schema: pa.Schema) -> Matches:
    """Steps 2-3: the target rows the source matches, and (``when_not_matched_by_source``)
    those it does not."""
    found = Matches()
    if where is None and not rules.reads_every_file:
        return found
    keys = rules.keys
    partial = rules.columns is not None
    scan = staging.scan(
        columns=schema.names if partial else keys,
        where=None if rules.reads_every_file else PruneOnly(where),  # type: ignore[arg-type]
    )
    for file, rows in scan.matching_rows():
        # Only keys and positions go through the join: Arrow's hash join refuses list and
        # struct payload columns, which a partial update takes afterwards by row index.
        target = rows.select([*keys, POSITION_COLUMN]).append_column(_TARGET_ROW, pa.array(np.arange(rows.num_rows)))
        matched = target.join(probe, keys=keys, join_type="inner").sort_by(POSITION_COLUMN)
        if matched.num_rows:
            chosen = {"update": found.replaced, "delete": found.removed, "ignore": found.kept}[rules.when_matched]
            chosen[file.path] = _positions(matched)
            found.matched.append(
                rows.take(matched.column(_TARGET_ROW)).append_column(_SOURCE_ROW, matched.column(_SOURCE_ROW))
                if partial
                else matched
            )
        if rules.reads_every_file:
            missing = target.join(probe, keys=keys, join_type="left anti")  # a null key matches nothing
            if missing.num_rows:
                found.removed[file.path] = found.removed.get(file.path, BitMap()) | _positions(missing)
    return found


def _positions(rows: pa.Table) -> BitMap:
    return BitMap(rows.column(POSITION_COLUMN).to_numpy().astype(np.uint32))


def _new_versions(found: Matches, source: pa.Table, rules: MergeRules, schema: pa.Schema) -> pa.Table:
    """One new version per matched target row: the source row, or (``columns``) the target
    row with those columns taken from the source row."""
    if rules.columns is None:
        return source.take(pa.array(found.source_rows()))
    versions = []
    for matched in found.matched:
        taken = source.take(matched.column(_SOURCE_ROW))
        versions.append(
            pa.Table.from_arrays(
                [taken.column(f.name) if f.name in rules.columns else matched.column(f.name) for f in schema],
                schema=schema,
            )
        )
    return pa.concat_tables(versions) if versions else schema.empty_table()


def _with_nulls(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with every column of ``schema``, null where ``rows`` lacks one (a
    non-nullable one is a ``SchemaMismatchError``)."""
    if rows.schema.names == schema.names:
        return rows
    missing = [f.name for f in schema if f.name not in rows.schema.names and not f.nullable]
    if missing and rows.num_rows:
        raise SchemaMismatchError(f"the source lacks the non-nullable columns {missing}, which inserted rows need")
    return pa.Table.from_arrays(
        [rows.column(f.name) if f.name in rows.schema.names else pa.nulls(rows.num_rows, f.type) for f in schema],
        schema=schema,
    )


def stage_replacements(
    staging: Staging,
    replaced: dict[str, BitMap],
    removed: dict[str, BitMap],
    where: Expr | None,
    rules: MergeRules,
    rows_written: int,
) -> UpsertCounts:
    """Step 4 once the new rows are staged (here, or written by Spark): delete the replaced
    and removed positions, serialize against the key filter (every row when rows missing
    from the source are deleted), record the counts."""
    updated = staging.stage_deletes(replaced.items())
    gone = staging.stage_deletes(removed.items())
    if rules.reads_every_file:
        staging.serialize_against(None)
    elif where is not None:
        staging.serialize_against(where)
    counts = UpsertCounts(updated, rows_written - updated)
    staging.record("upsert", ("upserts", rules.parameters()), **counts._asdict(), rows_removed=gone)
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
        raise DuplicateKeyError(
            f"the source holds {repeated.num_rows} key(s) more than once, e.g. {shown}; "
            f"each key of {keys} may appear once (nothing was written)"
        )

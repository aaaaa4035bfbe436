"""The change rows of one commit, streamed as record batches: the unit every change feed is
made of (a table's range of versions, a database's, Spark's batch read, a streaming source).

The rows of the commit's plan (plan.py) are read from the data files (rows.py) as the
columns of the feed's schema, filtered, and tagged with ``_change_type``,
``_commit_version`` and ``_commit_timestamp``. Order: the deletes, then each update pair
(its ``update_preimage`` right before its ``update_postimage``), then the inserts, so that a
consumer applying them in order by key never applies a delete after an insert of the same
commit. With a filter, each row of a pair is kept or dropped on its own: a pair whose new row
no longer matches becomes a ``delete``, one whose old row did not match an ``insert`` (the
changes of the filtered table, docs/changes.md); those take their places in the order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..data.tombstones import DeletionVectors
from ..expressions import Expr
from ..expressions.arrow import project
from ..format.field_ids import FieldIds
from ..lazy import lazy
from ..log.version import Version
from ..storage import FileIO, ObjectStore
from .plan import Pair, Rows, plan_commit
from .rows import rows_at

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = pa.schema(
    [
        pa.field(CHANGE_TYPE, pa.string(), nullable=False),
        pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
        pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms", tz="UTC"), nullable=False),
    ]
)
CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")
_INSERT, _DELETE, _PRE, _POST = range(len(CHANGE_TYPES))
PAIRS_AT_ONCE = 65536
"""Update pairs interleaved into one batch at most."""


@dataclass(frozen=True)
class ChangeReading:
    """How a feed presents the rows it reads: as ``columns`` of the schema ``fields`` maps
    files onto (the feed's last version), those ``where`` (bound to it) selects."""

    io: FileIO
    store: ObjectStore
    fields: FieldIds
    columns: Sequence[str]
    where: Expr | None = None

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([*(self.fields.schema.field(c) for c in self.columns), *CHANGE_COLUMNS])

    @property
    def needed(self) -> list[str]:
        """The columns read: the feed's and the filter's."""
        where = sorted(self.where.columns()) if self.where is not None else []
        return list(dict.fromkeys([*self.columns, *where]))


def commit_changes(prev: Version | None, cur: Version, reading: ChangeReading) -> Iterator[pa.RecordBatch]:
    """The change rows of commit ``cur`` (``prev``: its parent; None when the table did not
    exist before it), streamed; nothing is read until the first batch is asked for."""
    plan = plan_commit(prev, cur, DeletionVectors(reading.store))
    stamp = _Stamp(reading, cur)
    filtered = reading.where is not None
    for rows in plan.deleted:
        if not _pruned(rows, prev, reading):
            yield from _each(rows, "delete", reading, stamp)
    for pair in plan.pairs if filtered else ():  # (with a filter, the pairs are read once per kind)
        yield from _paired(pair, reading, stamp, {"delete"})
    for pair in plan.pairs:
        yield from _paired(pair, reading, stamp, {"update_preimage", "update_postimage"})
    for pair in plan.pairs if filtered else ():
        yield from _paired(pair, reading, stamp, {"insert"})
    for rows in plan.inserted:
        if not _pruned(rows, cur, reading):
            yield from _each(rows, "insert", reading, stamp)


def _pruned(rows: Rows, version: Version | None, reading: ChangeReading) -> bool:
    """Whether the file's statistics (its entry in ``version``) rule out every row the filter
    could select, as a scan prunes files. Only where ``version`` has the feed's schema: an
    entry's statistics are keyed by its own version's column names."""
    where = reading.where
    return (
        where is not None
        and version is not None
        and version.fields == reading.fields
        and not where.may_match(rows.file.stats.get)
    )


class _Stamp:
    """Output batches of one commit: the feed's columns and the change columns."""

    def __init__(self, reading: ChangeReading, cur: Version) -> None:
        self.schema, self.columns = reading.schema, list(reading.columns)
        self.version, self.timestamp_ms = cur.version, cur.timestamp_ms

    def batches(self, rows: pa.Table | None, kinds: pa.Array) -> Iterator[pa.RecordBatch]:
        """``rows`` (None: a feed of no column) with their change columns."""
        n = len(kinds)
        if not n:
            return
        arrays = [rows.column(c) for c in self.columns] if rows is not None else []
        arrays += [
            kinds,
            pa.repeat(pa.scalar(self.version, pa.int64()), n),
            pa.repeat(pa.scalar(self.timestamp_ms, pa.int64()), n).cast(CHANGE_COLUMNS.field(COMMIT_TIMESTAMP).type),
        ]
        yield from pa.Table.from_arrays(arrays, schema=self.schema).to_batches()


def _read(rows: Rows, reading: ChangeReading, version: int) -> Iterator[pa.Table]:
    return rows_at(reading.io, rows.file, rows.positions, reading.fields, reading.needed, version)


def _each(rows: Rows, kind: str, reading: ChangeReading, stamp: _Stamp) -> Iterator[pa.RecordBatch]:
    for table in _read(rows, reading, stamp.version):
        if reading.where is not None:
            table = table.filter(_matches(table, reading.where))
        yield from stamp.batches(_as_feed(table, stamp), pa.repeat(pa.scalar(kind), table.num_rows))


def _paired(pair: Pair, reading: ChangeReading, stamp: _Stamp, kinds: set[str]) -> Iterator[pa.RecordBatch]:
    """Old and new rows read side by side, interleaved (old, new, old, new...), those of
    ``kinds`` kept: with a filter, a pair may yield a delete or an insert instead."""
    aligned = _aligned(_read(pair.old, reading, stamp.version), _read(pair.new, reading, stamp.version))
    for old, new in aligned:
        n = old.num_rows
        if reading.where is None:
            old_kept = new_kept = np.ones(n, dtype=bool)
        else:
            old_kept, new_kept = _matches(old, reading.where), _matches(new, reading.where)
        order = np.stack([np.arange(n), np.arange(n, 2 * n)], axis=1).ravel()
        found = np.stack([np.where(new_kept, _PRE, _DELETE), np.where(old_kept, _POST, _INSERT)], axis=1).ravel()
        wanted = np.isin(np.arange(len(CHANGE_TYPES)), [CHANGE_TYPES.index(k) for k in kinds])
        kept = np.stack([old_kept, new_kept], axis=1).ravel() & wanted[found]
        if not kept.any():
            continue
        rows = None
        if stamp.columns:
            rows = pa.concat_tables([_as_feed(old, stamp), _as_feed(new, stamp)]).take(pa.array(order[kept]))
        yield from stamp.batches(rows, _change_names().take(pa.array(found[kept])))


def _as_feed(table: pa.Table, stamp: _Stamp) -> pa.Table | None:
    """``table`` as the feed's columns and types (files of a v1 table may differ in type);
    None for a feed of no column."""
    fields = [f for f in stamp.schema if f.name in stamp.columns]
    if not fields:
        return None
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in fields], schema=pa.schema(fields))


def _matches(table: pa.Table, where: Expr) -> np.ndarray:
    """Where ``where`` holds (null: not), as a numpy mask."""
    mask = project(table, {"m": where.to_arrow()}).column("m")
    return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)


def _aligned(left: Iterator[pa.Table], right: Iterator[pa.Table]) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Two streams of the same number of rows, cut into pieces of equal length, at most
    ``PAIRS_AT_ONCE`` rows each (the interleaving copies them)."""
    a = b = None
    while True:
        if a is None or not a.num_rows:
            a = next(left, None)
        if b is None or not b.num_rows:
            b = next(right, None)
        if a is None or b is None:
            return
        n = min(a.num_rows, b.num_rows, PAIRS_AT_ONCE)
        yield a.slice(0, n), b.slice(0, n)
        a, b = a.slice(n), b.slice(n)


@cache
def _change_names() -> pa.Array:
    """``CHANGE_TYPES`` as an Arrow array, made on first use: ``pa.array`` of Python values
    imports pandas, which ``import manifest_table`` must not (docs/benchmarks.md, "Start-up")."""
    return pa.array(CHANGE_TYPES, pa.string())

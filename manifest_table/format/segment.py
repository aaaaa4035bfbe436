"""Segments (format v2): write-once Parquet objects listing data files, one row per file.

A segment row holds what a v1 manifest entry holds: ``path``, ``rows``, ``size``, the
deletion vector's four fields (all null when the file has no deletes), the file's
``cluster_run`` (a column present only when some entry has one: format version 3), and per column of
the table, keyed by its field id, ``min_{id}`` / ``max_{id}`` (typed: the column's own Arrow
type, zoned timestamps as UTC instants) and ``nulls_{id}``. Typed columns let planning
filter a whole segment with one Arrow expression (expressions/stats_arrow.py). Parquet keeps
second-unit timestamps as milliseconds and date64 as date32 (``column_types.parquet_form``):
decoding casts them back, exactly.

Decoding is the trust boundary for everything a segment holds: its Arrow schema must be
exactly the one the root's schema implies, and every count, key and deletion-vector field
is range-checked (vectorised) before any entry is used."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..errors import CorruptTableError
from ..lazy import lazy
from .column_types import parquet_form, widens
from .entries import ROW_POSITIONS, DataFile, DeletionVector
from .json_fields import MAX_INT64
from .keys import DATA_PREFIX, SEGMENT_PREFIX, TOMBSTONE_PREFIX, WRITER_SHAPES, stored_key
from .listed_once import ListedPaths
from .root import SegmentSummary
from .stats import ColumnStats, has_stats, instant_type

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    pc = lazy("pyarrow.compute")
    pq = lazy("pyarrow.parquet")

_DV_FIELDS = ("dv_path", "dv_offset", "dv_length", "dv_cardinality")
CLUSTER_RUN = "cluster_run"
# Writer-shaped keys, checked vectorised (RE2 syntax); any other key goes through stored_key.
_DATA_KEY = r"^data/[0-9a-f]{32}\.parquet$"
_TOMBSTONE = "^" + WRITER_SHAPES[TOMBSTONE_PREFIX].pattern + "$"


def new_segment_key() -> str:
    return f"{SEGMENT_PREFIX}{uuid.uuid4().hex}.parquet"


def entries_schema(schema: pa.Schema, field_ids: Sequence[int], runs: bool = False) -> pa.Schema:
    """The Arrow schema of a segment of a table with ``schema`` and ``field_ids`` (``runs``:
    with the ``cluster_run`` column)."""
    fields = [
        pa.field("path", pa.string(), False),
        pa.field("rows", pa.int64(), False),
        pa.field("size", pa.int64(), False),
        pa.field("dv_path", pa.string()),
        pa.field("dv_offset", pa.int64()),
        pa.field("dv_length", pa.int64()),
        pa.field("dv_cardinality", pa.int64()),
    ]
    if runs:
        fields.append(pa.field(CLUSTER_RUN, pa.int64()))
    for column, fid in zip(schema, field_ids):
        if has_stats(column.type):
            fields += [
                pa.field(f"min_{fid}", instant_type(column.type)),
                pa.field(f"max_{fid}", instant_type(column.type)),
            ]
        fields.append(pa.field(f"nulls_{fid}", pa.int64()))
    return pa.schema(fields)


_FEW_ENTRIES = 64
"""Entries taken one by one below this; more convert whole columns to Python once."""


class Segment:
    """The decoded entries of one segment object, as an Arrow table."""

    def __init__(
        self, key: str, table: pa.Table, schema: pa.Schema, field_ids: Sequence[int], listed: ListedPaths | None = None
    ) -> None:
        self.key, self.table = key, table
        self._listed = listed
        self.shape = shape(schema, field_ids)
        self._names = {column.name: fid for column, fid in zip(schema, field_ids)}
        self._types = {column.name: column.type for column in schema}
        self._index: dict[str, int] | None = None
        self._values: dict[str, list] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def listed(self) -> ListedPaths:
        """Its paths, fingerprinted once (when decoded, or at first use), to check that a
        version lists each file once."""
        if self._listed is None:
            self._listed = ListedPaths.of(f"segment {self.key}", self.table.column("path"))
        return self._listed

    def index_of(self, path: str) -> int | None:
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.table.column("path").to_pylist())}
        return self._index.get(path)

    def live(self, deletes: Mapping[str, DeletionVector]) -> np.ndarray:
        rows = self.table.column("rows").to_numpy()
        deleted = self.table.column("dv_cardinality").fill_null(0).to_numpy()
        live = rows > deleted
        if deletes:
            paths = self.table.column("path")
            hits = np.flatnonzero(
                pc.is_in(paths, value_set=pa.array(list(deletes), pa.string())).to_numpy(zero_copy_only=False)
            )
            for i, path in zip(hits, paths.take(hits).to_pylist()):
                self._check_override(path, deletes[path], int(rows[i]))
                live[i] = rows[i] > deletes[path].cardinality
        return live

    def _check_override(self, path: str, ref: DeletionVector, rows: int) -> None:
        if ref.cardinality > rows:
            raise CorruptTableError(
                f"the root's deletes of {path} has cardinality {ref.cardinality}, "
                f"more than the file's {rows} rows (segment {self.key})"
            )

    def files(
        self, indices: Sequence[int] | np.ndarray | None = None, deletes: Mapping[str, DeletionVector] | None = None
    ) -> list[DataFile]:
        """Entries as ``DataFile``; ``deletes`` (the root's override map) replaces the stored
        deletion vector of the files it names."""
        rows = range(len(self)) if indices is None else [int(i) for i in indices]
        column = self._column if len(rows) > _FEW_ENTRIES else self._values_at(rows)
        paths, counts, sizes = (column(name) for name in ("path", "rows", "size"))
        dv = [column(name) for name in _DV_FIELDS]
        runs = column(CLUSTER_RUN) if CLUSTER_RUN in self.table.column_names else None
        out = []
        for i in rows:
            path = paths[i]
            ref = deletes.get(path) if deletes else None
            if ref is None and dv[0][i] is not None:
                ref = DeletionVector(dv[0][i], dv[1][i], dv[2][i], dv[3][i])
            elif ref is not None:
                self._check_override(path, ref, counts[i])
            run = None if runs is None else runs[i]
            out.append(DataFile(path, counts[i], sizes[i], _EntryStats(self, i), deletes=ref, cluster_run=run))
        return out

    def column_stats(self, name: str, i: int) -> ColumnStats | None:
        fid = self._names.get(name)
        if fid is None:
            return None
        nulls, rows = self._value(f"nulls_{fid}", i), self._value("rows", i)
        if not has_stats(self._types[name]):
            return ColumnStats(None, None, nulls, rows)
        return ColumnStats(self._value(f"min_{fid}", i), self._value(f"max_{fid}", i), nulls, rows)

    def _value(self, name: str, i: int) -> Any:
        """One entry's value: from the column's Python list once there is one, else alone (a
        point-lookup plan uses one entry of 32k: converting whole columns cost it 6 ms)."""
        values = self._values.get(name)
        return values[i] if values is not None else self.table.column(name)[i].as_py()

    def _values_at(self, rows: Sequence[int]) -> Callable[[str], Mapping[int, Any]]:
        """For a few entries: each column's values at ``rows`` only, by row."""
        return lambda name: {i: self._value(name, i) for i in rows}

    def _column(self, name: str) -> list:
        values = self._values.get(name)
        if values is None:
            with self._lock:
                values = self._values.setdefault(name, self.table.column(name).to_pylist())
        return values

    def stats_columns(self, name: str) -> tuple[str, str, pa.DataType] | None:
        fid = self._names.get(name)
        if fid is None or not has_stats(self._types[name]):
            return None
        return f"min_{fid}", f"max_{fid}", instant_type(self._types[name])


class _EntryStats(Mapping[str, ColumnStats]):
    """One entry's stats, read from the segment's columns when asked for."""

    __slots__ = ("_segment", "_i")

    def __init__(self, segment: Segment, i: int) -> None:
        self._segment, self._i = segment, i

    def __getitem__(self, name: str) -> ColumnStats:
        found = self._segment.column_stats(name, self._i)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._segment._names)

    def __len__(self) -> int:
        return len(self._segment._names)

    def __reduce__(self) -> tuple:
        """Pickled (a Spark read's partitions carry their files) as the plain stats of this
        entry, not the whole segment with its lock."""
        return dict, (dict(self),)


def entries_of(files: Sequence[DataFile], schema: pa.Schema, field_ids: Sequence[int]) -> pa.Table:
    """``files`` as segment rows."""
    target = entries_schema(schema, field_ids, any(f.cluster_run is not None for f in files))
    columns: dict[str, list] = {
        CLUSTER_RUN: [f.cluster_run for f in files],
        "path": [f.path for f in files],
        "rows": [f.rows for f in files],
        "size": [f.size for f in files],
        "dv_path": [f.deletes.path if f.deletes else None for f in files],
        "dv_offset": [f.deletes.offset if f.deletes else None for f in files],
        "dv_length": [f.deletes.length if f.deletes else None for f in files],
        "dv_cardinality": [f.deletes.cardinality if f.deletes else None for f in files],
    }
    for column, fid in zip(schema, field_ids):
        stats = [f.stats.get(column.name) for f in files]
        if has_stats(column.type):
            columns[f"min_{fid}"] = [s.min if s else None for s in stats]
            columns[f"max_{fid}"] = [_upper(s) for s in stats]
        columns[f"nulls_{fid}"] = [s.null_count if s else None for s in stats]
    return pa.table([pa.array(columns[f.name], f.type) for f in target], schema=target)


def _upper(stats: ColumnStats | None) -> object:
    """A stored max; a NaN max (possible in stats passed to ``add_files``) means unknown."""
    if stats is None or stats.max is None or stats.max != stats.max:
        return None
    return stats.max


def with_deletes(table: pa.Table, deletes: Mapping[str, DeletionVector]) -> pa.Table:
    """``table`` with the deletion vectors of the entries ``deletes`` names replaced."""
    if not deletes:
        return table
    paths = table.column("path").to_pylist()
    columns = {name: table.column(name).to_pylist() for name in _DV_FIELDS}
    for i, path in enumerate(paths):
        ref = deletes.get(path)
        if ref is not None:
            for name, value in zip(_DV_FIELDS, (ref.path, ref.offset, ref.length, ref.cardinality)):
                columns[name][i] = value
    for name in _DV_FIELDS:
        index = table.schema.get_field_index(name)
        field = table.schema.field(index)
        table = table.set_column(index, field, pa.array(columns[name], field.type))
    return table


def concat_entries(tables: Sequence[pa.Table], schema: pa.Schema, field_ids: Sequence[int]) -> pa.Table:
    """Entries of several segments as one segment's rows, with the ``cluster_run`` column
    only if some entry has a run."""
    table = pa.concat_tables(tables, promote_options="default")
    runs = CLUSTER_RUN in table.column_names and table.column(CLUSTER_RUN).null_count < table.num_rows
    return table.select(entries_schema(schema, field_ids, runs).names)


def encode_segment(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    # LZ4: decoding a 16,384-entry segment takes 5 ms instead of zstd's 8 ms, for twice the
    # bytes (~800 KiB); every cold plan of a big table decodes dozens of them.
    pq.write_table(table, sink, compression="lz4", write_statistics=False)
    return sink.getvalue().to_pybytes()


def summarize(key: str, table: pa.Table, schema: pa.Schema, field_ids: Sequence[int]) -> SegmentSummary:
    """The root's summary of segment ``key`` holding ``table``: stats over all its entries,
    a bound unknown if any entry with values has it unknown."""
    rows = table.column("rows")
    stats = {}
    for column, fid in zip(schema, field_ids):
        nulls = table.column(f"nulls_{fid}")
        null_count = None if nulls.null_count else pc.sum(nulls).as_py() or 0
        lo = hi = None
        if has_stats(column.type):
            has_values = pc.or_kleene(pc.is_null(nulls), pc.less(nulls, rows))
            lows, highs = table.column(f"min_{fid}"), table.column(f"max_{fid}")
            if not pc.any(pc.and_(has_values, pc.is_null(lows))).as_py():
                lo = pc.min(lows).as_py()
            if not pc.any(pc.and_(has_values, pc.is_null(highs))).as_py():
                hi = pc.max(highs).as_py()
        stats[column.name] = ColumnStats(lo, hi, null_count, pc.sum(rows).as_py() or 0)
    deleted = pc.sum(table.column("dv_cardinality")).as_py() or 0
    return SegmentSummary(
        key, table.num_rows, pc.sum(rows).as_py() or 0, deleted, pc.sum(table.column("size")).as_py() or 0, stats
    )


def decode_segment(data: bytes, key: str, schema: pa.Schema, field_ids: Sequence[int]) -> Segment:
    """Decode and validate segment ``key``; ``CorruptTableError`` names what is wrong."""
    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()
    except (pa.ArrowException, OSError) as exc:
        raise CorruptTableError(f"{key} is not a readable Parquet segment: {exc}") from None
    expected = entries_schema(schema, field_ids, CLUSTER_RUN in table.column_names)
    if not table.schema.equals(expected):
        table = _evolved(table, expected, key)
    listed = ListedPaths.of(f"segment {key}", table.column("path"))
    _check_entries(table, key, listed)
    return Segment(key, table, schema, field_ids, listed)


def _evolved(table: pa.Table, expected: pa.Schema, key: str) -> pa.Table:
    """A segment written under an earlier schema, as the current schema's segment: stats of
    dropped columns left out, those of added columns (all three absent) unknown, those of
    widened columns cast. Anything else is not a segment of this table."""
    have = {f.name: f for f in table.schema}
    present = {m.group(2) for name in have if (m := _STATS_COLUMN.fullmatch(name))}
    columns = []
    for f in expected:
        found, stats = have.get(f.name), _STATS_COLUMN.fullmatch(f.name)
        if found is None and stats and stats.group(2) not in present:
            columns.append(pa.nulls(table.num_rows, f.type))
        elif found is not None and (found.equals(f) or (stats and _readable_as(found.type, f.type))):
            columns.append(_cast(table.column(f.name), f.type, key))
        else:
            columns = []
            break
    stray = [n for n in have if n not in expected.names and not _STATS_COLUMN.fullmatch(n)]
    if len(columns) != len(expected) or stray:
        raise CorruptTableError(
            f"{key}: its columns {table.schema.names} with types "
            f"{[str(t) for t in table.schema.types]} are not the segment columns of the "
            f"table schema ({expected.names}, {[str(t) for t in expected.types]})"
        )
    return pa.Table.from_arrays(columns, schema=expected)


_STATS_COLUMN = re.compile(r"(min|max|nulls)_([0-9]+)")


def _readable_as(stored: pa.DataType, declared: pa.DataType) -> bool:
    """A stats column of type ``stored`` holds values of ``declared``: it was widened since,
    or it is what Parquet gives back for ``declared`` (second-unit timestamps come back as
    milliseconds and date64 as date32, in every segment written so far)."""
    return widens(stored, declared) or stored == parquet_form(declared)


def _cast(column: pa.ChunkedArray, dtype: pa.DataType, key: str) -> pa.ChunkedArray:
    try:
        return column.cast(dtype)  # safe: milliseconds that are not whole seconds fail
    except pa.ArrowInvalid as exc:
        raise CorruptTableError(f"{key}: a statistics column does not hold values of type {dtype}: {exc}") from None


def _check_entries(table: pa.Table, key: str, listed: ListedPaths) -> None:
    def fail(field: str, expected: str) -> CorruptTableError:
        return CorruptTableError(f"{key}: field {field} of some entry is out of range; expected {expected}")

    for name in ("path", "rows", "size"):
        if table.column(name).null_count:
            raise fail(name, "a value in every entry")
    if not _within(table.column("rows"), 0, ROW_POSITIONS):
        raise fail("rows", f"an integer in [0, {ROW_POSITIONS})")
    if not _within(table.column("size"), 0, MAX_INT64):
        raise fail("size", "an integer >= 0")
    if CLUSTER_RUN in table.column_names and not _within(table.column(CLUSTER_RUN), 0, MAX_INT64):
        raise fail(CLUSTER_RUN, "an integer >= 0")
    paths = table.column("path")
    plain = _writer_data_keys(paths)
    for i in np.flatnonzero(~plain):
        stored_key(paths[int(i)].as_py(), DATA_PREFIX, key, "path")
    twice = listed.twice()
    if twice is not None:
        raise CorruptTableError(f"{key} lists a data file more than once ({twice})")
    dv = [table.column(name) for name in _DV_FIELDS]
    unset = [pc.is_null(c) for c in dv]
    if not all(pc.all(pc.equal(u, unset[0])).as_py() is not False for u in unset[1:]):
        raise fail("dv_*", "all four deletion-vector fields set, or none")
    if not (_within(dv[1], 0, MAX_INT64) and _within(dv[2], 0, MAX_INT64) and _within(dv[3], 1, MAX_INT64)):
        raise fail("dv_offset, dv_length or dv_cardinality", "non-negative integers, a cardinality >= 1")
    if pc.any(pc.greater(dv[3], table.column("rows"))).as_py():
        raise fail("dv_cardinality", "at most the file's rows")
    shaped = pc.match_substring_regex(dv[0], _TOMBSTONE)
    for i in np.flatnonzero(pc.invert(shaped).fill_null(False).to_numpy(zero_copy_only=False)):
        stored_key(dv[0][int(i)].as_py(), TOMBSTONE_PREFIX, key, "dv_path")
    rows = table.column("rows").to_numpy()
    for name in table.schema.names:
        if name.startswith("nulls_"):  # (in numpy: a compute kernel per comparison cost 4x)
            counts = table.column(name).fill_null(0).to_numpy()
            if ((counts < 0) | (counts > rows)).any():
                raise fail(name, "a null count between 0 and the file's rows")


_HEX_DIGITS = b"0123456789abcdef"
_HEX = np.zeros(256, dtype=bool)
_HEX[np.frombuffer(_HEX_DIGITS, np.uint8)] = True
_DATA_KEY_SHAPE = (b"data/", 32, b".parquet")


def _writer_data_keys(paths: pa.ChunkedArray) -> np.ndarray:
    """Which paths have exactly a writer's shape ``data/<32 hex>.parquet`` (``_DATA_KEY``),
    read from the Arrow buffers: the regular expression took 2.5-7 ms over a 32k-entry
    segment, most of a cold point-lookup plan's check (docs/design/008-point-reads.md). The
    others go through ``stored_key``, the one validator of keys."""
    prefix, digits, suffix = _DATA_KEY_SHAPE
    width = len(prefix) + digits + len(suffix)
    array = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, len(array) + 1, array.offset * 4).astype(np.int64)
    if not len(array) or data_buffer is None or np.any(np.diff(offsets) != width):
        return pc.match_substring_regex(array, _DATA_KEY).fill_null(False).to_numpy(zero_copy_only=False)
    data = np.frombuffer(data_buffer, np.uint8)[offsets[0] : offsets[-1]].reshape(len(array), width)
    hex_part = data[:, len(prefix) : len(prefix) + digits]
    shaped = (data[:, : len(prefix)] == np.frombuffer(prefix, np.uint8)).all(axis=1) & (
        data[:, len(prefix) + digits :] == np.frombuffer(suffix, np.uint8)
    ).all(axis=1)
    if not hex_part.tobytes().translate(None, _HEX_DIGITS):  # every digit hex: one pass in C
        return shaped
    return shaped & _HEX[hex_part].all(axis=1)


def _within(column: pa.ChunkedArray, lo: int, hi: int) -> bool:
    """Every non-null value in ``[lo, hi)``."""
    if len(column) == column.null_count:
        return True
    minmax = pc.min_max(column)
    return lo <= minmax["min"].as_py() and minmax["max"].as_py() < hi


def shape(schema: pa.Schema, field_ids: Sequence[int]) -> tuple[tuple[int, str, str], ...]:
    """What a decoded segment depends on besides its bytes: each column's id, name and type
    (a rename or a widening decodes the same object differently)."""
    return tuple(zip(field_ids, schema.names, map(str, schema.types)))

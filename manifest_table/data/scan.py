"""Reading a snapshot: plan from the manifest, prune files by their stats and row groups by
Parquet footer stats, read only the needed columns, drop deleted rows by position, apply
the residual filter, and stream record batches while files are read in parallel."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from ..arguments import check_columns
from ..errors import CorruptTableError, NotFound, StoreError, VersionExpiredError
from ..expressions import ColumnStats, Expr
from ..expressions.arrow import matching_rows
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..format.stats import leaf_columns
from ..lazy import lazy
from ..process_pools import ProcessPool
from ..storage import FileIO, ParquetSource
from . import bloom_probes, point_reads
from .file_sets import FileSet, ListedFiles, VersionFiles

if TYPE_CHECKING:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from ..log.version import Version
    from ..storage import ObjectStore
    from .tombstones import DeletionVectors
else:
    ds = lazy("pyarrow.dataset")
    pq = lazy("pyarrow.parquet")

POSITION_COLUMN = "__row_position"

_FILE_READERS = ProcessPool(32, "mt-read")
"""The threads that read a scan's files, shared by the scans of a process: a pool made per
scan started a thread per file read at once (0.5 ms of a 2-file point read). Threads are made
as scans need them, up to 32; a scan keeps ``max_workers`` files in flight (by default as
many as the machine has cores), so scans in several threads of a process share the pool."""


@dataclass(frozen=True)
class Snapshot:
    """The files of one table state and how to find each file's deleted rows: those its
    manifest entry references, plus any a transaction has staged but not committed."""

    version: int
    schema: pa.Schema
    file_set: FileSet | Sequence[DataFile]
    """The state's files (file_sets.py); a plain list is taken as it is."""
    load_deletes: Callable[[DataFile], BitMap]
    """The committed bitmap of a file (what its manifest entry references)."""
    staged_deletes: Mapping[str, BitMap] = field(default_factory=dict)
    """Positions deleted by an uncommitted transaction, per file path."""
    fields: FieldIds = field(kw_only=True)
    """How files map onto ``schema`` by field id (``plain(schema)`` for a v1 table: by name)."""
    missing: Callable[[str], Exception] | None = field(default=None, kw_only=True)
    """The error for an object of this state that is gone (``PointerLog.object_missing``:
    the version expired, or the table is damaged); None: the version expired."""

    @classmethod
    def of(
        cls,
        version: Version,
        store: ObjectStore,
        *,
        deletes: DeletionVectors | None = None,
        missing: Callable[[str], Exception] | None = None,
    ) -> Snapshot:
        """Every file of ``version`` with its committed deleted rows, read from ``store`` (or
        through ``deletes``, a cache the caller shares with other reads of the same state)."""
        from .tombstones import DeletionVectors

        dvs = deletes if deletes is not None else DeletionVectors(store)
        return cls(
            version.version, version.schema, VersionFiles(version), dvs.of, fields=version.fields, missing=missing
        )

    def gone(self, exc: NotFound) -> Exception:
        """The error for a read of this state that found ``exc.args[0]`` missing."""
        if self.missing is not None:
            return self.missing(str(exc.args[0]) if exc.args else str(exc))
        return VersionExpiredError(
            f"{exc} of version {self.version} is gone: garbage collection has removed this "
            "version (or the table is damaged)"
        )

    def __post_init__(self) -> None:
        if isinstance(self.file_set, Sequence):
            object.__setattr__(self, "file_set", ListedFiles(self.file_set))

    @property
    def files(self) -> Sequence[DataFile]:
        """Every file (a v2 version reads all its segments: prefer ``plan``)."""
        return self.file_set.all()  # type: ignore[union-attr]

    def plan(self, where: Expr | None) -> Sequence[DataFile]:
        """Files with live rows whose stats may match the bound ``where``."""
        planned = self.file_set.plan(where)  # type: ignore[union-attr]
        if not any(self.staged_deletes.values()):
            return planned
        return [f for f in planned if self.live_rows(f) > 0]

    def total_live_rows(self) -> int:
        if not any(self.staged_deletes.values()):
            return self.file_set.live_rows()  # type: ignore[union-attr]
        return sum(self.live_rows(f) for f in self.files)

    def deleted(self, file: DataFile) -> BitMap:
        staged = self.staged_deletes.get(file.path)
        committed = self.load_deletes(file)
        return committed | staged if staged else committed

    def live_rows(self, file: DataFile) -> int:
        """Without staged deletes the manifest's count suffices: no bitmap is read."""
        if not self.staged_deletes.get(file.path):
            return file.live_rows
        return file.rows - len(self.deleted(file))


class Scan:
    """A lazy read of one snapshot; nothing is fetched until a ``to_*`` or ``count`` call."""

    def __init__(
        self,
        snapshot: Snapshot,
        io: FileIO,
        columns: Sequence[str] | None = None,
        where: Expr | None = None,
        max_workers: int | None = None,
    ) -> None:
        names = snapshot.schema.names
        chosen = check_columns(columns, names)
        self.snapshot = snapshot
        self.columns = list(names) if chosen is None else chosen
        self.where = where.bind(snapshot.schema) if where is not None else None
        self._io = io
        self._max_workers = max_workers

    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([self.snapshot.schema.field(c) for c in self.columns])

    def plan_files(self) -> Sequence[DataFile]:
        """Files that may hold matching live rows, judged by manifest stats alone."""
        try:
            return self.snapshot.plan(self.where)
        except NotFound as exc:  # a segment of the version
            raise self.snapshot.gone(exc) from exc

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for table in self._tables(self.columns, with_positions=False):
            yield from table.to_batches()

    def to_arrow(self) -> pa.Table:
        tables = list(self._tables(self.columns, with_positions=False))
        if not tables:
            return self.schema.empty_table()
        if not self.columns:  # concat_tables would lose the row count of column-less tables
            return pa.table({"_": pa.nulls(sum(t.num_rows for t in tables))}).select([])
        return pa.concat_tables(tables)

    def to_pandas(self, **kwargs: Any) -> Any:  # -> pandas.DataFrame
        return self.to_arrow().to_pandas(**kwargs)

    def to_reader(self) -> pa.RecordBatchReader:
        """A one-pass stream of the live rows: what Arrow consumers (DuckDB, Polars, Arrow
        Flight, ``pyarrow.dataset.write_dataset``) take without holding the table in memory."""
        schema = self.schema
        batches = (
            b if b.schema.equals(schema) else pa.RecordBatch.from_arrays(b.columns, schema=schema)
            for b in self.to_batches()
        )
        return pa.RecordBatchReader.from_batches(schema, batches)

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """The Arrow PyCapsule stream protocol, so ``pa.table(scan)``, ``pl.DataFrame(scan)``
        and ``duckdb.sql("from scan")`` read the live rows batch by batch. Each call starts
        a new read of the same snapshot."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def count(self) -> int:
        """Live rows; without a filter this reads no data, only the manifest and bitmaps' sizes."""
        if self.where is None:
            return self.snapshot.total_live_rows()
        return sum(t.num_rows for t in self._tables([], with_positions=False))

    def matching_rows(self) -> Iterator[tuple[DataFile, pa.Table]]:
        """Per file, the live rows matching the filter (the scan's columns) with their
        positions in ``POSITION_COLUMN``: what an update or upsert replaces."""
        return self._file_tables(self.columns, with_positions=True)

    def matching_positions(self) -> Iterator[tuple[DataFile, BitMap]]:
        """Per file, the positions of live rows matching the filter (what a delete removes)."""
        for file, table in self._file_tables([], with_positions=True):
            positions = table.column(POSITION_COLUMN).to_numpy()
            yield file, BitMap(positions.astype(np.uint32, copy=False))

    # --- reading -----------------------------------------------------------------------
    def _tables(self, columns: list[str], with_positions: bool) -> Iterator[pa.Table]:
        for _, table in self._file_tables(columns, with_positions):
            yield table

    def _file_tables(self, columns: list[str], with_positions: bool) -> Iterator[tuple[DataFile, pa.Table]]:
        """Read planned files in parallel, yielding in plan order, at most a window ahead."""
        files = self.plan_files()
        if not files:
            return
        if len(files) == 1:  # nothing to overlap: a thread's start cost a point read 0.1-5 ms
            table = self._read_file(files[0], columns, with_positions)
            if table is not None and table.num_rows:
                yield files[0], table
            return
        workers = self._max_workers or max(2, os.cpu_count() or 1)  # (asked only here: 30 us a call)
        pool = _FILE_READERS.get()
        window: list[tuple[DataFile, Future[pa.Table]]] = []
        try:
            pending = iter(files)
            for file in pending:
                window.append((file, pool.submit(self._read_file, file, columns, with_positions)))
                if len(window) >= workers:
                    break
            while window:
                file, future = window.pop(0)
                table = future.result()
                nxt = next(pending, None)
                if nxt is not None:
                    window.append((nxt, pool.submit(self._read_file, nxt, columns, with_positions)))
                if table is not None and table.num_rows:
                    yield file, table
        finally:  # (a consumer that stops early, an error): none of this scan's reads outlive it
            for _, future in window:
                future.cancel()
            wait([future for _, future in window])

    def _read_file(self, file: DataFile, columns: list[str], with_positions: bool) -> pa.Table | None:
        try:
            return self._read_live_rows(file, columns, with_positions)
        except NotFound as exc:  # a data file or tombstone of the version
            raise self.snapshot.gone(exc) from exc
        except OSError as exc:  # pyarrow's own reads of local files (a permission, a disk error)
            raise StoreError(f"reading {file.path} failed: {exc}") from exc

    def _read_live_rows(self, file: DataFile, columns: list[str], with_positions: bool) -> pa.Table | None:
        where = self.where
        needed = list(dict.fromkeys(columns + sorted(where.columns() if where is not None else ())))
        deleted = self.snapshot.deleted(file)
        read = self._io.read_parquet(
            file.path, file.size, lambda source: self._read_groups(file, source, deleted, needed)
        )
        if read is None:
            return None
        table = read.table
        if with_positions:
            table = table.append_column(POSITION_COLUMN, pa.array(read.positions()))
        if where is not None and not read.filtered:
            table = table.filter(where.to_arrow())
        return table.select(columns + ([POSITION_COLUMN] if with_positions else []))

    def _read_groups(self, file: DataFile, source: ParquetSource, deleted: BitMap, needed: list[str]) -> _Rows | None:
        """The ``needed`` columns of the row groups that may hold live matching rows, deleted
        rows dropped. None when no row group qualifies."""
        where, meta = self.where, source.metadata
        if meta.num_rows != file.rows:
            raise CorruptTableError(
                f"{file.path}: its Parquet footer has {meta.num_rows} rows, the manifest's rows field says {file.rows}"
            )
        fields = self.snapshot.fields
        schema = source.fragment.physical_schema
        sources = fields.sources(schema, needed)
        leaves = _leaves(source)
        starts = _starts(source)
        with bloom_probes.batched():
            groups = [
                i
                for i in range(meta.num_row_groups)
                if deleted.range_cardinality(int(starts[i]), int(starts[i + 1])) < starts[i + 1] - starts[i]
                and (
                    where is None
                    or where.may_match(_stats_lookup(file, sources, functools.partial(_group_stats, source, i, leaves)))
                )
            ]
        if not groups:
            return None
        if where is not None and point_reads.applies(source, groups):
            return self._read_matching(file, source, groups, deleted, needed, sources)
        spans = [(int(starts[i]), int(starts[i + 1])) for i in groups]
        keep = _kept_rows(deleted, spans) if deleted else None
        table = _decode(source, groups, [sources[c] for c in needed if c in sources], keep)
        return _Rows(fields.conform(table, sources, needed), spans, keep)

    def _read_matching(
        self,
        file: DataFile,
        source: ParquetSource,
        groups: list[int],
        deleted: BitMap,
        needed: list[str],
        sources: dict[str, str],
    ) -> _Rows | None:
        """The filter's columns first, only in the pages whose bounds may match, then the
        other columns only at the rows that match (``point_reads``): a point read decodes a
        page per column, not row groups. ``sources``: table column -> the file's."""
        where = self.where
        assert where is not None
        fields = self.snapshot.fields
        leaves = _leaves(source)
        starts = _starts(source)
        filtering = sorted(where.columns())
        in_file = [sources[c] for c in filtering if c in sources]
        whole = [(int(starts[i]), int(starts[i + 1])) for i in groups]
        spans = point_reads.candidate_spans(
            source,
            groups,
            starts,
            {c: leaves[c] for c in in_file if c in leaves},
            lambda lookup: where.may_match(_stats_lookup(file, sources, lookup)),
        )
        if not spans:
            return None
        keys = None
        if sum(b - a for a, b in spans) * 2 <= sum(b - a for a, b in whole):
            keys = point_reads.read_spans(source, leaves, in_file, spans, starts)
        if keys is None:
            spans = whole
        keep = _kept_rows(deleted, spans) if deleted else None
        if keys is None:
            keys = _decode(source, groups, in_file, keep)
        elif keep is not None:
            keys = keys.filter(pa.array(keep))
        keys = fields.conform(keys, sources, filtering)
        read = _Rows(keys, spans, keep)
        index = matching_rows(keys, where.to_arrow())
        if not len(index):
            return None
        positions = read.positions(index)
        others = [c for c in needed if c not in filtering]
        rest = point_reads.read_others(source, leaves, [sources[c] for c in others if c in sources], positions, starts)
        rest = fields.conform(rest, sources, others)
        keys = _rows_at(keys, index)
        columns = {**dict(zip(filtering, keys.columns)), **dict(zip(others, rest.columns))}
        table = pa.Table.from_arrays(
            [columns[c] for c in needed],
            schema=pa.schema([keys.schema.field(c) if c in filtering else rest.schema.field(c) for c in needed]),
        )
        return _Rows(table, spans, keep, positions, filtered=True)


@dataclass(frozen=True)
class _Rows:
    """What a file's read produced: ``table``, read from the row ``spans`` with ``keep`` (None:
    every row kept) applied, or, when ``filtered``, only the matching rows at ``exact``."""

    table: pa.Table
    spans: list[tuple[int, int]]
    keep: np.ndarray | None
    exact: np.ndarray | None = None
    filtered: bool = False

    def positions(self, chosen: np.ndarray | None = None) -> np.ndarray:
        """Physical row positions of the table's rows (or of those at indexes ``chosen``):
        row-group start + index within it."""
        if self.exact is not None:
            return self.exact
        if chosen is None:
            positions = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in self.spans])
            return positions if self.keep is None else positions[self.keep]
        read = np.flatnonzero(self.keep)[chosen] if self.keep is not None else chosen
        return _span_positions(self.spans, read)


def _rows_at(table: pa.Table, index: np.ndarray) -> pa.Table:
    """``table.take(index)`` (``index`` ascending), each row taken from the batch holding it:
    pyarrow's take over a table of many chunks (the key column of a file's every row group)
    joins the chunks first, 3.3 ms for one row of 5M."""
    batches = table.to_batches()
    if len(batches) <= 1:
        return table.take(index)
    ends = np.cumsum([b.num_rows for b in batches])
    holding = np.searchsorted(ends, index, side="right")
    pieces = []
    for b in np.unique(holding).tolist():
        first = int(ends[b]) - batches[b].num_rows
        pieces.append(batches[b].take(pa.array(index[holding == b] - first)))
    return pa.Table.from_batches(pieces, schema=table.schema)


def _span_positions(spans: list[tuple[int, int]], read: np.ndarray) -> np.ndarray:
    """The physical positions of rows at flat indexes ``read`` into the concatenated ``spans``."""
    lengths = np.array([b - a for a, b in spans], dtype=np.int64)
    firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    span = np.searchsorted(firsts, read, side="right") - 1
    return np.array([a for a, _ in spans], dtype=np.int64)[span] + read - firsts[span]


def _decode(source: ParquetSource, groups: list[int], columns: list[str], keep: np.ndarray | None) -> pa.Table:
    """File ``columns`` of row ``groups``, the rows ``keep`` drops dropped."""
    if len(groups) == 1 and source.local:
        # A single row group has nothing to decode in parallel: handing it to pyarrow's pool
        # only adds latency (a point delete's read under load 7: 5.5 ms median vs 1.5 ms, the
        # same best; docs/benchmarks.md, "Deletes"), and the file reader decodes it without
        # a scanner's set-up (one 217k-row column: 1.5 ms against 2.3 ms). (Not from an
        # object store: the scanner coalesces the chunks' ranges into fewer requests.)
        with source.fragment.open() as file:
            reader = pq.ParquetFile(file, metadata=source.metadata)
            table = reader.read_row_group(groups[0], columns=columns, use_threads=False)
        return table if keep is None else table.filter(pa.array(keep))
    fragment = source.fragment
    if len(groups) < source.metadata.num_row_groups:
        fragment = fragment.subset(row_group_ids=groups)
    scanner = fragment.scanner(columns=columns, use_threads=len(groups) > 1)
    batches = scanner.to_batches()
    return pa.Table.from_batches(
        _drop_deleted(batches, keep) if keep is not None else batches, scanner.projected_schema
    )


def _kept_rows(deleted: BitMap, spans: list[tuple[int, int]]) -> np.ndarray:
    """A mask over the rows of the row groups read (``spans``): linear in those rows, and
    several times cheaper than np.isin of every position read."""
    dead = np.asarray(deleted.to_array(), dtype=np.int64)
    masks = []
    for a, b in spans:
        mask = np.ones(b - a, dtype=bool)
        mask[dead[np.searchsorted(dead, a) : np.searchsorted(dead, b)] - a] = False
        masks.append(mask)
    return np.concatenate(masks)


def _drop_deleted(batches: Iterator[pa.RecordBatch], keep: np.ndarray) -> Iterator[pa.RecordBatch]:
    """Each batch as the scan decodes it, filtered while the next ones decode on pyarrow's
    threads: a filter copies every column, and filtering the whole table after the read made
    a full scan with 1% of rows deleted 1.3x the clean scan (docs/benchmarks.md). Batches
    without deleted rows stay zero-copy."""
    mask = pa.array(keep)  # bit-packed once; a slice per batch is zero-copy
    offset = 0
    for batch in batches:
        end = offset + batch.num_rows
        yield batch if keep[offset:end].all() else batch.filter(mask.slice(offset, batch.num_rows))
        offset = end


def _starts(source: ParquetSource) -> np.ndarray:
    """Each row group's first row, and the file's rows last (kept with the footer)."""
    if "starts" not in source.derived:
        meta = source.metadata
        source.derived["starts"] = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    return source.derived["starts"]


def _leaves(source: ParquetSource) -> dict[str, int]:
    """``stats.leaf_columns`` of the file's schema (kept with the footer)."""
    if "leaves" not in source.derived:
        source.derived["leaves"] = leaf_columns(source.fragment.physical_schema)
    return source.derived["leaves"]


def _group_stats(source: ParquetSource, group: int, leaves: Mapping[str, int], name: str) -> ColumnStats | None:
    """Parquet footer stats of file column ``name`` in row ``group`` (``leaves``: flat columns
    -> their leaf chunks, ``stats.leaf_columns``), as they are stored; None when there are
    none. Kept with the footer: building them from pyarrow's statistics objects was most of a
    row group's pruning."""
    leaf = leaves.get(name)
    if leaf is None:
        return None
    key = ("stats", group, leaf)
    if key not in source.derived:
        row_group = source.metadata.row_group(group)
        stats = row_group.column(leaf).statistics
        found = None
        if stats is not None:
            nulls = stats.null_count if stats.has_null_count else None
            found = (
                ColumnStats(stats.min, stats.max, nulls, row_group.num_rows)
                if stats.has_min_max
                else (ColumnStats(None, None, nulls, row_group.num_rows))
            )
        probe = bloom_probes.membership(source, group, leaf)
        if probe is not None:
            found = dataclasses.replace(found or ColumnStats(row_count=row_group.num_rows), may_contain=probe)
        source.derived[key] = found
    return source.derived[key]


def _stats_lookup(
    file: DataFile, sources: Mapping[str, str], stored: Callable[[str], ColumnStats | None]
) -> Callable[[str], ColumnStats | None]:
    """Footer stats of some rows (a row group's, or a page's: ``stored``, by the file's column
    names) as ``ColumnStats`` keyed by table column name (``sources``: table column -> the
    file's column; a column the file lacks is unknown). Each bound is trusted only where the
    file's own stats have it: Parquet writers leave NaN out of a float max (SQL sorts NaN
    above every number), and our file stats record NaN by having no max; they also drop long
    strings, whose footer bounds may be truncated. Footer bounds of zoned timestamps are UTC
    datetimes already, as ours are."""

    def lookup(name: str) -> ColumnStats | None:
        column = sources.get(name)
        stats = stored(column) if column is not None else None
        if stats is None:
            return None
        known = file.stats.get(name)
        if known is None or (stats.min is None and stats.max is None):
            return ColumnStats(None, None, stats.null_count, stats.row_count, stats.may_contain)
        return ColumnStats(
            stats.min if known.min is not None else None,
            stats.max if known.max is not None else None,
            stats.null_count,
            stats.row_count,
            stats.may_contain,
        )

    return lookup

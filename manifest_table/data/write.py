"""Writing Parquet data files: rolled at a target size, row groups sized for range reads,
several files encoded at once, and each file's column statistics taken from the footer
its writer produced."""

from __future__ import annotations

import collections
import itertools
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..arguments import check_size
from ..errors import InvalidArgumentError, StoreError
from ..format.keys import DATA_PREFIX
from ..format.manifest import DataFile
from ..format.stats import FooterGaps, encode_stats, stats_from_parquet
from ..format.stored_schema import with_field_ids
from ..lazy import lazy
from ..storage import FileIO

if TYPE_CHECKING:
    from concurrent.futures import Future

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    pa = lazy("pyarrow")  # (a handle holds its WriteOptions: opening a table imports this module)
    pc = lazy("pyarrow.compute")
    pq = lazy("pyarrow.parquet")

MAX_FILE_ROWS = 2**32 - 1  # deletion bitmaps address rows with 32 bits


@dataclass(frozen=True)
class WriteOptions:
    target_file_size: int = 128 * 1024 * 1024
    """Bytes of Parquet per data file before a new one starts."""
    row_group_size: int = 16 * 1024 * 1024
    """Uncompressed Arrow bytes per row group: big enough for efficient scans, small
    enough that a selective read fetches little (row groups are the range-read unit)."""
    compression: str = "zstd"
    """A Parquet codec: none, snappy, gzip, brotli, lz4, lz4_raw or zstd."""

    def __post_init__(self) -> None:  # sizes may be given as "128MiB"
        object.__setattr__(self, "target_file_size", check_size("target_file_size", self.target_file_size))
        object.__setattr__(self, "row_group_size", check_size("row_group_size", self.row_group_size))
        codec = self.compression.lower() if isinstance(self.compression, str) else None
        # (zstd, the default, is in every pyarrow build: not asking keeps opening a table
        # from importing pyarrow.)
        if codec not in _CODECS or (codec not in ("none", "zstd") and not pa.Codec.is_available(_CODECS[codec])):
            raise InvalidArgumentError(
                f"compression must be one of {sorted(_CODECS)} (available in this "
                f"pyarrow build), not {self.compression!r}"
            )


_CODECS = {
    "none": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "zstd": "zstd",
}
"""Parquet codec names pyarrow's writer accepts -> the Arrow codec that implements them."""


def new_data_key() -> str:
    return f"{DATA_PREFIX}{uuid.uuid4().hex}.parquet"


def write_data_files(
    io: FileIO,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    options: WriteOptions = WriteOptions(),
    max_workers: int | None = None,
    field_ids: Sequence[int] | None = None,
    file_rows: int | None = None,
    physical_names: Sequence[str] | None = None,
    bloom_filter_columns: Sequence[str] = (),
) -> list[DataFile]:
    """Write ``batches`` (already conforming to ``schema``) into new data files, in order:
    rows keep their input order across the returned files. Up to ``max_workers`` files
    (default: one per core) are encoded at once, since pyarrow's Parquet writer encodes a file
    on one thread; at most ``MAX_BUFFERED`` bytes of input wait for a writer.

    If anything fails (a stream that raises midway, a full disk), every file this call
    started, partial ones included, is removed before the error propagates; local I/O errors
    become ``StoreError``. A schema no file could be written in (a table made by another
    writer with a float16 column) fails before any file is started. ``field_ids``: the
    table's, written into the files' Parquet schema so that readers resolve their columns by
    id (format/field_ids.py). ``file_rows``: cut the files by rows instead of bytes, every
    file but the last holding exactly that many, and never split the last one to keep a
    thread busy (compaction: outputs of the sizes it planned, not halves that would be small
    files again for its next run). ``physical_names``: the names the files carry the columns
    under (``FieldIds.physical_names``) where they differ from the schema's; the entries'
    stats keep the schema's names. ``bloom_filter_columns``: columns (by the schema's names)
    each row group keeps a bloom filter of (the table's property of that name)."""
    from ..format.schema import check_schema  # (opening a table imports this module for WriteOptions)

    check_schema(schema, appending=True)
    table_schema = schema
    keys: list[str] = []
    source = _Source(batches)
    table_names = schema.names
    names = list(physical_names) if physical_names is not None else schema.names
    blooms = [names[table_names.index(c)] for c in bloom_filter_columns if c in table_names]
    file_batches: Iterable[pa.RecordBatch] = source
    if names != schema.names:
        file_batches = (batch.rename_columns(names) for batch in source)
        schema = pa.schema([f.with_name(n) for f, n in zip(schema, names)], metadata=schema.metadata)
    try:
        workers = max_workers or max(1, os.cpu_count() or 1)
        files = _write(io, file_batches, schema, options, keys, workers, field_ids, file_rows, blooms)
    except BaseException as exc:
        io.store.delete_unreferenced(keys)
        if isinstance(exc, OSError) and not source.failed:
            raise StoreError(f"writing data file {keys[-1] if keys else ''} failed: {exc}") from exc
        raise
    if names != table_names:
        table_name = dict(zip(names, table_names))
        files = [replace(f, stats={table_name[n]: s for n, s in f.stats.items()}) for f in files]
    # Encoded once, as a manifest stores them: a file stays in the root's tail for up to
    # ``tail_limit`` commits, each of which writes its entry again.
    return [replace(f, encoded_stats=encode_stats(f.stats, table_schema)) for f in files]


class _Source:
    """The caller's batches, remembering whether they raised: an ``OSError`` from the
    caller's stream (a dropped connection) is the caller's, not a failure of our store."""

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self._batches = iter(batches)
        self.failed = False

    def __iter__(self) -> _Source:
        return self

    def __next__(self) -> pa.RecordBatch:
        try:
            return next(self._batches)
        except StopIteration:
            raise
        except BaseException:
            self.failed = True
            raise


def _write(
    io: FileIO,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    options: WriteOptions,
    keys: list[str],
    workers: int,
    field_ids: Sequence[int] | None,
    file_rows: int | None,
    blooms: Sequence[str],
) -> list[DataFile]:
    """Cut the row groups into files on this thread (where the caller's stream is read) and
    encode the files on ``workers`` threads; an input of one small row group is encoded here
    (an update of one row: starting and joining a thread cost 0.2 ms on a quiet machine, up
    to 6 ms under load, for nothing to overlap)."""
    flow = _Flow(MAX_BUFFERED)
    file_schema = schema if field_ids is None else with_field_ids(schema, field_ids)
    groups = _row_groups(batches, schema, options.row_group_size)
    first = next(groups, None)
    if first is None:
        return []
    dictionary = dictionary_columns(first)
    delta = delta_columns(schema, dictionary)
    codecs = column_codecs(first, options.compression, dictionary, delta)
    encoding = _Encoding(dictionary, delta, bloom_options(blooms, first.num_rows), codecs)
    max_rows = min(file_rows or MAX_FILE_ROWS, MAX_FILE_ROWS)
    second = next(groups, None)
    if second is None and first.nbytes <= INLINE_BYTES and first.num_rows <= max_rows:
        keys.append(new_data_key())
        jobs = _Jobs()
        flow.take(first.nbytes)
        jobs.put_all([first])
        small = replace(encoding, compression="none") if first.nbytes <= UNCOMPRESSED_BYTES else encoding
        return [_write_file(io, keys[-1], schema, file_schema, small, jobs, flow)]
    from concurrent.futures import ThreadPoolExecutor  # (as check_schema: with the first write)

    futures: list[Future[DataFile]] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mt-write") as pool:

        def start_file() -> _Jobs:
            keys.append(new_data_key())
            jobs = _Jobs()
            futures.append(pool.submit(_write_file, io, keys[-1], schema, file_schema, encoding, jobs, flow))
            return jobs

        try:
            target = options.target_file_size if file_rows is None else sys.maxsize
            rest = itertools.chain([first], [second] if second is not None else [], groups)
            last = _cut(rest, target, max_rows, flow, start_file)
            # The input has ended: while a thread would stay idle, the second half of the
            # last file's unencoded row groups becomes a file of its own (an append of one
            # file's worth or less uses every core too).
            while file_rows is None and sum(not f.done() for f in futures) < workers and (tail := last.split_tail()):
                last = start_file()
                last.put_all(tail)
        except _Aborted:
            pass  # an encoding thread failed: its error is raised below
        except BaseException:
            flow.abort()
            raise
    errors = [e for f in futures if (e := f.exception()) is not None]
    if errors:
        raise next((e for e in errors if not isinstance(e, _Aborted)), errors[0])
    return [f.result() for f in futures]


INLINE_BYTES = 1024 * 1024
"""An input of one row group up to this many Arrow bytes is encoded on the calling thread."""

UNCOMPRESSED_BYTES = 4096
"""An input of one row group up to this many Arrow bytes is written without compression:
there a codec's frames cost more bytes than they save (one row of ten columns: 2,794 bytes
with zstd, 2,704 without), and setting up a codec per column took 0.2 ms of a 1-row file's
0.4 ms of encoding (an update of one row)."""


def _cut(groups: Iterator[pa.Table], target: int, max_rows: int, flow: _Flow, start_file: Callable[[], _Jobs]) -> _Jobs:
    """Queue each row group to its file, in order; return the last file's queue. A file ends
    once its estimated Parquet size reaches ``target`` (its Arrow bytes times the
    compression ratio measured so far) or it holds ``max_rows`` rows: a row group that would
    take it past them is cut there."""
    group: pa.Table | None = next(groups)
    while True:
        jobs = start_file()
        try:
            rows = arrow_bytes = 0
            while group is not None and rows < max_rows and (rows == 0 or flow.estimate(arrow_bytes, target) < target):
                piece, rest = group.slice(0, max_rows - rows), group.slice(max_rows - rows)
                flow.take(piece.nbytes)
                jobs.put(piece)
                rows += piece.num_rows
                arrow_bytes += piece.nbytes
                group = rest if rest.num_rows else next(groups, None)
        finally:
            jobs.close()  # on failure too: the file's thread then sees the abort and stops
        if group is None:
            return jobs


class _Jobs:
    """The row groups queued for one file, in order. Once the input has ended, the groups
    not yet taken by the file's thread can move to a new file: they hold the last rows."""

    def __init__(self) -> None:
        self._groups: collections.deque[pa.Table] = collections.deque()
        self._closed = False
        self._cond = threading.Condition()

    def put(self, group: pa.Table) -> None:
        with self._cond:
            self._groups.append(group)
            self._cond.notify()

    def put_all(self, groups: list[pa.Table]) -> None:
        with self._cond:
            self._groups.extend(groups)
            self._closed = True
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def get(self) -> pa.Table | None:
        """The next group, or None once the file is complete."""
        with self._cond:
            while not self._groups and not self._closed:
                self._cond.wait()
            return self._groups.popleft() if self._groups else None

    def split_tail(self) -> list[pa.Table]:
        """Remove and return the second half of the groups not yet taken (of a closed queue)."""
        with self._cond:
            return [self._groups.pop() for _ in range(len(self._groups) // 2)][::-1]


MAX_BUFFERED = 512 * 1024 * 1024
"""Arrow bytes cut from the input but not yet encoded. Enough for a second file to start
while the first is still being encoded (both cores busy), small enough that a streamed
10M-row append peaks well under 1 GiB (docs/benchmarks.md, "Writing")."""


class _Aborted(Exception):
    """Another thread of the same write failed: stop, the file will be removed."""


class _Flow:
    """What the cutting thread and the encoding threads share: the bytes in flight (the
    cutter waits while they exceed the budget) and the compression ratio measured so far."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._cond = threading.Condition()
        self._in_flight = 0
        self._arrow = self._parquet = 0
        self._failed = False

    def take(self, nbytes: int) -> None:
        with self._cond:
            while self._in_flight and self._in_flight + nbytes > self._budget and not self._failed:
                self._cond.wait()
            if self._failed:
                raise _Aborted()
            self._in_flight += nbytes

    def written(self, arrow_bytes: int, parquet_bytes: int) -> None:
        with self._cond:
            self._in_flight -= arrow_bytes
            self._arrow += arrow_bytes
            self._parquet += parquet_bytes
            self._cond.notify_all()

    def estimate(self, arrow_bytes: int, target: int) -> float:
        """Parquet bytes that ``arrow_bytes`` of input will take. Below the target in Arrow
        bytes no ratio is needed (encoding rarely grows data); above, the cutter waits for
        the first row group to be measured."""
        with self._cond:
            while not self._arrow and arrow_bytes >= target and self._in_flight and not self._failed:
                self._cond.wait()
            if self._failed:
                raise _Aborted()
            return arrow_bytes * (self._parquet / self._arrow if self._arrow else 1.0)

    def abort(self) -> None:
        with self._cond:
            self._failed = True
            self._cond.notify_all()

    def check(self) -> None:
        if self._failed:
            raise _Aborted()


@dataclass(frozen=True)
class _Encoding:
    """How the columns of one write are encoded: the same for all its files."""

    dictionary: list[str] | bool
    """Columns dictionary-encoded (``dictionary_columns``)."""
    delta: dict[str, str] | None
    """Per-column encodings for the others (``delta_columns``)."""
    bloom: dict[str, dict[str, float]] | None
    """Bloom filters to keep (``bloom_options``)."""
    compression: str | dict[str, str]
    """The codec, or each Parquet column's (``column_codecs``)."""


def _write_file(
    io: FileIO,
    key: str,
    schema: pa.Schema,
    file_schema: pa.Schema,
    encoding: _Encoding,
    jobs: _Jobs,
    flow: _Flow,
) -> DataFile:
    """Encode the row groups queued for one file; its stats come from the footer written.
    ``file_schema`` is ``schema`` with the columns' field ids, when the table has them."""
    rows, gaps = 0, FooterGaps(schema)
    try:
        with io.create(key) as sink:
            with pq.ParquetWriter(
                sink,
                file_schema,
                compression=encoding.compression,
                use_dictionary=encoding.dictionary,
                column_encoding=encoding.delta,
                write_statistics=True,
                write_page_index=True,
                bloom_filter_options=encoding.bloom,
            ) as writer:
                while (group := jobs.get()) is not None:
                    flow.check()
                    before = sink.tell()
                    try:
                        writer.write_table(group, row_group_size=group.num_rows)
                        gaps.add(group)
                    finally:
                        flow.written(group.nbytes, sink.tell() - before)
                    rows += group.num_rows
                flow.check()
            size = sink.tell()
    except BaseException as exc:
        flow.abort()
        if isinstance(exc, OSError):  # (the caller's stream is read on another thread)
            raise StoreError(f"writing data file {key} failed: {exc}") from exc
        raise
    return DataFile(key, rows, size, stats_from_parquet(writer.writer.metadata, schema, gaps))


BLOOM_FPP = 0.01
"""The false-positive rate a row group's bloom filter is sized for (parquet-mr's and
Iceberg's default): a lookup of a value the group lacks reads the group at most about once
in a hundred. pyarrow rounds the bitset up to a power of two, so the rate is often lower:
the 217,493 rows of a 10-column file's row group get 512 KiB (19.3 bits a row), and 0.07% of
the groups lacking a key were read, against 1.5% at 0.02 (256 KiB), where a lookup in the 46
groups of 10M rows decoded a needless 217k-row key chunk two times in three (lookups
0.92x, deletes and updates 0.88x; +4.3% of the file for a random int64 key, +9% in all)."""


def bloom_options(columns: Sequence[str], rows: int) -> dict[str, dict[str, float]] | None:
    """pyarrow's ``bloom_filter_options`` for ``columns``, sized for ``rows`` distinct values
    per row group (the first row group's rows: later ones are cut to the same bytes)."""
    return {name: {"ndv": max(rows, 1), "fpp": BLOOM_FPP} for name in columns} or None


def dictionary_columns(group: pa.Table, sample_rows: int = 10_000) -> list[str] | bool:
    """The columns worth dictionary-encoding, judged on a sample of the first row group:
    those whose values repeat (at most half distinct). pyarrow's writer otherwise tries a
    dictionary for every column of every row group and falls back to plain encoding past
    1 MiB of dictionary; for high-cardinality columns that attempt doubled the CPU time of
    an append (10 mixed columns, 16 MiB row groups: 1.42 s -> 0.60 s per 2M rows, the same
    encodings where it fits; docs/benchmarks.md, "Writing"). Nested columns (whose leaves
    the list would have to name) keep pyarrow's default: True, every column."""
    if any(pa.types.is_nested(f.type) for f in group.schema):
        return True
    if group.num_rows == 1:  # (no value repeats: the count of each column, 0.12 ms, says so)
        return [f.name for f in group.schema if pa.types.is_dictionary(f.type)]
    sample = group.slice(0, sample_rows)
    return [
        f.name
        for f, column in zip(sample.schema, sample.columns)
        if pa.types.is_dictionary(f.type) or pc.count_distinct(column).as_py() * 2 <= len(column)
    ]


SAVED_AT_LEAST = 0.10
"""A column keeps the table's codec only where it saves at least this share of the column's
bytes: on data that delta or dictionary encoding has already packed (random keys,
timestamps, floats, dictionary indexes) zstd saves 0-6% and doubles the decode (a 5M-row
random int64 key: 14.8 against 15.2 MB, read in 25.4 against 12.1 ms), which every scan and
every lookup by that column pays. At 10% the bytes a reader saves about pay for their
decompression even on a 100 MB/s stream from an object store (Arrow's IPC writer has the
same rule, ``min_space_savings``)."""

CODEC_SAMPLE_FROM_BYTES = INLINE_BYTES
"""An input whose first row group is smaller keeps the codec on every column: its decode is
short (compaction judges its rows again when it rewrites them into larger files)."""


def column_codecs(
    group: pa.Table,
    codec: str,
    dictionary: list[str] | bool,
    delta: dict[str, str] | None,
    sample_rows: int = 10_000,
) -> str | dict[str, str]:
    """The codec of each Parquet column (by its path), judged on a sample of the first row
    group encoded as the files will be: ``codec`` where it saves at least
    ``SAVED_AT_LEAST`` of the column's bytes, none elsewhere; a column of which the sample
    holds less than ``JUDGED_FROM_BYTES`` (nulls, booleans) keeps the codec, too little to
    judge its later rows by. The sample is at most an eighth of the group (about 2 ms for
    10,000 rows of ten columns), and the codec's work it saves on the columns left
    uncompressed pays for it."""
    if codec.lower() == "none" or group.nbytes < CODEC_SAMPLE_FROM_BYTES:
        return codec
    sink = pa.BufferOutputStream()
    sample = group.slice(0, min(sample_rows, max(1, group.num_rows // 8)))
    pq.write_table(
        sample, sink, compression=codec, use_dictionary=dictionary, column_encoding=delta, write_statistics=False
    )
    meta = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.row_group(0)
    chunks = [meta.column(i) for i in range(meta.num_columns)]
    kept = 1 - SAVED_AT_LEAST
    return {
        c.path_in_schema: codec
        if c.total_uncompressed_size < JUDGED_FROM_BYTES or c.total_compressed_size <= kept * c.total_uncompressed_size
        else "none"
        for c in chunks
    }


JUDGED_FROM_BYTES = 4096
"""The bytes of a column in ``column_codecs``' sample below which it keeps the codec."""


def delta_columns(schema: pa.Schema, dictionary: list[str] | bool) -> dict[str, str] | None:
    """DELTA_BINARY_PACKED for the integer-like columns (integers, dates, times, timestamps,
    durations) not dictionary-encoded. A point delete or lookup decodes the whole key column
    of its row group, and for plain encoding most of that is decompressing it (zstd: 2.8 of
    4.4 ms for a 275k-row int64 group). Delta-encoded, a clustered key (the case where
    row-group stats prune at all) takes a few bytes per thousand rows and decodes ~10x
    faster; random integers came out 20-25% smaller than plain + zstd and decoded 1.4-3x
    faster (docs/benchmarks.md, "Deletes"). Standard Parquet: every reader decodes it."""
    if dictionary is True:
        return None
    encoded = dictionary or []
    chosen = {f.name: "DELTA_BINARY_PACKED" for f in schema if f.name not in encoded and _delta_encodable(f.type)}
    return chosen or None


def _delta_encodable(t: pa.DataType) -> bool:
    """Stored as Parquet INT32 / INT64, the physical types DELTA_BINARY_PACKED encodes."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


def _row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema, group_bytes: int) -> Iterator[pa.Table]:
    """Re-chunk a stream of batches into tables of about ``group_bytes`` each."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_bytes += batch.nbytes
        while pending_bytes >= group_bytes:
            table = pa.Table.from_batches(pending, schema)
            rows = max(1, int(table.num_rows * group_bytes / pending_bytes))
            yield table.slice(0, rows)
            rest = table.slice(rows)
            pending = rest.to_batches()
            pending_bytes = rest.nbytes if rest.num_rows else 0
    if pending:
        yield pa.Table.from_batches(pending, schema)

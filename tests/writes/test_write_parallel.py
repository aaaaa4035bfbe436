"""Several data files encoded at once: rows keep their order, a failure on any thread removes
every file started, the input is not read further ahead than the buffer allows, and each
file's stats, taken from its Parquet footer, equal what computing them from the rows gives."""

from __future__ import annotations

import decimal
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from manifest_table.data import write
from manifest_table.data.write import WriteOptions, write_data_files
from manifest_table.errors import InvalidArgumentError, StoreError
from manifest_table.format.stats import FooterGaps, encode_stats, stats_from_parquet, table_stats
from manifest_table.storage import FileIO, LocalStore, MemoryStore
from tests.catalog import object_listing

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def batches(stop: int, size: int = 1000, fail_at: int | None = None) -> Iterator[pa.RecordBatch]:
    for start in range(0, stop, size):
        if start == fail_at:
            raise ConnectionError("the source went away")
        ids = np.arange(start, min(stop, start + size))
        yield pa.record_batch({"id": ids, "name": pa.array([f"n{i}" for i in ids])}, schema=SCHEMA)


def read_back(store: LocalStore, files: list) -> pa.Table:
    return pa.concat_tables([pq.read_table(os.path.join(store.root, f.path)) for f in files])


def test_files_written_at_once_keep_the_input_order(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "t")
    data = pa.Table.from_batches(list(batches(50_000)))
    files = write_data_files(
        FileIO(store),
        data.to_batches(),
        SCHEMA,
        WriteOptions(target_file_size=8_000, row_group_size=4_000),
        max_workers=3,
    )
    assert len(files) >= 3
    assert read_back(store, files).equals(data)
    for f in files:
        rows = pq.read_table(os.path.join(store.root, f.path))
        assert (f.rows, f.size) == (rows.num_rows, os.path.getsize(os.path.join(store.root, f.path)))
        assert dict(f.stats) == table_stats(rows)


def test_one_file_worth_is_split_so_every_thread_encodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the input has ended, the tail of the last file's row groups not yet encoded goes
    to a new file while a thread would stay idle (here the first file's thread is held until
    another thread writes)."""
    real = pq.ParquetWriter.write_table
    threads: list[str] = []
    second = threading.Event()

    def write_table(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        threads.append(threading.current_thread().name)
        if threads[-1] != threads[0]:
            second.set()
        second.wait(timeout=10)
        real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    store = LocalStore(tmp_path / "t")
    data = pa.Table.from_batches(list(batches(20_000)))
    files = write_data_files(
        FileIO(store), data.to_batches(), SCHEMA, WriteOptions(row_group_size=20_000), max_workers=2
    )
    assert len(files) == 2 and len(set(threads)) == 2 and second.is_set()
    assert files[0].rows > files[1].rows > 0
    assert read_back(store, files).equals(data)
    one = write_data_files(FileIO(store), data.to_batches(), SCHEMA, WriteOptions(row_group_size=20_000), max_workers=1)
    assert len(one) == 1


def test_an_encoding_thread_failing_removes_every_file_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first file stays open until another file's thread fails (the disk fills); the
    error raised is that failure, not the first file's stop."""
    monkeypatch.setattr(write, "MAX_FILE_ROWS", 1000)  # files cut by rows: no size estimate needed
    store = LocalStore(tmp_path / "t")
    real = pq.ParquetWriter.write_table
    threads: list[str] = []
    failed = threading.Event()

    def write_table(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        threads.append(threading.current_thread().name)
        if table["id"][0].as_py() != 0:  # (not the first file)
            failed.set()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        assert failed.wait(timeout=60)
        real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    with pytest.raises(StoreError, match="No space left"):
        write_data_files(FileIO(store), batches(50_000), SCHEMA, WriteOptions(row_group_size=10_000), max_workers=2)
    assert len(set(threads)) == 2
    assert object_listing(store) == {}


def test_files_are_cut_to_the_row_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write, "MAX_FILE_ROWS", 3000)
    store = LocalStore(tmp_path / "t")
    files = write_data_files(FileIO(store), batches(10_000), SCHEMA, WriteOptions(row_group_size=10_000))
    # At least 4 files of at most 3,000 rows (an idle thread may take a file's tail: more files).
    assert len(files) >= 4 and all(f.rows <= 3000 for f in files) and files[0].rows > 2500
    assert read_back(store, files).equals(pa.Table.from_batches(list(batches(10_000))))


def test_files_cut_by_rows_hold_exactly_that_many_and_the_tail_is_never_split(tmp_path: Path) -> None:
    """What compaction asks for: its outputs' sizes are planned, so the files are cut by rows
    alone (not at the 1 kB target) and the last is never split to keep a thread busy,
    whatever the threads' timing (a 20,000-row file of ten row groups is what gets split)."""
    store = LocalStore(tmp_path / "t")
    data = pa.Table.from_batches(list(batches(20_000)))
    for rows in (3_000, 20_000, 25_000):
        files = write_data_files(
            FileIO(store),
            data.to_batches(),
            SCHEMA,
            WriteOptions(target_file_size=1_000, row_group_size=2_000),
            max_workers=2,
            file_rows=rows,
        )
        assert [f.rows for f in files] == [rows] * (20_000 // rows) + ([20_000 % rows] if 20_000 % rows else [])
        assert read_back(store, files).equals(data)
    few = pa.Table.from_batches(list(batches(5)))  # one small row group: encoded on the calling thread
    files = write_data_files(FileIO(store), few.to_batches(), SCHEMA, file_rows=2)
    assert [f.rows for f in files] == [2, 2, 1] and read_back(store, files).equals(few)


@pytest.mark.parametrize("make_store", [MemoryStore, lambda: None], ids=["memory", "local"])
def test_a_stream_failing_with_files_in_flight_removes_them_all(make_store: Any, tmp_path: Path) -> None:
    store = make_store() or LocalStore(tmp_path / "t")
    with pytest.raises(ConnectionError):
        write_data_files(
            FileIO(store),
            batches(50_000, fail_at=40_000),
            SCHEMA,
            WriteOptions(target_file_size=20_000, row_group_size=10_000),
            max_workers=2,
        )
    assert object_listing(store) == {}


def test_the_input_is_read_at_most_a_buffer_ahead_of_the_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What bounds the memory of a streamed append: batches cut from the input but not yet
    encoded stay under ``MAX_BUFFERED`` (plus the one row group being cut)."""
    monkeypatch.setattr(write, "MAX_BUFFERED", 200_000)
    real = pq.ParquetWriter.write_table
    lock = threading.Lock()
    pulled, written, ahead = [0], [0], []

    def source() -> Iterator[pa.RecordBatch]:
        for batch in batches(200_000):
            with lock:
                pulled[0] += batch.nbytes
                ahead.append(pulled[0] - written[0])
            yield batch

    def write_table(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        real(self, table, *args, **kwargs)
        with lock:
            written[0] += table.nbytes

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    store = LocalStore(tmp_path / "t")
    files = write_data_files(
        FileIO(store), source(), SCHEMA, WriteOptions(target_file_size=50_000, row_group_size=30_000), max_workers=2
    )
    assert read_back(store, files).equals(pa.Table.from_batches(list(batches(200_000))))
    assert max(ahead) <= 200_000 + 2 * 30_000


def test_a_row_group_larger_than_the_whole_buffer_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The buffer bounds what waits beside a row group, never the row group itself: with
    nothing in flight, a group larger than ``MAX_BUFFERED`` goes through."""
    monkeypatch.setattr(write, "MAX_BUFFERED", 1_000)
    store = LocalStore(tmp_path / "t")
    data = pa.Table.from_batches(list(batches(30_000)))
    files = write_data_files(
        FileIO(store), data.to_batches(), SCHEMA, WriteOptions(target_file_size=5_000, row_group_size=60_000)
    )
    assert len(files) >= 2 and read_back(store, files).equals(data)


def test_files_are_cut_near_the_target_in_parquet_bytes(tmp_path: Path) -> None:
    """The target is Parquet bytes: the cutter scales Arrow bytes by the compression ratio the
    encoders measured (here about 1:20), waiting for the first measurement before it cuts
    a file, so no file is cut at the target's worth of Arrow bytes, and none grows past it."""
    store = LocalStore(tmp_path / "t")
    rows = 1_000_000
    words = pa.array([f"name {i:03d}" for i in range(100)])
    data = pa.table({"id": np.arange(rows), "name": words.take(np.random.default_rng(5).integers(0, 100, rows))})
    target = 150_000
    files = write_data_files(
        FileIO(store), data.to_batches(), SCHEMA, WriteOptions(target_file_size=target, row_group_size=400_000)
    )
    arrow_per_parquet = data.nbytes / sum(f.size for f in files)
    assert arrow_per_parquet > 10
    assert len(files) >= 3 and files[0].size >= target // 2
    assert all(f.size <= 2 * target for f in files)
    assert read_back(store, files).equals(data)


def test_an_input_of_empty_batches_writes_no_file(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "t")
    empty = pa.record_batch({"id": pa.array([], pa.int64()), "name": pa.array([], pa.string())})
    assert write_data_files(FileIO(store), [empty, empty], SCHEMA) == []
    assert object_listing(store) == {}


class _WithoutBrotli:
    """pyarrow as a build without brotli shows it (``Codec`` is an immutable type)."""

    class Codec:
        @staticmethod
        def is_available(name: str) -> bool:
            return name != "brotli"


def test_a_codec_this_pyarrow_lacks_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write, "pa", _WithoutBrotli())
    with pytest.raises(InvalidArgumentError, match="compression must be one of .* not 'brotli'"):
        WriteOptions(compression="brotli")
    assert WriteOptions(compression="GZIP").compression == "GZIP"


def mixed_table(rows: int, seed: int) -> pa.Table:
    """Nulls everywhere, NaN in one float column, strings around the 256-character limit,
    zoned timestamps in every unit, decimals, dates, unsigned and nested columns."""
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.1

    def arr(values: Any, type: pa.DataType) -> pa.Array:
        return pa.array(values, type, mask=nulls if not isinstance(values, pa.Array) else None)

    floats = rng.normal(size=rows)
    with_nan = np.where(rng.random(rows) < 0.01, np.nan, floats)
    lengths = rng.choice([1, 10, 255, 256, 257, 300, 5000], size=rows, p=[0.3, 0.3, 0.1, 0.1, 0.1, 0.05, 0.05])
    text = [chr(0x61 + int(rng.integers(0, 26))) * int(n) + ("é" if i % 7 == 0 else "") for i, n in enumerate(lengths)]
    ints = rng.integers(-(2**62), 2**62, rows)
    return pa.table(
        {
            "i64": arr(ints, pa.int64()),
            "i8": arr(ints % 100, pa.int8()),
            "u64": arr(rng.integers(0, 2**63, rows).astype(np.uint64) * 2, pa.uint64()),
            "f64": arr(floats, pa.float64()),
            "f32_nan": arr(with_nan.astype(np.float32), pa.float32()),
            "all_nan": pa.array(np.full(rows, np.nan)),
            "bool": arr(rng.random(rows) < 0.5, pa.bool_()),
            "short": arr([f"s{v}" for v in ints], pa.string()),
            "long": arr(["m" * int(n) for n in lengths], pa.string()),
            "accents": arr(text, pa.string()),
            "large": arr(text, pa.large_string()),
            "bin": arr([b"x" * int(n % 9) for n in ints], pa.binary()),
            "ts_s_paris": arr(ints % 10**10, pa.timestamp("s", tz="Europe/Paris")),
            "ts_ms": arr(ints % 10**13, pa.timestamp("ms")),
            "ts_us_utc": arr(ints % 10**16, pa.timestamp("us", tz="UTC")),
            "ts_ns_ny": arr(ints, pa.timestamp("ns", tz="America/New_York")),
            "date32": arr((ints % 100_000).astype(np.int32), pa.date32()),
            "date64": arr((ints % 100_000) * 86_400_000, pa.date64()),
            "dec": arr([decimal.Decimal(int(v % 10**9)).scaleb(-3) for v in ints], pa.decimal128(18, 3)),
            "dec_big": arr([decimal.Decimal(int(v)) for v in ints], pa.decimal128(38, 0)),
            "nulls": pa.nulls(rows, pa.int32()),
            "list": arr([[int(v), None] for v in ints], pa.list_(pa.int64())),
            "struct": arr([{"a": int(v), "b": "x"} for v in ints], pa.struct([("a", pa.int64()), ("b", pa.string())])),
            "dict": arr([f"d{v % 5}" for v in ints], pa.string()).dictionary_encode(),
            "time": arr((ints % 86_400).astype(np.int32), pa.time32("s")),
        }
    )


@pytest.mark.parametrize("seed", range(4))
def test_stats_from_the_footer_equal_stats_from_the_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = mixed_table(int(rng.integers(1, 3000)), seed)
    if seed == 1:  # one row: row groups of one row and empty ones
        table = table.slice(0, 1)
    sink, gaps = pa.BufferOutputStream(), FooterGaps(table.schema)
    with pq.ParquetWriter(sink, table.schema) as writer:
        for piece in (table.slice(0, table.num_rows // 3), table.slice(table.num_rows // 3)):
            writer.write_table(piece, row_group_size=max(1, piece.num_rows // 2))
            gaps.add(piece)
    footer = stats_from_parquet(writer.writer.metadata, table.schema, gaps)
    expected = table_stats(table)
    assert footer == expected
    assert encode_stats(footer, table.schema) == encode_stats(expected, table.schema)
    if seed != 1:  # the cases arose
        assert footer["long"].min is None and footer["short"].min is not None and footer["f32_nan"].max is None


def test_stats_of_values_only_the_rows_can_judge() -> None:
    """Zero signs, infinities, a NaN after the first row group (the min of the numbers stands, no
    max), all-null row groups."""
    table = pa.table(
        {
            "f": pa.array([None, None, -0.0, 0.0, float("inf"), 1.0]),
            "g": pa.array([1.0, 2.0, 3.0, 4.0, None, float("nan")]),
            "s": pa.array([None, None, "b", "a", "é", None]),
        }
    )
    sink, gaps = pa.BufferOutputStream(), FooterGaps(table.schema)
    with pq.ParquetWriter(sink, table.schema) as writer:
        for i in range(0, 6, 2):
            writer.write_table(table.slice(i, 2))
            gaps.add(table.slice(i, 2))
    footer = stats_from_parquet(writer.writer.metadata, table.schema, gaps)
    assert footer == table_stats(table)
    assert (
        footer["f"].max == float("inf") and (footer["g"].min, footer["g"].max) == (1.0, None) and footer["s"].max == "é"
    )


def test_timestamp_stats_keep_zone_and_nanoseconds() -> None:
    value = pa.array([1_700_000_000_123_456_789], pa.timestamp("ns", tz="Asia/Kolkata"))
    table = pa.table({"t": value})
    sink, gaps = pa.BufferOutputStream(), FooterGaps(table.schema)
    with pq.ParquetWriter(sink, table.schema) as writer:
        writer.write_table(table)
        gaps.add(table)
    stats = stats_from_parquet(writer.writer.metadata, table.schema, gaps)["t"]
    assert stats.min == value[0].as_py() and stats.min.tzinfo is not None
    assert encode_stats({"t": stats}, table.schema)["t"]["min"] == 1_700_000_000_123_456_789


def test_integer_like_columns_are_delta_encoded_and_read_back(tmp_path: Path) -> None:
    """Integer-like columns not dictionary-encoded are DELTA_BINARY_PACKED (why: write.delta_columns);
    they read back as written, and their footer stats are those of the rows."""
    table = mixed_table(3000, 5)
    table = table.select([f.name for f in table.schema if not pa.types.is_nested(f.type)])
    table = table.append_column("dur", pa.array(np.arange(3000) * 7, pa.duration("us")))
    store = LocalStore(tmp_path / "t")
    files = write_data_files(FileIO(store), table.to_batches(max_chunksize=700), table.schema, max_workers=1)
    meta = pq.ParquetFile(os.path.join(store.root, files[0].path)).metadata
    encodings = {meta.schema.column(i).name: meta.row_group(0).column(i).encodings for i in range(meta.num_columns)}
    delta = sorted(name for name, found in encodings.items() if "DELTA_BINARY_PACKED" in found)
    assert {"i64", "u64", "ts_ms", "ts_ns_ny", "date64", "time", "dur"} <= set(delta)
    assert not set(delta) & {"dict", "f64", "short", "dec", "bool"}
    back = read_back(store, files).cast(table.schema)
    assert all(back.column(name).equals(table.column(name)) for name in delta)
    assert [f.stats for f in files] == [table_stats(table)]


@pytest.mark.parametrize("rows, codec", [(1, "UNCOMPRESSED"), (3000, "ZSTD")])
def test_a_file_of_a_few_rows_is_written_uncompressed(tmp_path: Path, rows: int, codec: str) -> None:
    """A single row group of at most ``UNCOMPRESSED_BYTES`` (an update of one row) is written
    without a codec, which would only add bytes there; larger inputs use the table's."""
    table = pa.Table.from_batches(list(batches(rows)))
    store = LocalStore(tmp_path / "t")
    (file,) = write_data_files(FileIO(store), table.to_batches(), SCHEMA, WriteOptions(compression="zstd"))
    meta = pq.ParquetFile(os.path.join(store.root, file.path)).metadata
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {codec}
    assert read_back(store, [file]).equals(table) and file.stats == table_stats(table)


def test_a_column_the_codec_barely_shrinks_is_written_uncompressed(tmp_path: Path) -> None:
    """Judged on a sample of the first row group: random integers (delta-encoded, nothing
    left for zstd) are stored uncompressed, which halves their decode; repetitive strings
    keep the codec. Every file of the write makes the same choice, and reads back the same."""
    rng = np.random.default_rng(7)
    rows = 1_200_000
    table = pa.table(
        {"id": rng.integers(0, 2**40, rows), "name": pa.array([f"customer {i % 5_000:06d}" for i in range(rows)])}
    )
    store = LocalStore(tmp_path / "t")
    files = write_data_files(
        FileIO(store),
        table.to_batches(),
        SCHEMA,
        WriteOptions(compression="zstd", target_file_size=6_000_000, row_group_size="5MiB"),
    )
    assert len(files) >= 2
    for f in files:
        meta = pq.ParquetFile(os.path.join(store.root, f.path)).metadata
        for g in range(meta.num_row_groups):
            codecs = {
                meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i).compression for i in range(2)
            }
            assert codecs == {"id": "UNCOMPRESSED", "name": "ZSTD"}
    assert read_back(store, files).equals(table)
    assert [f.stats for f in files] == [table_stats(pq.read_table(os.path.join(store.root, f.path))) for f in files]


def test_codecs_are_judged_only_for_a_large_first_row_group() -> None:
    """A small input keeps the table's codec on every column (its sample would cost a share
    of its encoding); so does a table whose codec is none, and a column the sample holds
    too few bytes of to judge (nulls, whatever comes later). A column the codec shrinks by
    less than `SAVED_AT_LEAST` is left uncompressed."""
    ids = np.random.default_rng(3).integers(0, 2**40, 600_000)
    late = pa.array([None] * 500_000 + [f"text {i % 7}" for i in range(100_000)])  # null in the sample
    saves_6_percent = np.round(np.random.default_rng(4).random(len(ids)), 8)  # (zstd: 0.94 of the bytes)
    large = pa.table(
        {"id": ids, "name": pa.array(["the same words again"] * len(ids)), "late": late, "x": saves_6_percent}
    )
    delta = {"id": "DELTA_BINARY_PACKED"}
    assert write.column_codecs(large, "zstd", [], delta) == {"id": "none", "name": "zstd", "late": "zstd", "x": "none"}
    assert write.column_codecs(large.slice(0, 1000), "zstd", [], delta) == "zstd"
    assert write.column_codecs(large, "none", [], delta) == "none"

"""Probing Parquet's split-block bloom filters (format/bloom_filter.py) against the filters
pyarrow writes: every value a chunk holds probes as present (a wrong hash, block choice or
encoding would lose rows), absent values mostly probe as absent, values whose encoding is not
certain are never probed, and a header this reader does not know is no filter at all."""

from __future__ import annotations

import datetime as dt
import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from manifest_table.format import bloom_filter as bf


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0xEF46DB3751D8E999), (b"a", 0xD24EC4F1A98C6E5B), (b"abc", 0x44BC2CF5AD770999)],
)
def test_xxh64_matches_the_reference_vectors(data: bytes, expected: int) -> None:
    assert bf.xxh64(data) == expected


def _filters(table: pa.Table) -> tuple[bytes, pq.FileMetaData]:
    sink = io.BytesIO()
    options = {name: {"ndv": table.num_rows, "fpp": 0.01} for name in table.column_names}
    pq.write_table(table, sink, bloom_filter_options=options, row_group_size=table.num_rows)
    data = sink.getvalue()
    return data, pq.ParquetFile(io.BytesIO(data)).metadata


def _prober(data: bytes, meta: pq.FileMetaData, leaf: int):
    chunk = meta.row_group(0).column(leaf)
    offset = chunk.bloom_filter_offset
    head = data[offset : offset + bf.HEADER_BYTES]
    found = bf.SplitBlockFilter.of(head, offset, chunk.bloom_filter_length, len(data))
    assert found is not None
    stored = meta.schema.to_arrow_schema().field(leaf).type

    def probe(value: object) -> bool:
        encoded = bf.plain_bytes(value, chunk.physical_type, stored)
        assert encoded is not None, (value, stored)
        hashed = bf.xxh64(encoded)
        at = found.block_at(hashed)
        return bf.block_may_contain(data[at : at + bf.BLOCK_BYTES], hashed)

    return probe


def test_every_value_a_chunk_holds_probes_present_and_absent_ones_mostly_not() -> None:
    rng = random.Random(7)
    n = 4_000
    ints = list({rng.getrandbits(63) - 2**62 for _ in range(3 * n)})[: 2 * n]
    table = pa.table({
        "i8": pa.array([v % 256 - 128 for v in ints[:n]], pa.int8()),
        "i16": pa.array([v % 65536 - 32768 for v in ints[:n]], pa.int16()),
        "i32": pa.array([v % 2**32 - 2**31 for v in ints[:n]], pa.int32()),
        "i64": pa.array(ints[:n], pa.int64()),
        "day": pa.array([dt.date(1, 1, 1) + dt.timedelta(days=v % 3_000_000) for v in ints[:n]], pa.date32()),
        # lengths 0-99: XXH64's short, 4-byte, 8-byte and 32-byte-stripe paths
        "text": pa.array(["é" * (v % 50) + str(v)[: v % 7] for v in ints[:n]], pa.string()),
        "big": pa.array([str(v) * (v % 5) for v in ints[:n]], pa.large_string()),
        "raw": pa.array([v.to_bytes(9, "little", signed=True)[: v % 10] for v in ints[:n]], pa.binary()),
    })
    data, meta = _filters(table)
    for leaf, name in enumerate(table.column_names):
        probe = _prober(data, meta, leaf)
        assert all(probe(v) for v in table[name].to_pylist()), name
    probe_ints = _prober(data, meta, 3)
    absent = ints[n:]
    assert sum(map(probe_ints, absent)) < 0.05 * len(absent)
    probe_text = _prober(data, meta, 5)
    held = set(table["text"].to_pylist())
    others = [s for s in (f"absent-{v}" for v in absent) if s not in held]
    assert sum(map(probe_text, others)) < 0.05 * len(others)


@pytest.mark.parametrize(
    ("value", "physical", "stored"),
    [
        (1.0, "DOUBLE", pa.float64()),  # 0.0 and -0.0 are equal but hash apart
        (True, "BOOLEAN", pa.bool_()),
        (True, "INT32", pa.int32()),  # a bool is an int in Python, never a stored int
        (5, "INT64", pa.timestamp("us")),  # units vary by writer
        (5, "INT32", pa.uint32()),  # stored as the signed reinterpretation
        (2**31, "INT32", pa.int32()),  # no stored value equals it
        (dt.datetime(2020, 1, 1), "INT32", pa.date32()),
        ("x", "BYTE_ARRAY", pa.binary()),
        (b"x", "BYTE_ARRAY", pa.string()),
        (5, "FIXED_LEN_BYTE_ARRAY", pa.decimal128(20, 0)),
    ],
)
def test_values_without_a_certain_encoding_are_not_probed(value: object, physical: str, stored: pa.DataType) -> None:
    assert bf.plain_bytes(value, physical, stored) is None


def test_a_header_this_reader_does_not_know_is_no_filter() -> None:
    data, meta = _filters(pa.table({"id": pa.array(range(1000), pa.int64())}))
    chunk = meta.row_group(0).column(0)
    offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
    head = data[offset : offset + bf.HEADER_BYTES]
    assert bf.SplitBlockFilter.of(head, offset, length, len(data)) is not None
    assert bf.SplitBlockFilter.of(head, offset, length - 1, len(data)) is None  # bitset past its length
    assert bf.SplitBlockFilter.of(head, offset, length, offset + length - 1) is None  # past the file's end
    assert bf.SplitBlockFilter.of(b"\x00" * 16, offset, None, len(data)) is None  # no fields
    assert bf.SplitBlockFilter.of(b"\xff" * 16, offset, None, len(data)) is None  # not Thrift
    # numBytes (field 1, i32) not a multiple of 32: zigzag(33) = 66
    assert bf.SplitBlockFilter.of(b"\x15\x42" + head[2:], offset, None, len(data)) is None
    # another algorithm (field 2's union holding its member 2)
    other = head.replace(b"\x1c\x1c\x00", b"\x1c\x2c\x00", 1)
    assert other != head
    assert bf.SplitBlockFilter.of(other, offset, None, len(data)) is None

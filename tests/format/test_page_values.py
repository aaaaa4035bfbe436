"""Values read straight from one data page (format/page_values.py) against pyarrow's read of
the whole file: every type and encoding it decodes, with and without nulls, in data pages of
version 1 and 2, under every codec it accepts, at any rows; the encodings it leaves to
pyarrow answer None; a page cut short raises ``ValueError``, never answers values. The point
reads that use it (data/point_reads.py) are checked in tests/reads/test_point_reads.py and by
the differential test's odd seeds."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manifest_table.format import page_values
from manifest_table.format import parquet_pages as pp

ROWS = 3_000
COLUMNS = {
    "i64": lambda rng, n: pa.array(rng.integers(-(2**62), 2**62, n)),
    "i32": lambda rng, n: pa.array(rng.integers(-(2**31), 2**31, n).astype(np.int32)),
    "f32": lambda rng, n: pa.array(rng.random(n).astype(np.float32)),
    "f64": lambda rng, n: pa.array(rng.random(n)),
    "flag": lambda rng, n: pa.array(rng.random(n) < 0.3),
    "day": lambda rng, n: pa.array(rng.integers(0, 40_000, n).astype(np.int32), pa.date32()),
    "at": lambda rng, n: pa.array(rng.integers(0, 2**50, n), pa.timestamp("us")),
    "at_ns": lambda rng, n: pa.array(rng.integers(0, 2**60, n), pa.timestamp("ns")),
    "few_ints": lambda rng, n: pa.array(rng.integers(0, 40, n)),
    "few_strings": lambda rng, n: pa.array(np.array(["a", "bb", "", "é", "x" * 300])[rng.integers(0, 5, n)]),
    "few_bytes": lambda rng, n: pa.array([b"\x00\xff", b"", b"z"] * (n // 3) + [b""] * (n % 3)),
}
CODECS = ["zstd", "snappy", "gzip", "brotli", "none"]


def _pages(path: str, name: str) -> tuple[page_values.Chunk, list[pp.Page], bytes, pa.Array]:
    """The column's chunk facts, its pages, the file's bytes and its values as pyarrow reads them."""
    file = pq.ParquetFile(path)
    leaf = file.schema_arrow.get_field_index(name)
    meta, column = file.metadata.row_group(0).column(leaf), file.metadata.schema.column(leaf)
    data = open(path, "rb").read()
    start = meta.dictionary_page_offset if meta.has_dictionary_page else meta.data_page_offset
    pages = pp.walk_pages(lambda at, n: data[at : at + n], start, start + meta.total_compressed_size,
                          file.metadata.num_rows, file.metadata.num_rows - 1)
    field = file.schema_arrow.field(name)
    assert page_values.supports(meta.physical_type, meta.compression, field.type), name
    chunk = page_values.Chunk(meta.physical_type, meta.compression, column.max_definition_level > 0, field.type)
    return chunk, pages, data, file.read().column(name).combine_chunks()


def _entries(chunk: page_values.Chunk, pages: list[pp.Page], data: bytes) -> page_values.Entries | None:
    first = pages[0]
    if not first.dictionary:
        return None
    return page_values.dictionary_entries(chunk, data[first.offset : first.offset + first.size])


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(COLUMNS)),
    nulls=st.sampled_from([0.0, 0.1, 0.97, 1.0]),
    required=st.booleans(),
    dictionary=st.booleans(),
    version=st.sampled_from(["1.0", "2.0"]),
    codec=st.sampled_from(CODECS),
    page_rows=st.sampled_from([7, 500, 20_000]),
    seed=st.integers(0, 2**16),
    picks=st.lists(st.integers(0, ROWS - 1), max_size=12),
)
def test_values_at_rows_equal_pyarrows(
    tmp_path_factory: pytest.TempPathFactory, name: str, nulls: float, required: bool, dictionary: bool,
    version: str, codec: str, page_rows: int, seed: int, picks: list[int],
) -> None:
    rng = np.random.default_rng(seed)
    values = COLUMNS[name](rng, ROWS)
    if not required:
        values = pa.array(values.to_pylist(), values.type, mask=rng.random(ROWS) < nulls)
    table = pa.table({name: values}, schema=pa.schema([pa.field(name, values.type, nullable=not required)]))
    path = str(tmp_path_factory.mktemp("pages") / "f.parquet")
    pq.write_table(table, path, compression=codec, data_page_version=version, use_dictionary=dictionary,
                   max_rows_per_page=page_rows, row_group_size=ROWS)
    chunk, pages, data, whole = _pages(path, name)
    entries = _entries(chunk, pages, data)
    rows = sorted(set(picks))
    decoded = 0
    for page in (p for p in pages if not p.dictionary):
        inside = [r - page.first_row for r in rows if page.first_row <= r < page.first_row + page.rows]
        inside = sorted(set(inside) | {0, page.rows - 1})
        got = _values_at(chunk, entries, data, page, inside)
        if got is None:  # a plain page of strings (dictionary overflow or none asked)
            assert chunk.physical == "BYTE_ARRAY"
            continue
        decoded += 1
        _assert_equal(got, whole, page, inside)
        every = list(range(page.rows))  # (each run's every row)
        _assert_equal(_values_at(chunk, entries, data, page, every), whole, page, every)
    assert decoded or chunk.physical == "BYTE_ARRAY" and not dictionary


def _values_at(chunk: page_values.Chunk, entries: page_values.Entries | None, data: bytes, page: pp.Page,
               rows: list[int]) -> pa.Array | None:
    with patch.object(page_values, "MAX_RUNS", 10**9):  # (every run walked: see the test below)
        return page_values.values_at(chunk, entries, data[page.offset : page.offset + page.size], rows)


def _assert_equal(got: pa.Array | None, whole: pa.Array, page: pp.Page, rows: list[int]) -> None:
    """``got``, the values at ``rows`` of ``page``, are pyarrow's (``whole``: the column)."""
    assert got is not None
    expected = whole.take(pa.array([page.first_row + r for r in rows]))
    got.validate(full=True)  # (fixed-width values become an array over their own buffer)
    assert got.type == expected.type and got.null_count == expected.null_count
    assert got.to_pylist() == expected.to_pylist(), (page.first_row, rows)


@pytest.mark.parametrize("dictionary", [False, True])
@pytest.mark.parametrize("runs", [False, True], ids=["scattered", "in runs"])
def test_every_row_of_a_full_page_with_nulls(tmp_path: pytest.TempPathFactory, dictionary: bool, runs: bool) -> None:
    """A page of 20,000 rows as the writer cuts them, one value in ten null at random, the
    values scattered or in runs of 1 to 60 (a sorted column's): definition levels and
    dictionary indexes are runs of both kinds, bit-packed ones hundreds of values long, and
    each row's value is found by counting the ones before it."""
    rng = np.random.default_rng(7)
    rows = 20_000
    drawn = rng.integers(0, 50 if dictionary else 2**40, rows)
    if runs:
        drawn = np.repeat(drawn, rng.integers(1, 61, rows))[:rows]
    values = pa.array(drawn, mask=rng.random(rows) < 0.1)
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    pq.write_table(pa.table({"v": values}), path, use_dictionary=dictionary, row_group_size=rows)
    chunk, pages, data, whole = _pages(path, "v")
    entries = _entries(chunk, pages, data)
    page = next(p for p in pages if not p.dictionary)
    assert page.rows == rows
    for picked in (list(range(rows)), list(range(3, rows, 997))):
        _assert_equal(_values_at(chunk, entries, data, page, picked), whole, page, picked)


@pytest.mark.parametrize("options", [
    {"use_dictionary": False, "column_encoding": {"v": "DELTA_BINARY_PACKED"}},
    {"use_dictionary": False, "column_encoding": {"v": "BYTE_STREAM_SPLIT"}},
], ids=["delta", "byte stream split"])
def test_encodings_left_to_pyarrow_answer_none(tmp_path: pytest.TempPathFactory, options: dict) -> None:
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    pq.write_table(pa.table({"v": pa.array(np.arange(1000, dtype=np.int64))}), path, **options)
    chunk, pages, data, _ = _pages(path, "v")
    page = next(p for p in pages if not p.dictionary)
    assert page_values.values_at(chunk, None, data[page.offset : page.offset + page.size], [0, 5]) is None


def test_plain_strings_and_casts_are_not_supported() -> None:
    assert not page_values.supports("INT32", "ZSTD", pa.int8())  # pyarrow casts on read
    assert not page_values.supports("INT64", "ZSTD", pa.decimal128(12, 2))
    assert not page_values.supports("INT64", "LZ4", pa.int64())  # one of two LZ4 framings
    assert not page_values.supports("FIXED_LEN_BYTE_ARRAY", "ZSTD", pa.binary(4))
    assert page_values.supports("INT64", "ZSTD", pa.timestamp("ms", tz="UTC"))


@pytest.mark.parametrize("name", ["i64", "flag", "few_strings"])
def test_a_page_cut_short_raises_and_answers_no_values(tmp_path: pytest.TempPathFactory, name: str) -> None:
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    values = COLUMNS[name](np.random.default_rng(1), ROWS)
    pq.write_table(pa.table({name: pa.array(values.to_pylist(), values.type, mask=np.arange(ROWS) % 7 == 0)}), path,
                   compression="none", row_group_size=ROWS)
    chunk, pages, data, _ = _pages(path, name)
    entries = _entries(chunk, pages, data)
    page = next(p for p in pages if not p.dictionary)
    raw = data[page.offset : page.offset + page.size]
    for cut in (len(raw) // 3, len(raw) - 40):
        with pytest.raises(ValueError):
            page_values.values_at(chunk, entries, raw[:cut], [ROWS - 1])
    with pytest.raises(ValueError):  # a row the page does not hold
        page_values.values_at(chunk, entries, raw, [ROWS])


def test_chunks_in_other_encodings_are_left_to_pyarrow_by_their_footer() -> None:
    assert page_values.may_decode("INT64", ("PLAIN", "RLE", "RLE_DICTIONARY"), dictionary=True)
    assert page_values.may_decode("BOOLEAN", ("RLE",), dictionary=False)
    assert not page_values.may_decode("INT64", ("RLE", "DELTA_BINARY_PACKED"), dictionary=False)
    assert not page_values.may_decode("BYTE_ARRAY", ("RLE", "PLAIN"), dictionary=False)  # plain strings
    assert page_values.may_decode("BYTE_ARRAY", ("PLAIN", "RLE", "RLE_DICTIONARY"), dictionary=True)


def test_a_page_of_many_runs_is_left_to_pyarrow(tmp_path: pytest.TempPathFactory) -> None:
    """A sorted column's dictionary indexes change every few rows: walking those runs to a
    row in mid-page costs more than pyarrow's decode of the page (``MAX_RUNS``)."""
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    values = np.repeat(np.arange(2_000), 10)  # a run of 10 per value
    pq.write_table(pa.table({"v": values}), path, use_dictionary=True, row_group_size=len(values))
    chunk, pages, data, whole = _pages(path, "v")
    entries = _entries(chunk, pages, data)
    page = next(p for p in pages if not p.dictionary)
    raw = data[page.offset : page.offset + page.size]
    early = page_values.MAX_RUNS * 10 // 2
    assert page_values.values_at(chunk, entries, raw, [early]).to_pylist() == [whole[early].as_py()]
    assert page_values.values_at(chunk, entries, raw, [page.rows - 1]) is None


def test_a_run_claiming_more_bytes_than_it_has_raises() -> None:
    """A corrupt run header is an error, never values padded with zeros."""
    with pytest.raises(ValueError):  # 2 groups of 8 one-byte values, 1 byte there
        page_values._hybrid_at(b"\x05\x01", 0, 8, [7])
    with pytest.raises(ValueError):  # a run of 3 two-byte values, its value cut
        page_values._hybrid_at(b"\x06\x01", 0, 16, [1])
    with pytest.raises(ValueError):  # levels: 1 group of 8 bit-packed, no byte
        page_values._places(b"\x03", 8, [2])


def test_runs_of_dictionary_indexes_wider_than_a_byte(tmp_path: pytest.TempPathFactory) -> None:
    """A sorted column of 1,000 distinct values: its dictionary indexes take 10 bits, so a run
    of one index stores it in two bytes (the hybrid encoding's value width rounded up to whole
    bytes), and bit-packed runs cross byte boundaries."""
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    values = np.repeat(np.arange(1_000, dtype=np.int64) * 7, 10)  # (runs of 10: stored as RLE runs)
    pq.write_table(pa.table({"v": values}), path, use_dictionary=True, row_group_size=len(values))
    chunk, pages, data, whole = _pages(path, "v")
    entries = _entries(chunk, pages, data)
    assert entries is not None and len(entries) == 1_000
    page = next(p for p in pages if not p.dictionary)
    picked = [0, 9, 10, 2_555, 2_560, 9_999]
    _assert_equal(_values_at(chunk, entries, data, page, picked), whole, page, picked)


def test_a_v2_page_header_without_is_compressed_reads_as_compressed(tmp_path: pytest.TempPathFactory) -> None:
    """Thrift's default for ``DataPageHeaderV2.is_compressed`` is true: a writer may leave the
    field out, and its values are then compressed."""
    path = str(tmp_path / "f.parquet")  # type: ignore[operator]
    values = pa.array(np.arange(1_000, dtype=np.int64) * 3, mask=np.arange(1_000) % 5 == 0)
    pq.write_table(pa.table({"v": values}), path, data_page_version="2.0", compression="zstd", use_dictionary=False)
    chunk, pages, data, whole = _pages(path, "v")
    page = next(p for p in pages if not p.dictionary)
    raw = data[page.offset : page.offset + page.size]
    header, end = pp.decode_struct(raw)
    assert header[8][1][7][1] is True  # (pyarrow writes it)
    del header[8][1][7]
    rows = [0, 1, 499, 999]
    _assert_equal(page_values.values_at(chunk, None, pp.encode_struct(header) + raw[end:], rows), whole, page, rows)

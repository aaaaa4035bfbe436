"""Point reads page by page (data/point_reads.py, data/page_layouts.py, format/parquet_pages.py,
format/page_index.py):
a filtered read of large row groups decodes the filter's columns only in the pages whose
bounds may match, then the other columns only in the pages that hold matching rows. Checked
against pyarrow's whole reads on row groups of many pages, with deleted rows, for every column
type pyarrow writes (nested and unusual ones fall back to the whole chunk), on files of other
writers' layouts (v2 data pages, page-header statistics, no dictionary, snappy), for the page
index found in the footer (false matches refused, bounds equal to each page's values), and for
the positions a delete by key records. The differential test reads odd seeds' filtered scans
this way too (tests/differential_cases.py); tests/test_filters_duckdb.py checks the pruning by
page bounds against DuckDB's rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.data import page_layouts, point_reads
from manifest_table.expressions import to_expr
from manifest_table.format import page_index
from manifest_table.format import parquet_pages as pp
from manifest_table.format.segment import _DATA_KEY, _writer_data_keys
from manifest_table.format.stats import leaf_columns
from manifest_table.storage import ParquetSource

ROWS = 130_000  # large row groups of many pages (of at most 20,000 rows)


def _data(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    nulls = rng.random(rows) < 0.1
    floats = rng.random(rows) * 100
    floats[rng.random(rows) < 0.01] = np.nan
    return pa.table({
        "id": ids,
        "name": pa.array([f"user-{i * 7919 % 1_000_003}" for i in ids]),
        "kind": pa.array([f"k{i % 13}" for i in ids]).dictionary_encode().cast(pa.string()),
        "price": pa.array(floats, mask=nulls),
        "at": pa.array(1_700_000_000_000_000 + ids * 1_000, pa.timestamp("us", tz="Europe/Berlin")),
        "day": pa.array((ids // 1000).astype(np.int32), pa.date32()),
        "amount": pa.array([decimal.Decimal(int(i) % 10_000) / 100 for i in ids], pa.decimal128(12, 2)),
        "flag": pa.array(rng.random(rows) < 0.5),
        "small": pa.array(rng.integers(0, 200, rows).astype(np.uint8)),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in ids], pa.list_(pa.string())),
        "pair": pa.array([{"a": int(i), "b": str(i % 5)} for i in ids]),
    })


@pytest.fixture(scope="module")
def table_and_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[mt.Table, pa.Table]:
    data = _data(ROWS)
    table = mt.write_table(str(tmp_path_factory.mktemp("points") / "t"), data, row_group_size="64MiB")
    deleted = list(range(5, ROWS, 997))
    table.delete(mt.col("id").isin(deleted))
    return table, data.filter(pc.invert(pc.is_in(data["id"], pa.array(deleted))))


def test_the_table_has_large_row_groups_of_many_pages(table_and_data: tuple[mt.Table, pa.Table]) -> None:
    table, _ = table_and_data
    (file,) = table.scan().plan_files()
    meta = pq.ParquetFile(str(Path(table.store.inner.root) / file.path)).metadata
    assert meta.row_group(0).num_rows >= point_reads.LARGE_GROUP_ROWS
    assert meta.row_group(0).column(0).has_offset_index  # written for other engines


@pytest.mark.parametrize("where", [
    "id = 70001", "id = 5", "id IN (3, 19999, 20000, 64999, 65000, 129999)", "id = 70001 AND name = 'x'",
    "id < 3 OR id > 129997", "id BETWEEN 40000 AND 40100",
    "id BETWEEN 39990 AND 40000",  # a run of rows ending on a page's first row
    "day = '1970-01-04' AND flag = true", "name = 'user-7919'",
    "id >= 1000 AND id < 1400",  # more than FEW_ROWS: the matched row groups' whole chunks
])
def test_filtered_scans_return_the_rows_pyarrow_selects(table_and_data: tuple[mt.Table, pa.Table],
                                                        where: str) -> None:
    table, live = table_and_data
    scan = table.scan(where=where)
    got = scan.to_arrow().sort_by("id")
    expected = ds.dataset(live).to_table(filter=scan.where.to_arrow()).sort_by("id")  # type: ignore[union-attr]
    assert _rows(got) == _rows(expected.cast(got.schema)), where
    assert scan.count() == expected.num_rows


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, NaN equal to NaN (whole tables: no Python objects per row)."""
    def plain(t: pa.Table) -> pa.Table:
        price = t["price"]
        return t.set_column(t.column_names.index("price"), "price", pc.if_else(pc.is_nan(price), -1.0, price))
    return plain(a).equals(plain(b))


def _rows(table: pa.Table) -> list[tuple]:
    """Rows as tuples, NaN as a string (NaN != NaN would fail an equal table)."""
    return [tuple("NaN" if v != v else v for v in row.values()) for row in table.to_pylist()]


def test_positions_are_the_rows_physical_positions(table_and_data: tuple[mt.Table, pa.Table]) -> None:
    table, _ = table_and_data
    wanted = [0, 19_999, 20_000, 64_999, 65_000, 70_001, 129_999]
    found = dict(table.scan(columns=["id"], where=mt.col("id").isin(wanted)).matching_positions())
    (positions,) = found.values()
    assert list(positions) == wanted  # ids are the files' row positions
    rows = dict(table.scan(where=mt.col("id").isin(wanted)).matching_rows())
    (matched,) = rows.values()
    assert matched["id"].to_pylist() == matched["__row_position"].to_pylist() == wanted


def test_delete_and_update_by_key_change_exactly_that_row(tmp_path: Path) -> None:
    data = _data(ROWS, seed=1)
    table = mt.write_table(str(tmp_path / "t"), data, row_group_size="64MiB")
    table.delete("id = 70001")
    table.update(values={"name": "changed"}, where="id = 40002")
    assert table.scan().count() == ROWS - 1
    assert table.scan(where="id = 70001").count() == 0
    assert table.scan(where="id = 40002").to_arrow()["name"].to_pylist() == ["changed"]
    expected = data.filter(pc.not_equal(data["id"], 70001))
    got = table.scan().to_arrow().sort_by("id")
    assert _same(got.drop_columns(["name"]), expected.drop_columns(["name"]).cast(got.drop_columns(["name"]).schema))
    names = got["name"].to_pylist()
    assert names[40002] == "changed" and names[:40002] == expected["name"].to_pylist()[:40002]


@pytest.mark.parametrize("options", [
    {},
    {"data_page_version": "2.0", "use_dictionary": False, "compression": "snappy"},
    {"write_page_index": False, "write_statistics": True, "compression": "lz4"},
    {"use_dictionary": True, "compression": "none", "data_page_size": 4096},
], ids=["pyarrow defaults", "v2 pages, plain, snappy", "page header stats, lz4", "small pages, dictionary"])
def test_pages_read_alone_equal_the_whole_chunk(tmp_path: Path, options: dict) -> None:
    data = _data(50_000, seed=2)
    path = str(tmp_path / "f.parquet")
    pq.write_table(data, path, row_group_size=50_000, **options)
    source = _source(path)
    whole = source.fragment.to_table()
    leaves = leaf_columns(source.fragment.physical_schema)
    starts = np.array([0, 50_000])
    rng = random.Random(3)
    for rows in ([0, 49_999], sorted(rng.sample(range(50_000), 12)), list(range(19_995, 20_005)), list(range(50_000))):
        at = np.array(rows, dtype=np.int64)
        found = point_reads._read_at(source, leaves, data.column_names, at, starts)
        for name in data.column_names:
            column = found[name]
            if name in ("tags", "pair"):
                assert column is None  # nested: read whole by the caller
            else:
                assert column is not None, name
                expected = whole[name].take(pa.array(at))
                assert column.equals(expected.combine_chunks()) or _rows(pa.table({"c": column})) == _rows(
                    pa.table({"c": expected})), (name, rows[:3])


def test_fixed_width_and_dictionary_values_are_read_from_their_pages_directly(tmp_path: Path) -> None:
    """format/page_values.py answers for these columns (pyarrow decodes the others' pages)."""
    data = _data(50_000, seed=4)
    path = str(tmp_path / "f.parquet")
    pq.write_table(data, path, row_group_size=50_000)
    source = _source(path)
    leaves = leaf_columns(source.fragment.physical_schema)
    rows = np.array([3, 30_000, 49_999], dtype=np.int64)
    whole = source.fragment.to_table()
    with source.fragment.open() as file:
        for name in ("id", "day", "flag", "kind", "at"):
            found = point_reads._values_at(source, file, 0, leaves[name], rows)
            assert found is not None, name
            assert _rows(pa.table({"c": found})) == _rows(pa.table({"c": whole[name].take(pa.array(rows))}))
        # A decimal, a narrow integer (pyarrow converts them), nulls scattered in every page (a
        # level run every few rows: page_values.MAX_RUNS).
        for name in ("amount", "small", "price"):
            assert point_reads._values_at(source, file, 0, leaves[name], rows) is None


def _source(path: str) -> ParquetSource:
    fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=pa.fs.LocalFileSystem())
    return ParquetSource(fragment, fragment.metadata, local=True)


@pytest.mark.parametrize("options", [
    {},
    {"data_page_version": "2.0", "use_dictionary": False, "compression": "snappy"},
    {"use_dictionary": True, "compression": "none", "data_page_size": 4096},
], ids=["pyarrow defaults", "v2 pages, plain, snappy", "small pages, dictionary"])
def test_the_page_index_gives_each_pages_place_and_bounds(tmp_path: Path, options: dict) -> None:
    """Found in the footer without decoding it, the offset index agrees with the page headers,
    and every bound decoded is the min / max of that page's values (NaN aside); types whose
    stored integers are not their values (decimals, nanoseconds) have none."""
    data = _data(50_000, seed=5).append_column("ns", pa.array(np.arange(50_000), pa.timestamp("ns")))
    path = str(tmp_path / "f.parquet")
    pq.write_table(data, path, row_group_size=50_000, write_page_index=True, **options)
    source = _source(path)
    meta = source.metadata
    with open(path, "rb") as f:
        raw = f.read()
    for name, leaf in leaf_columns(source.fragment.physical_schema).items():
        chunk = meta.row_group(0).column(leaf)
        layout = page_layouts.chunk_pages(source, 0, leaf)
        assert layout is not None, name
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        walked = pp.walk_pages(lambda o, n: raw[o : o + n], start, start + chunk.total_compressed_size, 50_000, 49_999)
        assert layout.pages == walked, name
        if name in ("amount", "ns"):
            assert layout.bounds is None, name
            continue
        assert layout.bounds is not None, name
        for page, low, high in zip(layout.data, layout.bounds.mins, layout.bounds.maxes):
            values = [v for v in data[name][page.first_row : page.first_row + page.rows].to_pylist()
                      if v is not None and v == v]
            assert (low, high) == (min(values), max(values)), (name, page)


def test_a_row_groups_offset_indexes_are_read_in_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk of a row group, nested ones between flat ones included, has its pages from
    the group's offset indexes read end to end: the footer searched twice per group (its first
    and last chunk), and once more for a chunk's bounds when they are asked for."""
    path = str(tmp_path / "f.parquet")
    pq.write_table(_data(90_000, seed=8), path, row_group_size=30_000, write_page_index=True)
    raw = Path(path).read_bytes()
    source = _source(path)
    searches = []
    found = page_index.locate
    monkeypatch.setattr(page_index, "locate", lambda footer, facts: searches.append(facts) or found(footer, facts))
    leaves = leaf_columns(source.fragment.physical_schema)
    for group in range(3):
        before = len(searches)
        for name, leaf in leaves.items():
            chunk = source.metadata.row_group(group).column(leaf)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            walked = pp.walk_pages(lambda o, n: raw[o : o + n], start, start + chunk.total_compressed_size,
                                   30_000, 29_999)
            layout = page_layouts.chunk_pages(source, group, leaf)
            assert layout is not None and layout.pages == walked, (group, name)
        assert len(searches) - before == 2, group
        assert page_layouts.chunk_pages(source, group, leaves["id"]).bounds is not None
        assert len(searches) - before == 3, group


def test_an_offset_index_that_does_not_describe_its_chunk_ends_the_run(tmp_path: Path) -> None:
    """One chunk's offset index altered (its first page one byte off): that chunk's pages are
    walked from their headers, without bounds, and the chunks after it, no longer read from
    the run, are found by the footer search; every chunk's pages stay exact."""
    path = tmp_path / "f.parquet"
    pq.write_table(_data(60_000, seed=9), str(path), row_group_size=30_000, write_page_index=True)
    raw = bytearray(path.read_bytes())
    meta = pq.ParquetFile(str(path)).metadata
    leaves = leaf_columns(meta.schema.to_arrow_schema())
    chunk = meta.row_group(1).column(leaves["price"])
    facts = page_index.ChunkFacts(chunk.data_page_offset, None, chunk.total_compressed_size, 30_000)
    (where,) = page_index.locate(bytes(raw[-8 - int.from_bytes(raw[-8:-4], "little") : -8]), facts)
    at = where.offset_index[0]
    assert raw[at] == 0x19 and raw[at + 2] == 0x16  # (field 1: a list of page locations; its first's offset)
    raw[at + 3] ^= 0x02
    path.write_bytes(raw)
    source = _source(str(path))
    for group in range(2):
        for name, leaf in leaves.items():
            chunk = meta.row_group(group).column(leaf)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            walked = pp.walk_pages(lambda o, n: raw[o : o + n], start, start + chunk.total_compressed_size,
                                   30_000, 29_999)
            layout = page_layouts.chunk_pages(source, group, leaf)
            assert layout is not None and layout.pages == walked, (group, name)
            if name != "amount":  # (decimals have no bounds here)
                assert (layout.bounds is None) == ((group, name) == (1, "price")), (group, name)


def test_a_false_match_in_the_footer_is_refused(tmp_path: Path) -> None:
    """The bytes searched for may occur elsewhere in a footer (inside a long string bound):
    only the place whose offset index describes the chunk is taken."""
    path = str(tmp_path / "f.parquet")
    pq.write_table(_data(50_000, seed=6), path, row_group_size=50_000, write_page_index=True)
    raw = Path(path).read_bytes()
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(0).column(0)
    first = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
    facts = page_index.ChunkFacts(chunk.data_page_offset, first, chunk.total_compressed_size, 50_000)
    footer = raw[-8 - int.from_bytes(raw[-8:-4], "little") : -8]
    needle = b"\x16" + pp.encoded_int(facts.total_compressed_size) + b"\x26" + pp.encoded_int(facts.data_page_offset)
    decoy = needle + bytes([0x16]) + pp.encoded_int(3) + bytes([0x15]) + pp.encoded_int(9) + bytes([0, 0x16]) + (
        pp.encoded_int(4)) + bytes([0x15]) + pp.encoded_int(50) + bytes([0])
    found = page_index.locate(decoy + footer, facts)
    assert len(found) == 2 and found[0].offset_index == (4, 50)
    pages = [page_index.decode_offsets(raw[a : a + n], facts) for a, n in (f.offset_index for f in found)]
    assert pages[0] is None and pages[1] is not None and pages[1][1].offset == chunk.data_page_offset
    at, n = found[1].offset_index
    for wrong in (dataclasses.replace(facts, total_compressed_size=facts.total_compressed_size - 1),
                  dataclasses.replace(facts, rows=39_999), dataclasses.replace(facts, data_page_offset=4)):
        assert page_index.decode_offsets(raw[at : at + n], wrong) is None, wrong


def test_a_point_lookup_reads_only_the_page_that_may_hold_the_key(table_and_data: tuple[mt.Table, pa.Table]) -> None:
    table, _ = table_and_data
    (file,) = table.scan().plan_files()
    source = _source(str(Path(table.store.inner.root) / file.path))
    leaves = leaf_columns(source.fragment.physical_schema)
    starts = np.array([0, ROWS])
    where = mt.col("id") == 70_001
    bound = where.bind(table.schema)
    spans = point_reads.candidate_spans(source, [0], starts, {"id": leaves["id"]},
                                        lambda lookup: bound.may_match(lookup))
    assert spans == [(60_000, 80_000)]  # one page of 20,000 rows
    assert table.scan(where=where).to_arrow()["id"].to_pylist() == [70_001]


def test_pages_whose_every_row_is_null_are_ruled_out(tmp_path: Path) -> None:
    """An all-null page has no bounds, but its null count rules it out for a comparison or
    ``IS NOT NULL``: a lookup there reads no page of it."""
    rows = 100_000
    data = pa.table({"id": np.arange(rows), "v": pa.array([None] * 40_000 + list(range(60_000)), pa.int64())})
    table = mt.write_table(str(tmp_path / "t"), data, row_group_size="64MiB")
    (file,) = table.scan().plan_files()
    source = _source(str(Path(table.store.inner.root) / file.path))
    leaves = leaf_columns(source.fragment.physical_schema)
    for where in ("v = 7", "v IS NOT NULL"):
        bound = to_expr(where).bind(table.schema)
        spans = point_reads.candidate_spans(source, [0], np.array([0, rows]), {"v": leaves["v"]},
                                            lambda lookup: bound.may_match(lookup))
        assert spans and spans[0][0] == 40_000, (where, spans)  # the first two pages: every row null
        assert table.scan(where=where).count() == (1 if where == "v = 7" else 60_000)


def test_a_filter_on_added_columns_selecting_another_added_column(tmp_path: Path) -> None:
    """Files written before two columns were added: the filter's column and the selected one
    are both absent from them, and read as nulls (the page route gave the selected column no
    rows: "Column 1 named n2 expected length 0", on a file read by ranges)."""
    rng = np.random.default_rng(7)
    data = pa.table({"id": np.arange(ROWS), "price": rng.random(ROWS), "score": rng.random(ROWS)})
    table = mt.write_table(str(tmp_path / "t"), data, row_group_size="64MiB")
    assert table.manifest().files[0].size > 1024 * 1024  # read by ranges, not whole
    with table.update_schema() as change:
        change.add_column("n1", pa.date32())
        change.add_column("n2", pa.int64())
    got = table.scan(columns=["n1"], where="n2 IS NULL").to_arrow()
    assert got.num_rows == ROWS and got["n1"].null_count == ROWS


def test_zoned_timestamp_bounds_at_the_ends_of_the_calendar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A zoned column's page bounds are UTC instants, as its footer's are: the first instant of
    year 1 has no wall clock in New York (an OverflowError decoding the bounds in the column's
    zone, on every filtered read of the file)."""
    monkeypatch.setattr(point_reads, "LARGE_GROUP_ROWS", 0)  # (every filtered read by pages)
    first = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
    data = pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                     "at": pa.array([first, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)],
                                    pa.timestamp("us", "America/New_York"))})
    table = mt.write_table(str(tmp_path / "t"), data)
    source = _source(str(Path(table.store.inner.root) / table.manifest().files[0].path))
    layout = page_layouts.chunk_pages(source, 0, leaf_columns(source.fragment.physical_schema)["at"])
    assert layout is not None and layout.bounds is not None
    assert (layout.bounds.mins, layout.bounds.maxes) == ([first], [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)])
    assert table.scan(where="at IS NOT NULL").to_arrow()["id"].to_pylist() == [0, 2]
    assert table.scan(where="at < TIMESTAMP '0001-01-02 00:00:00+00:00'").to_arrow()["id"].to_pylist() == [0]


def test_a_page_layout_that_does_not_add_up_is_refused() -> None:
    header = pp.encode_struct({1: (5, 0), 2: (5, 10), 3: (5, 10), 5: (12, {1: (5, 7), 2: (5, 0)})})
    chunk = header + bytes(10)
    pages = pp.walk_pages(lambda offset, n: chunk[offset : offset + n], 0, len(chunk), 7, 6)
    assert pages == [pp.Page(0, len(chunk), 0, 7, False)]
    with pytest.raises(ValueError, match="rows"):
        pp.walk_pages(lambda offset, n: chunk[offset : offset + n], 0, len(chunk), 8, 7)
    with pytest.raises(ValueError):
        pp.walk_pages(lambda offset, n: chunk[offset : offset + n], 0, len(chunk) - 1, 7, 6)


def test_thrift_round_trip_of_a_footer(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(_data(100), path)
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - length : -8]
    assert pp.encode_struct(pp.decode_struct(footer)[0]) == footer


@pytest.mark.parametrize("count", [0, 1, 14, 15, 16, 300])
def test_thrift_round_trip_of_long_lists_far_field_ids_and_negative_numbers(count: int) -> None:
    """The compact protocol's long forms: a list of 15 or more items (its count after the
    header byte), a field id more than 15 past the one before (the id written out), and
    zigzag numbers below zero."""
    fields = {
        1: (pp._I32, -count),
        17: (pp._LIST, (pp._I64, [(-1) ** i * i * 1_000_003 for i in range(count)])),
        40: (pp._LIST, (pp._BINARY, [b"x" * i for i in range(count)])),
        41: (pp._TRUE, count % 2 == 0),
        300: (pp._LIST, (pp._STRUCT, [{1: (pp._I16, -i)} for i in range(count)])),
    }
    encoded = pp.encode_struct(fields)
    decoded, end = pp.decode_struct(encoded + b"tail")
    assert end == len(encoded)
    assert {fid: value for fid, (_, value) in decoded.items()} == {fid: value for fid, (_, value) in fields.items()}
    wanted = {1: 0, 41: -1}
    assert pp.scan_struct(encoded, 0, wanted) == end and wanted == {1: -count, 41: int(count % 2 == 0)}


def test_writer_data_keys_agree_with_the_pattern() -> None:
    rng = random.Random(4)
    alphabet = "0123456789abcdefABCDEF/.gz-"
    good = "data/" + "0123456789abcdef" * 2 + ".parquet"
    samples = [good, good.upper(), good[:-1] + "x", good.replace("data/", "date/"), "data/x.parquet", good + "/",
               "data/" + "a" * 31 + "/.parquet"]
    samples += ["data/" + "".join(rng.choice(alphabet) for _ in range(32)) + ".parquet" for _ in range(300)]
    samples += ["".join(rng.choice(alphabet) for _ in range(45)) for _ in range(100)]
    for chunk in (samples, [good] * 50, samples[3:]):
        paths = pa.chunked_array([chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]])
        expected = pc.match_substring_regex(paths, _DATA_KEY).to_numpy(zero_copy_only=False)
        assert (_writer_data_keys(paths) == expected).all()


def test_pages_that_rule_nothing_out_are_judged_in_two_row_groups_only(tmp_path: Path) -> None:
    """A key the file is not clustered by has every page spanning its whole range: once
    ``FUTILE_GROUPS`` row groups kept every page, the file's other groups are whole spans,
    their pages not judged. A file whose pages ruled something out keeps judging them."""
    rows, group = 200_000, 40_000
    spread = np.random.default_rng(3).permutation(rows)
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"sorted": np.arange(rows), "spread": spread}), path, row_group_size=group,
                   write_page_index=True)
    source = _source(path)
    leaves = leaf_columns(source.fragment.physical_schema)
    starts = np.arange(0, rows + 1, group)
    groups = list(range(rows // group))

    def spans(column: str, where: str) -> tuple[list[tuple[int, int]], int]:
        bound, judged = to_expr(where).bind(pa.schema([(column, pa.int64())])), []
        found = point_reads.candidate_spans(source, groups, starts, {column: leaves[column]},
                                            lambda lookup: judged.append(1) or bound.may_match(lookup))
        return found, len(judged)

    pages = group // 20_000
    assert spans("spread", f"spread = {spread[170_005]}") == (
        [(0, 2 * group)] + [(g * group, (g + 1) * group) for g in groups[2:]], point_reads.FUTILE_GROUPS * pages)
    pruned = ([(0, 60_000), (160_000, 180_000)], len(groups) * pages)
    assert spans("sorted", "sorted < 60000 OR sorted = 170005") == pruned
    assert spans("sorted", "sorted < 80000 OR sorted = 170005")[0] == [(0, 80_000), (80_000, 120_000),
                                                                        (120_000, 160_000), (160_000, 200_000)]


def test_matching_rows_taken_from_a_key_column_of_many_chunks() -> None:
    """``scan._rows_at``: the rows at ascending indexes of a table of many batches (a file's
    key column decoded whole), each from the batch holding it, as ``take`` gives them."""
    from manifest_table.data.scan import _rows_at

    rng = np.random.default_rng(11)
    for _ in range(200):
        sizes = rng.integers(0, 40, int(rng.integers(1, 6)))
        rows = int(sizes.sum())
        whole = pa.table({"a": np.arange(rows), "s": pa.array([str(i) for i in range(rows)], pa.string())})
        cuts = np.cumsum([0, *sizes])
        table = pa.Table.from_batches(
            [b for a, z in zip(cuts, cuts[1:]) for b in whole.slice(int(a), int(z - a)).to_batches()], whole.schema)
        index = np.unique(rng.integers(0, max(whole.num_rows, 1), int(rng.integers(0, 12)))) if whole.num_rows else []
        index = np.asarray(index, dtype=np.int64)
        assert _rows_at(table, index).equals(whole.take(index))


def test_an_offset_index_that_does_not_describe_its_chunk_is_refused() -> None:
    """``pages_of`` keeps page locations only if they tile the chunk exactly: the first data
    page where the footer says, pages end to end up to the chunk's end, rows from 0 ascending
    and no more than the row group's."""
    chunk = page_index.ChunkFacts(100, 40, 300, 1_000)  # (data pages from byte 100, a dictionary page at 40)
    good = [(100, 100, 0), (200, 140, 400)]
    assert page_index.pages_of(good, chunk) == [
        pp.Page(40, 60, 0, 0, True), pp.Page(100, 100, 0, 400, False), pp.Page(200, 140, 400, 600, False),
    ]
    for raw in (
        [],
        [(101, 99, 0), (200, 140, 400)],  # (the first data page elsewhere)
        [(100, 100, 1), (200, 140, 400)],  # (rows not from 0)
        [(100, 90, 0), (200, 140, 400)],  # (a gap between pages)
        [(100, 100, 0), (200, 150, 400)],  # (past the chunk's end)
        [(100, 100, 0), (200, 140, 0)],  # (rows not ascending)
        [(100, 100, 0), (200, 140, 1_000)],  # (a page of no rows at the end)
    ):
        assert page_index.pages_of(raw, chunk) is None, raw
    assert page_index.pages_of(good, page_index.ChunkFacts(100, 120, 300, 1_000)) is None  # (dictionary after)
    assert page_index.pages_of(good, page_index.ChunkFacts(100, None, 240, 1_000)) == [
        pp.Page(100, 100, 0, 400, False), pp.Page(200, 140, 400, 600, False),
    ]

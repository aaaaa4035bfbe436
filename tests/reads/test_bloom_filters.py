"""The ``bloom_filter_columns`` property (issue 36): files keep a bloom filter of the named
columns per row group, and lookups by value skip the row groups whose filter rules the value
out, on a layout where min/max cannot (keys spread over every row group). Rows are checked
against pyarrow's own filter of the data; the pruning itself at the row-group decision
(``data/scan.py``'s footer stats, with the filter's membership test); the property against
the schema (types, renames, drops); compaction keeps the filters."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.data import bloom_probes
from manifest_table.data.scan import _group_stats, _stats_lookup
from manifest_table.errors import InvalidArgumentError
from manifest_table.expressions.parser import parse
from manifest_table.format.stats import leaf_columns
from manifest_table.storage import FileIO, ParquetSource

ROWS = 60_000


def _data(rows: int = ROWS, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64) * 3  # spread over every row group; multiples of 3
    return pa.table({
        "id": ids,
        "name": pa.array([f"user-{i}" for i in ids]),
        "day": pa.array((ids % 20_000).astype(np.int32), pa.date32()),
        "amount": rng.random(rows),
    })


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    uri = str(tmp_path_factory.mktemp("bloom") / "t")
    return mt.write_table(
        uri, _data(), properties={"bloom_filter_columns": ["id", "name", "day"]}, row_group_size="64KiB"
    )


def _files(table: mt.Table) -> list[pq.ParquetFile]:
    root = Path(table.store.inner.root)
    return [pq.ParquetFile(str(root / f.path)) for f in table.scan().plan_files()]


def test_every_row_group_keeps_a_filter_of_the_named_columns(table: mt.Table) -> None:
    for file in _files(table):
        meta = file.metadata
        assert meta.num_row_groups > 10
        for g in range(meta.num_row_groups):
            kept = {meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i).bloom_filter_offset
                    for i in range(meta.num_columns)}
            assert all(kept[c] for c in ("id", "name", "day")) and not kept["amount"]


@pytest.mark.parametrize("where", [
    "id = {k}", "id = {absent}", "id IN ({k}, {absent}, {k2})", "name = 'user-{k}'", "name = 'user-{absent}'",
    "NOT (id <> {k})", "id = {k} OR name = 'user-{k2}'", "id = {k} AND name = 'user-{k2}'", "day = '1970-01-04'",
    "id = {k} OR amount < 0.0001",
])
def test_lookups_return_exactly_the_matching_rows(table: mt.Table, where: str) -> None:
    data = _data()
    rng = random.Random(where)
    for _ in range(5):
        k, k2 = (int(data["id"][rng.randrange(ROWS)].as_py()) for _ in range(2))
        text = where.format(k=k, k2=k2, absent=k + 1)
        got = table.scan(where=text).to_arrow().sort_by("id")
        expected = data.filter(parse(text).evaluate(data)).sort_by("id")
        assert got.equals(expected), text


def _groups_kept(table: mt.Table, where: str) -> tuple[int, int]:
    """(row groups a scan of ``where`` would read, row groups) over the table's files."""
    io, kept, total = FileIO(table.store), 0, 0
    expr = parse(where).bind(table.schema)
    for file in table.scan().plan_files():

        def count(source):
            leaves = leaf_columns(source.fragment.physical_schema)
            sources = {name: name for name in table.schema.names}
            groups = range(source.metadata.num_row_groups)
            lookups = [_stats_lookup(file, sources, lambda c, g=g: _group_stats(source, g, leaves, c)) for g in groups]
            return sum(expr.may_match(lookup) for lookup in lookups), len(groups)

        k, n = io.read_parquet(file.path, file.size, count)
        kept, total = kept + k, total + n
    return kept, total


def test_row_groups_whose_filter_rules_the_value_out_are_skipped(table: mt.Table) -> None:
    data = _data()
    present = [int(v) for v in data["id"].to_numpy()[:20]]
    for k in present:
        kept, total = _groups_kept(table, f"id = {k}")
        assert 1 <= kept <= 1 + total // 10, (k, kept, total)
    absent = [k + 1 for k in present]
    assert sum(_groups_kept(table, f"id = {k}")[0] for k in absent) <= 0.1 * 20 * _groups_kept(table, "id = 1")[1]
    last = int(data["id"][-1].as_py())  # (the first rows share a row group: the last row is in another)
    kept, total = _groups_kept(table, f"name = 'user-{present[0]}' OR id = {last}")
    assert 2 <= kept <= 2 + total // 5
    assert _groups_kept(table, f"id <> {present[0]}") == (_groups_kept(table, "id = 0")[1],) * 2  # never by filter


class _CountedOpens:
    """A pyarrow fragment whose ``open`` calls are counted."""

    def __init__(self, fragment: object) -> None:
        self._fragment, self.opens = fragment, 0

    def open(self) -> object:
        self.opens += 1
        return self._fragment.open()

    def __getattr__(self, name: str) -> object:
        return getattr(self._fragment, name)


def test_a_scans_probes_of_a_file_share_one_open_file(table: mt.Table) -> None:
    """Within ``batched`` (a scan choosing a file's row groups), every row group's filter is
    probed through one open file, and answers as when each probe opens the file itself."""
    data = _data()
    (file, *_) = table.scan().plan_files()

    def decisions(source: ParquetSource) -> list[list[bool]]:
        counted = dataclasses.replace(source, fragment=_CountedOpens(source.fragment), derived={})
        leaves = leaf_columns(source.fragment.physical_schema)
        sources = {name: name for name in table.schema.names}
        groups = range(source.metadata.num_row_groups)
        answers = []
        for k in [int(v) for v in data["id"].to_numpy()[:10]] + [1, 2]:
            expr = parse(f"id = {k}").bind(table.schema)
            lookups = [_stats_lookup(file, sources, lambda c, g=g: _group_stats(counted, g, leaves, c)) for g in groups]
            alone = [expr.may_match(lookup) for lookup in lookups]
            before = counted.fragment.opens
            with bloom_probes.batched():
                together = [expr.may_match(lookup) for lookup in lookups]
            assert counted.fragment.opens - before == 1
            assert together == alone
            answers.append(alone)
        return answers

    found = FileIO(table.store).read_parquet(file.path, file.size, decisions)
    assert any(not all(groups) for groups in found)  # (the filters ruled row groups out)


def test_deletes_and_updates_by_key_change_exactly_their_rows(tmp_path: Path) -> None:
    data = _data(20_000, seed=1)
    table = mt.write_table(str(tmp_path / "t"), data, properties={"bloom_filter_columns": ["id"]},
                           row_group_size="32KiB")
    ids = data["id"].to_pylist()
    assert table.delete(f"id = {ids[5]}").metrics["rows_deleted"] == 1
    assert table.delete(f"id = {ids[5] + 1}").metrics.get("rows_deleted", 0) == 0
    table.update(values={"amount": -1.0}, where=f"id = {ids[7]}")
    rows = table.scan().to_arrow()
    assert rows.num_rows == 19_999 and ids[5] not in rows["id"].to_pylist()
    assert rows.filter(pc.equal(rows["amount"], -1.0))["id"].to_pylist() == [ids[7]]
    table.compact(target_file_size="64MiB", min_deleted_fraction=0)
    for file in _files(table):
        meta = file.metadata
        assert all(meta.row_group(g).column(0).bloom_filter_offset for g in range(meta.num_row_groups))
    assert table.scan(where=f"id = {ids[7]}").to_arrow()["amount"].to_pylist() == [-1.0]


def test_the_property_names_columns_of_types_filters_are_kept_for(tmp_path: Path) -> None:
    table = mt.write_table(str(tmp_path / "t"), _data(100))
    with pytest.raises(InvalidArgumentError, match="bloom_filter_columns names column 'amount' of type double"):
        table.set_properties({"bloom_filter_columns": ["amount"]})
    with pytest.raises(InvalidArgumentError, match="'nope', which the table would not have"):
        table.set_properties({"bloom_filter_columns": ["nope"]})
    table.set_properties({"bloom_filter_columns": "id,name"})  # as the CLI passes it
    with table.update_schema() as schema:
        schema.rename_column("id", "key")
    assert table.properties["bloom_filter_columns"] == ["key", "name"]
    with pytest.raises(InvalidArgumentError, match="bloom_filter_columns names column 'name'"), \
            table.update_schema() as schema:
        schema.drop_column("name")
    assert table.version == 3  # nothing committed by the refusals
    # Files written after the rename keep filters of the column under the name they carry it by.
    before = {f.path for f in table.scan().plan_files()}
    table.append(_data(100, seed=1).rename_columns(["key", "name", "day", "amount"]))
    (new,) = [f for f in table.scan().plan_files() if f.path not in before]
    meta = pq.ParquetFile(str(Path(table.store.inner.root) / new.path)).metadata
    assert meta.schema.column(0).name == "id"  # (the files keep the column's first name)
    assert meta.row_group(0).column(0).bloom_filter_offset and meta.row_group(0).column(1).bloom_filter_offset

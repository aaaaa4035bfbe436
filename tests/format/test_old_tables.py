"""Formats are forever: a table written by release 0.1.0 (format version 1, before stricter
validation, SQL-exact filter semantics and footer stats) reads and writes with today's code.

`tests/data/table_written_by_0.1.0/` was made by 0.1.0's own code: appends, a delete, an
overwrite with a condition, a compaction and another delete, over an int, a string with nulls,
a float column holding NaN (0.1.0 stored no min/max for it), a decimal and a timestamp zoned
in Europe/Berlin across the repeated hour of 2024-10-27. `...expected/v{N}.parquet` holds
what 0.1.0 read at each version, sorted by id. `table_written_by_0.2.0/` is the same for the
first release of format version 2 (its script: `tests/data/write_table_0.2.0.py`), and
`table_with_second_units_by_0.2.0/` one whose segments hold second-unit timestamps and date64
(`tests/data/write_second_units_table_0.2.0.py`), and `table_with_updates_by_0.3.0/` updates and
upserts from before commits recorded their change feed pairs
(`tests/data/write_updates_table_0.3.0.py`). Each is also counted at every version by the
`count` command, which reads the manifests alone."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.expressions import parse
from tests.cli_run import cli_count

DATA = Path(__file__).parents[1] / "data"
WRITTEN = DATA / "table_written_by_0.1.0"
EXPECTED = DATA / "table_written_by_0.1.0.expected"
FILTERS = [
    "score > 5", "score < 5", "score != 2.5e0", "score IS NULL", "amount = 0.30", "amount >= 1.05",
    "ts >= TIMESTAMP '2024-10-27 01:10:00+00:00'", "ts < TIMESTAMP '2024-10-27 02:30:00+01:00'",
    "name LIKE 'n1%'", "name IS NULL OR id > 100", "NOT (id IN (1, 2, 3, 207))",
]


def rows(table: pa.Table) -> list[dict]:
    """Rows sorted by id, NaN made comparable (NaN != NaN would fail every equality)."""
    return [{k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in table.sort_by("id").to_pylist()]


def copy_of(written: Path, tmp_path: Path) -> mt.Table:
    """A copy, so tests can write to it."""
    root = tmp_path / written.name
    shutil.copytree(written, root)
    return mt.open_table(str(root))


@pytest.fixture
def old_table(tmp_path: Path) -> mt.Table:
    return copy_of(WRITTEN, tmp_path)


def test_every_version_reads_as_the_release_that_wrote_it(old_table: mt.Table) -> None:
    assert old_table.version == 7
    for version in range(old_table.version + 1):
        expected = pq.read_table(EXPECTED / f"v{version}.parquet")
        assert rows(old_table.scan(version=version).to_arrow()) == rows(expected), version
        assert old_table.scan(version=version).count() == expected.num_rows


@pytest.mark.parametrize("where", FILTERS)
def test_old_stats_never_prune_a_matching_row(old_table: mt.Table, where: str) -> None:
    """Pruning by the stats 0.1.0 stored must keep every row today's row filter selects."""
    everything = pq.read_table(EXPECTED / "v7.parquet")
    mask = parse(where).evaluate(everything)
    assert rows(old_table.scan(where=where).to_arrow()) == rows(everything.filter(mask))


def test_an_old_table_takes_new_commits_and_maintenance(old_table: mt.Table) -> None:
    before = pq.read_table(EXPECTED / "v7.parquet")
    old_table.append(before.slice(0, 3).set_column(0, "id", [[1000, 1001, 1002]]))
    old_table.delete("id = 1001")
    old_table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)
    report = old_table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert report.versions_expired and not report.unknown_keys
    assert old_table.scan().count() == before.num_rows + 2
    assert sorted(old_table.scan(where="id >= 1000").to_arrow().column("id").to_pylist()) == [1000, 1002]


def test_an_old_table_upgrades_to_format_v2_and_keeps_its_history(old_table: mt.Table) -> None:
    """Upgrade moves the 0.1.0 files (and newer v1 ones) into segments; their stats (no max
    for NaN, decimals, zoned timestamps) become typed segment columns and still never prune
    a matching row."""
    v7 = pq.read_table(EXPECTED / "v7.parquet")
    for i in range(3):
        old_table.append(v7.slice(i, 1).set_column(0, "id", [[1000 + i]]))
    everything = old_table.to_arrow()  # read as format v1
    info = old_table.upgrade({"segment_target_files": 2})
    assert info.committed and old_table.manifest().format_version == 2
    assert [s.files for s in old_table.manifest().index.segments] == [2, 2]
    for version in range(8):
        expected = pq.read_table(EXPECTED / f"v{version}.parquet")
        assert rows(old_table.scan(version=version).to_arrow()) == rows(expected), version
    filters_and_maintenance_work(old_table, everything, FILTERS, 1001)


def filters_and_maintenance_work(table: mt.Table, everything: pa.Table, filters: list[str], row_id: int) -> None:
    """Each filter selects what pyarrow selects from ``everything`` (the table's rows); then
    deleting row ``row_id``, compaction and gc leave the rest."""
    for where in filters:
        mask = parse(where).evaluate(everything)
        assert rows(table.scan(where=where).to_arrow()) == rows(everything.filter(mask)), where
    table.delete(f"id = {row_id}")
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)
    table.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert table.scan().count() == everything.num_rows - 1


V2_WRITTEN = DATA / "table_written_by_0.2.0"
V2_EXPECTED = DATA / "table_written_by_0.2.0.expected"


@pytest.fixture
def v2_table(tmp_path: Path) -> mt.Table:
    return copy_of(V2_WRITTEN, tmp_path)


def test_a_format_v2_table_of_0_2_0_reads_at_every_version_and_takes_commits(v2_table: mt.Table) -> None:
    """Written by tests/data/write_table_0.2.0.py: segments, merges, a deletes map, a
    compaction and an overwrite."""
    index = v2_table.manifest().index
    assert index is not None and index.segments and index.deletes
    for version in range(v2_table.version + 1):
        expected = pq.read_table(V2_EXPECTED / f"v{version}.parquet")
        assert rows(v2_table.scan(version=version).to_arrow()) == rows(expected), version
        assert v2_table.scan(version=version).count() == expected.num_rows
    latest = pq.read_table(V2_EXPECTED / f"v{v2_table.version}.parquet")
    filters_and_maintenance_work(v2_table, latest, ["id = 42", "id >= 100", "score > 20", "name IS NULL",
                                                    "amount < 0.30"], 42)


SECONDS_WRITTEN = DATA / "table_with_second_units_by_0.2.0"
SECONDS_EXPECTED = DATA / "table_with_second_units_by_0.2.0.expected"


def test_a_table_of_0_2_0_with_second_units_and_date64_in_segments_reads_and_takes_commits(tmp_path: Path) -> None:
    """Written by tests/data/write_second_units_table_0.2.0.py: the segment statistics of its
    timestamp[s] and date64 columns are Parquet's milliseconds and date32, which 0.2.0 itself
    could not decode from a fresh handle (issue 24); they read as the declared types, prune
    exactly, and the table takes new commits whose segments decode too."""
    table = copy_of(SECONDS_WRITTEN, tmp_path)
    assert table.manifest().index.segments
    for version in range(table.version + 1):
        expected = pa.ipc.open_file(SECONDS_EXPECTED / f"v{version}.arrow").read_all()
        got = table.scan(version=version).to_arrow()
        assert got.schema == expected.schema and got.sort_by("id").equals(expected.sort_by("id")), version
    latest = pa.ipc.open_file(SECONDS_EXPECTED / f"v{table.version}.arrow").read_all()
    filters_and_maintenance_work(table, latest, [
        "ts >= TIMESTAMP '2024-10-27 09:00:00'", "ts < TIMESTAMP '2024-10-27 09:00:00.5'",
        "utc < TIMESTAMP '2024-10-20 00:00:00Z'", "utc IS NULL", "day = DATE '2022-01-08'",
        "day > DATE '2022-01-25'", "id < 5"], 7)
    table.append(latest.slice(0, 3).set_column(0, "id", pa.array([1000, 1001, 1002], pa.int64())))
    fresh = mt.open_table(table.uri)
    assert fresh.scan(where="id >= 1000").to_arrow().schema == latest.schema
    assert fresh.scan().count() == latest.num_rows + 2


UPDATES_WRITTEN = DATA / "table_with_updates_by_0.3.0"


def test_the_change_feed_of_a_table_of_0_3_0_reports_its_updates_as_deletes_and_inserts(tmp_path: Path) -> None:
    """Written by tests/data/write_updates_table_0.3.0.py (every kind of write, updates and
    upserts recorded no pairs then): each commit's change rows are the difference of the
    versions around it, read as the latest schema (a rename included), its updates and
    upserts as deletes and inserts (docs/changes.md). A new update on it pairs."""
    table = copy_of(UPDATES_WRITTEN, tmp_path)
    feed = table.changes(0).to_arrow()
    assert set(feed.column("_change_type").to_pylist()) == {"insert", "delete"}
    data = feed.column_names[:3]
    for version in range(1, table.version + 1):
        before = Counter(tuple(r.values()) for r in table.scan(version=version - 1).to_arrow().to_pylist())
        after = Counter(tuple(r.values()) for r in table.scan(version=version).to_arrow().to_pylist())
        commit = feed.filter(pc.equal(feed.column("_commit_version"), version))
        found = {kind: Counter(tuple(r[c] for c in data) for r in commit.to_pylist() if r["_change_type"] == kind)
                 for kind in ("delete", "insert")}
        assert found == {"delete": before - after, "insert": after - before}, version
    table.update(values={"qty": 7}, where="id = 30")
    assert table.changes(table.version - 1).to_arrow().column("_change_type").to_pylist() == [
        "update_preimage", "update_postimage"]


@pytest.mark.parametrize("written", [WRITTEN, V2_WRITTEN, SECONDS_WRITTEN, UPDATES_WRITTEN], ids=lambda p: p.name)
def test_the_count_command_counts_every_version_of_an_old_table_as_it_reads(written: Path, tmp_path: Path) -> None:
    """``manifest-table count`` answers from the manifest alone, its schema and stats left
    encoded (format/stored_schema.py): at every version of every old table, with and without
    a filter, it counts the rows a scan reads."""
    table = copy_of(written, tmp_path)
    assert table.version > 3
    for version in range(table.version + 1):
        assert cli_count(table.uri, version) == table.scan(version=version).to_arrow().num_rows, version
    where = f"{table.schema.names[0]} >= 40"
    assert cli_count(table.uri, where=where) == table.scan(where=where).to_arrow().num_rows

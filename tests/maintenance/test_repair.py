"""Detection, not silence: a version that references a missing object reads as corruption
naming the version and the key (not as an expired version), and ``repair`` commits a version
without what is gone, reporting every lost file and its rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import CorruptTableError, VersionExpiredError
from manifest_table.storage import MemoryStore, ObjectInfo
from tests.stores import WrappedStore

SCHEMA = pa.schema([("id", pa.int64())])


def ids(t: mt.Table) -> list[int]:
    return sorted(t.scan().to_arrow().column("id").to_pylist())


def damaged(tmp_path: Path, **options: object) -> tuple[mt.Table, str]:
    """A table of 3 appends whose second data file is deleted by hand."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, **options)  # type: ignore[arg-type]
    for start in (0, 10, 20):
        t.append(pa.table({"id": list(range(start, start + 3))}))
    gone = t.manifest(2).tail[-1].path if t.manifest(2).tail else sorted(f.path for f in t.manifest().files)[1]
    (tmp_path / "t" / gone).unlink()
    return t, gone


def test_a_missing_data_file_reads_as_corruption_naming_version_and_key(tmp_path: Path) -> None:
    t, gone = damaged(tmp_path)
    with pytest.raises(CorruptTableError, match=rf"version 3 of .* references {gone}, which is missing.*repair"):
        t.scan().to_arrow()
    with pytest.raises(CorruptTableError, match="version 3"):
        with t.transaction() as tx:
            tx.delete("id = 11")
    assert t.scan(where="id < 10").count() == 3  # what planning skips is not read


def test_an_expired_version_still_reads_as_expired(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.table({"id": [1]}))
    t.overwrite(pa.table({"id": [2]}))
    scan = t.scan(version=1)
    t.gc(retain_versions=1, retain_for=None, grace="0", force=True)
    expired = "of version 1 of .* is gone: garbage collection has removed this version"
    with pytest.raises(VersionExpiredError, match=expired):
        scan.to_arrow()


def test_repair_drops_the_missing_file_and_reports_it(tmp_path: Path) -> None:
    t, gone = damaged(tmp_path)
    dry = t.repair(dry_run=True)
    assert [(f.path, f.rows) for f in dry.lost] == [(gone, 3)] and dry.commit is None and t.version == 3
    assert "would drop 1 file: 3 rows lost" in str(dry) and gone in str(dry)
    report = t.repair()
    assert report.commit is not None and report.commit.version == 4 and report.rows_lost == 3
    assert t.history()[0].operation == "repair" and t.history()[0].metrics == {"files_lost": 1, "rows_lost": 3}
    assert ids(t) == [0, 1, 2, 20, 21, 22]
    assert not t.repair().damaged and t.version == 4
    assert t.append(pa.table({"id": [30]})).version == 5


def test_a_listing_that_lags_loses_nothing(tmp_path: Path) -> None:
    """A listing may not show an object created moments ago (or one a store's index
    dropped): repair confirms each key the listing lacks with a HEAD before it drops a file,
    so an intact table stays intact."""

    class LaggingList(WrappedStore):
        def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
            return (info for info in self.inner.list(prefix) if not info.key.startswith(("data/", "tombstones/")))

    t = mt.create_table("mem://t", SCHEMA, store=LaggingList(MemoryStore()))
    for start in (0, 10):
        t.append(pa.table({"id": list(range(start, start + 3))}))
    t.delete("id = 1")
    report = t.repair()
    assert not report.damaged and report.commit is None and t.version == 3
    assert ids(t) == [0, 2, 10, 11, 12]


def test_a_file_whose_tombstone_is_gone_is_dropped_not_resurrected(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.table({"id": [1, 2, 3]}))
    t.append(pa.table({"id": [4, 5]}))
    t.delete("id = 2")
    tombstone = next(f.deletes.path for f in t.manifest().files if f.deletes)
    (tmp_path / "t" / tombstone).unlink()
    with pytest.raises(CorruptTableError, match=tombstone):
        t.to_arrow()
    report = t.repair()
    assert [(f.rows, f.missing) for f in report.lost] == [(2, tombstone)]  # its live rows
    assert ids(t) == [4, 5]  # id 2, deleted, never comes back


def test_a_missing_segment_is_dropped_with_its_entries(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties={"tail_limit": 1, "max_small_segments": 100})
    for start in (0, 10, 20):
        t.append(pa.table({"id": [start, start + 1]}))
    t.delete("id = 21 OR id = 1")  # id 1's vector goes to the root's deletes map
    assert t.manifest().index.deletes  # type: ignore[union-attr]
    segment = t.manifest().index.segments[0].path  # type: ignore[union-attr]
    (tmp_path / "t" / segment).unlink()
    with pytest.raises(CorruptTableError, match=segment):
        mt.open_table(t.uri).to_arrow()
    report = t.repair()  # this handle has the segment cached: repair looks at the store
    assert report.lost_segments == {segment: 4} and "1 segment" in str(report)  # the first two appends
    assert ids(t) == [20] and t.scan().count() == 1 and mt.open_table(t.uri).scan().count() == 1
    assert not t.manifest().index.deletes  # type: ignore[union-attr]  # its file went with the segment
    assert t.append(pa.table({"id": [30]})).version == 6 and ids(mt.open_table(t.uri)) == [20, 30]


def test_database_repair_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = mt.create_database(str(tmp_path / "db"))
    a = db.create_table("a", SCHEMA)
    a.append(pa.table({"id": [1]}))
    a.append(pa.table({"id": [2]}))
    db.create_table("b", SCHEMA).append(pa.table({"id": [3]}))
    gone = a.manifest().tail[0].path
    (tmp_path / "db" / f"tables/{a.table_id}/{gone}").unlink()
    with pytest.raises(CorruptTableError, match=gone):
        db.table("a").to_arrow()
    assert main(["repair", db.uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{gone}: 1 row (missing)" in out and "nothing to repair" in out  # a, then b
    reports = db.repair()
    assert reports["a"].rows_lost == 1 and not reports["b"].damaged
    assert ids(db.table("a")) == [2] and ids(db.table("b")) == [3]
    assert main(["repair", a.uri]) == 0 and "nothing to repair" in capsys.readouterr().out

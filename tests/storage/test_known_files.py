"""The footers ``FileIO`` keeps between reads of local data files (``KnownFiles``): a kept
footer, and what readers derived from it, is used again only for the very file it was parsed
from, never for another path, another size, or a file written again at the same path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.errors import CorruptTableError, NotFound
from manifest_table.storage import FileIO, LocalStore
from manifest_table.storage.fileio import KnownFiles, ParquetSource

ROWS = 1_000


def _write(path: Path, first: int) -> int:
    """A file of ``ROWS`` int64s from ``first``, of the same size whatever ``first`` is (plain,
    uncompressed, no statistics); returns its size."""
    table = pa.table({"x": np.arange(first, first + ROWS, dtype=np.int64)})
    pq.write_table(table, path, compression="none", use_dictionary=False, write_statistics=False)
    return path.stat().st_size


def _read(io: FileIO, key: str, size: int) -> tuple[ParquetSource, list[int]]:
    return io.read_parquet(key, size, lambda s: (s, s.fragment.to_table()["x"].to_pylist()[:2]))


@pytest.fixture
def io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileIO:
    monkeypatch.setattr("manifest_table.storage.fileio.WHOLE_READ_BYTES", 0)  # every file read by ranges
    return FileIO(LocalStore(tmp_path))


def test_the_same_file_is_parsed_once(io: FileIO, tmp_path: Path) -> None:
    size = _write(tmp_path / "a.parquet", 0)
    first, values = _read(io, "a.parquet", size)
    first.derived["mark"] = 1
    again, _ = _read(io, "a.parquet", size)
    assert again is first and again.derived["mark"] == 1 and values == [0, 1]


def test_another_path_is_another_file(io: FileIO, tmp_path: Path) -> None:
    size = _write(tmp_path / "a.parquet", 0)
    assert _write(tmp_path / "b.parquet", 5_000) == size
    a, _ = _read(io, "a.parquet", size)
    b, values = _read(io, "b.parquet", size)
    assert b is not a and values == [5_000, 5_001]


def test_a_file_written_again_at_the_same_path_is_parsed_again(io: FileIO, tmp_path: Path) -> None:
    """Replaced by a rename (a new inode), or rewritten in place (a new modification time):
    the same size is not enough to reuse the footer."""
    path = tmp_path / "a.parquet"
    size = _write(path, 0)
    old, _ = _read(io, "a.parquet", size)
    assert _write(tmp_path / "tmp.parquet", 7_000) == size
    before = path.stat()
    os.utime(tmp_path / "tmp.parquet", ns=(before.st_atime_ns, before.st_mtime_ns))  # (as rsync -a keeps times)
    os.replace(tmp_path / "tmp.parquet", path)
    renamed, values = _read(io, "a.parquet", size)
    assert renamed is not old and values == [7_000, 7_001]
    assert _write(tmp_path / "tmp.parquet", 9_000) == size
    stat = path.stat()
    with open(path, "r+b") as f:  # the same inode, other bytes: as a restore from a backup might
        f.write((tmp_path / "tmp.parquet").read_bytes())
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # (a coarse clock could repeat it)
    rewritten, values = _read(io, "a.parquet", size)
    assert rewritten is not renamed and values == [9_000, 9_001]


def test_a_size_other_than_the_manifests_is_never_served_from_memory(io: FileIO, tmp_path: Path) -> None:
    """(A local file's size comes from the filesystem on a ranged read: a wrong manifest size
    is harmless there, docs/protocol.md; it only never matches a kept footer.)"""
    size = _write(tmp_path / "a.parquet", 0)
    kept, _ = _read(io, "a.parquet", size)
    other, values = _read(io, "a.parquet", size + 1)
    assert other is not kept and values == [0, 1]
    assert _read(io, "a.parquet", size)[0] is kept


def test_a_missing_file_read_by_ranges_is_not_found(io: FileIO) -> None:
    """Without a HEAD first, the failed footer read is told from a transient failure by one
    HEAD, on that path only (``FileIO._read_error``)."""
    with pytest.raises(NotFound):
        _read(io, "gone.parquet", 1_000)


def test_a_removed_file_is_not_found_though_its_footer_was_kept(tmp_path: Path) -> None:
    table = mt.write_table(str(tmp_path / "t"), pa.table({"x": np.arange(300_000)}))
    assert table.scan(where="x = 5").count() == 1
    for f in table.manifest().files:
        os.remove(tmp_path / "t" / f.path)
    with pytest.raises(CorruptTableError, match="references .*, which is missing"):  # the latest version: damaged
        table.scan(where="x = 5").count()


def test_the_least_recently_used_files_are_dropped(io: FileIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KnownFiles, "MAX_FILES", 2)
    sizes = {name: _write(tmp_path / name, i) for i, name in enumerate(["a", "b", "c"])}
    a, _ = _read(io, "a", sizes["a"])
    b, _ = _read(io, "b", sizes["b"])
    assert _read(io, "a", sizes["a"])[0] is a  # a used last: b goes first
    _read(io, "c", sizes["c"])
    assert _read(io, "a", sizes["a"])[0] is a
    assert _read(io, "b", sizes["b"])[0] is not b


def test_footers_past_their_byte_budget_are_dropped_but_the_last_one_stays(
    io: FileIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MAX_FOOTER_BYTES`` bounds what wide files' footers hold in memory; a footer parsed
    again for a file written again replaces its old one in the count, and a single footer
    larger than the budget is still kept (the file being read uses it)."""
    sizes = {name: _write(tmp_path / name, i) for i, name in enumerate(["a", "b", "c", "d"])}
    footer = _read(io, "a", sizes["a"])[0].metadata.serialized_size
    monkeypatch.setattr(KnownFiles, "MAX_FOOTER_BYTES", 2 * footer)
    for first in (10, 20, 30):  # "a" written again three times: one footer in the count, not four
        stat = (tmp_path / "a").stat()
        _write(tmp_path / "a", first)
        os.utime(tmp_path / "a", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        _read(io, "a", sizes["a"])
    a, _ = _read(io, "a", sizes["a"])
    b, _ = _read(io, "b", sizes["b"])
    assert _read(io, "a", sizes["a"])[0] is a and _read(io, "b", sizes["b"])[0] is b  # two fit
    _read(io, "c", sizes["c"])  # a third does not: the least recently used goes
    assert _read(io, "b", sizes["b"])[0] is b
    assert _read(io, "a", sizes["a"])[0] is not a
    monkeypatch.setattr(KnownFiles, "MAX_FOOTER_BYTES", footer // 2)
    d, _ = _read(io, "d", sizes["d"])
    assert _read(io, "d", sizes["d"])[0] is d
    assert _read(io, "b", sizes["b"])[0] is not b

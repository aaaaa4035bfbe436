"""The order of a local commit's syncs (docs/protocol.md, "Durability on a local directory"):
every object a manifest names, bytes and name, is synced before the manifest is linked; the
manifest's bytes before its link and `manifest/` after it, before the pointer moves; the
pointer's bytes before its rename. Recorded from the system calls themselves (``os.fsync``,
``os.link``, ``os.replace``), on whichever thread makes them."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int64())])


class SyncLog:
    """What was synced, linked and renamed, in order: ("sync", inode or directory path),
    ("link", final path), ("rename", final path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, object]] = []
        self._lock = threading.Lock()
        real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

        def fsync(fd: int) -> None:
            st = os.fstat(fd)
            what = os.readlink(f"/proc/self/fd/{fd}") if stat.S_ISDIR(st.st_mode) else (st.st_dev, st.st_ino)
            real_fsync(fd)
            self._add("sync", what)

        def link(src: str, dst: str, *args: object, **kwargs: object) -> None:
            real_link(src, dst, *args, **kwargs)  # type: ignore[arg-type]
            self._add("link", os.path.abspath(dst))

        def replace(src: str, dst: str, *args: object, **kwargs: object) -> None:
            real_replace(src, dst, *args, **kwargs)  # type: ignore[arg-type]
            self._add("rename", os.path.abspath(dst))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "link", link)
        monkeypatch.setattr(os, "replace", replace)

    def _add(self, kind: str, what: object) -> None:
        with self._lock:
            self.events.append((kind, what))

    def first(self, kind: str, what: object) -> int:
        """Where the first such event is (it must be there)."""
        return self.events.index((kind, what))


def _inode(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _new(root: Path, folder: str, before: set[Path]) -> list[Path]:
    return sorted(set((root / folder).glob("*")) - before)


def _check_commit(log: SyncLog, root: Path, version: int, staged: list[Path]) -> None:
    manifest = (root / "manifest" / f"v{version:020d}.json").resolve()
    linked = log.first("link", str(manifest))
    assert log.first("sync", _inode(manifest)) < linked  # bytes, then name
    for path in staged:  # each object the manifest names: bytes and name before the manifest
        assert log.first("sync", _inode(path)) < linked, path
        assert log.first("sync", str(path.parent.resolve())) < linked, path.parent
    manifests_synced = [i for i, e in enumerate(log.events) if e == ("sync", str(manifest.parent))]
    assert any(i > linked for i in manifests_synced)  # the commit point, before the ack
    pointer = log.first("rename", str((root / "_latest_manifest").resolve()))
    assert min(i for i in manifests_synced if i > linked) < pointer
    assert log.events[pointer - 1][0] == "sync"  # the pointer's own bytes, just before


@pytest.mark.parametrize("operation", ["append", "delete", "update", "transaction"])
def test_a_local_commit_syncs_what_the_manifest_names_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    root = tmp_path / "t"
    table = mt.create_table(str(root), SCHEMA)
    table.append(pa.table({"id": list(range(10)), "qty": [1] * 10}, schema=SCHEMA))
    before = {p for folder in ("data", "tombstones") for p in (root / folder).glob("*")}
    log = SyncLog(monkeypatch)
    if operation == "append":
        info = table.append(pa.table({"id": [10], "qty": [1]}, schema=SCHEMA))
    elif operation == "delete":
        info = table.delete("id = 3")
    elif operation == "update":
        info = table.update(values={"qty": 0}, where="id = 3")
    else:  # a transaction's writes sync as they are made, not deferred to its commit
        with table.transaction() as tx:
            tx.append(pa.table({"id": [10], "qty": [1]}, schema=SCHEMA))
            tx.delete("id = 3")
        info = table.history()[0]
    staged = _new(root, "data", before) + _new(root, "tombstones", before)
    assert len(staged) == {"append": 1, "delete": 1, "update": 2, "transaction": 2}[operation]
    _check_commit(log, root, info.version, staged)
    monkeypatch.undo()
    count = {"append": 11, "delete": 9, "update": 10, "transaction": 10}[operation]
    assert mt.open_table(str(root)).scan().count() == count


@pytest.mark.parametrize("operation", ["append", "delete", "update"])
def test_a_failed_sync_of_a_staged_object_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """A one-call operation's fresh objects sync in the background (storage/local.py's
    ``deferred_syncs``); when one's sync fails, the manifest that would name it is never
    written, the object is removed, and the next operation commits normally."""
    root = tmp_path / "t"
    table = mt.create_table(str(root), SCHEMA)
    table.append(pa.table({"id": list(range(10)), "qty": [1] * 10}, schema=SCHEMA))
    before = {p for folder in ("data", "tombstones") for p in (root / folder).glob("*")}
    version = table.version
    real_fsync = os.fsync

    def failing(fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode) and (os.readlink(f"/proc/self/fd/{fd}")).startswith(
            (str(root / "data"), str(root / "tombstones"))
        ):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(mt.errors.SyncFailedError, match="Input/output error"):
        if operation == "append":
            table.append(pa.table({"id": [10], "qty": [1]}, schema=SCHEMA))
        elif operation == "delete":
            table.delete("id = 3")
        else:
            table.update(values={"qty": 0}, where="id = 3")
    monkeypatch.undo()
    assert mt.open_table(str(root)).version == version
    assert not _new(root, "data", before) and not _new(root, "tombstones", before)  # removed
    assert not list((root / "manifest").glob(f"v{version + 1:020d}*"))
    table.delete("id = 4")
    assert mt.open_table(str(root)).scan().count() == 9


def test_a_failed_sync_of_the_manifest_directory_says_the_version_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the manifest's link the version is committed whatever happens; a failed sync of
    ``manifest/`` then fails the pointer's move with an error that says so (the caller must
    not retry), and the table reads the version."""
    root = tmp_path / "t"
    table = mt.create_table(str(root), SCHEMA)
    table.append(pa.table({"id": list(range(10)), "qty": [1] * 10}, schema=SCHEMA))
    version = table.version
    real_fsync = os.fsync

    def failing(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode) and os.readlink(f"/proc/self/fd/{fd}") == str(root / "manifest"):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(mt.errors.CommitFailedError, match="do not retry it.*may not survive a power loss"):
        table.delete("id = 3")
    monkeypatch.undo()
    reopened = mt.open_table(str(root))
    assert reopened.version == version + 1
    assert reopened.scan().count() == 9

"""The data files of a table state: all of them, the ones a filter may match (planning), or
given ones by path, reading no more of a v2 version than that needs.

Planning a v2 version skips every segment whose summary cannot match, filters the entries
of the others with one Arrow expression over their typed stats columns, and checks the
survivors with ``may_match``: the same answer as checking every file, at the cost of the
segments a filter touches."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Iterator, Mapping, Protocol, Sequence, overload

import numpy as np

from .expressions import Expr
from .format.manifest import DataFile, DeletionVector, Manifest
from .format.segment import Segment


class FileSet(Protocol):
    def all(self) -> Sequence[DataFile]:
        """Every file, in table order."""

    def plan(self, where: Expr | None) -> Sequence[DataFile]:
        """The files with live rows whose stats may match the bound ``where`` (all of them
        for None)."""

    def live_rows(self) -> int:
        """Rows not deleted by committed deletes, over every file."""


def _may_match(files: Iterable[DataFile], where: Expr | None) -> list[DataFile]:
    return [f for f in files if f.live_rows > 0 and (where is None or where.may_match(f.stats.get))]


@dataclass(frozen=True)
class ListedFiles:
    """Files given as a list (a v1 manifest, a compaction group)."""

    files: Sequence[DataFile]

    def all(self) -> Sequence[DataFile]:
        return self.files

    def plan(self, where: Expr | None) -> list[DataFile]:
        return _may_match(self.files, where)

    def live_rows(self) -> int:
        return sum(f.live_rows for f in self.files)


@dataclass(frozen=True)
class VersionFiles:
    """The files of one committed version."""

    manifest: Manifest

    def all(self) -> Sequence[DataFile]:
        return self.manifest.files

    def plan(self, where: Expr | None) -> Sequence[DataFile]:
        manifest, index = self.manifest, self.manifest.index
        if index is None:
            return _may_match(manifest.tail, where)
        parts: list[Sequence[DataFile]] = []
        summaries = [s for s in index.segments if where is None or where.may_match(s.stats.get)]
        segments = list(manifest.segments(summaries))
        manifest.check_listed_once([s.listed for s in segments])
        for segment in segments:
            chosen = segment.candidates(where, index.deletes)
            if where is None:
                parts.append(_Entries(segment, chosen, index.deletes))
            else:
                parts.append(_may_match(segment.files(chosen, index.deletes), where))
        parts.append(_may_match(manifest.tail, where))
        return PlannedFiles(parts)

    def live_rows(self) -> int:
        return self.manifest.live_rows


@dataclass(frozen=True)
class StagedFiles:
    """A transaction's view: its snapshot's files without those it removes, plus its own."""

    base: VersionFiles
    removed: frozenset[str] = frozenset()
    added: Sequence[DataFile] = field(default_factory=tuple)

    def all(self) -> Sequence[DataFile]:
        return [f for f in self.base.all() if f.path not in self.removed] + list(self.added)

    def plan(self, where: Expr | None) -> Sequence[DataFile]:
        kept = [f for f in self.base.plan(where) if f.path not in self.removed]
        return kept + _may_match(self.added, where)

    def live_rows(self) -> int:
        return sum(f.live_rows for f in self.all())


class PlannedFiles(Sequence[DataFile]):
    """The files a plan chose, in table order. Entries of segments become ``DataFile``
    objects only as they are used: planning a full scan of a million files then costs a few
    vectorised passes, and the scan takes the files one by one."""

    def __init__(self, parts: Sequence[Sequence[DataFile]]) -> None:
        self._parts = [p for p in parts if len(p)]
        self._starts = np.cumsum([0] + [len(p) for p in self._parts])

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __iter__(self) -> Iterator[DataFile]:
        return chain.from_iterable(self._parts)

    @overload
    def __getitem__(self, i: int) -> DataFile: ...
    @overload
    def __getitem__(self, i: slice) -> list[DataFile]: ...

    def __getitem__(self, i: int | slice) -> DataFile | list[DataFile]:
        if isinstance(i, slice):
            return list(self)[i]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        part = int(np.searchsorted(self._starts, i, side="right")) - 1
        return self._parts[part][i - int(self._starts[part])]


@dataclass(frozen=True)
class _Entries(Sequence[DataFile]):
    """Chosen entries of one segment, made into ``DataFile`` objects in batches as iterated."""

    segment: Segment
    indices: np.ndarray
    deletes: Mapping[str, DeletionVector]

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[DataFile]:
        for start in range(0, len(self.indices), 4096):
            yield from self.segment.files(self.indices[start:start + 4096], self.deletes)

    def __getitem__(self, i):  # type: ignore[override]
        j = range(len(self.indices))[i]
        return self.segment.files(self.indices[j:j + 1], self.deletes)[0]


def locate(manifest: Manifest, paths: Iterable[str]) -> dict[str, tuple[DataFile, str | None]]:
    """The entries of ``paths`` that ``manifest`` lists, each with the key of the segment
    holding it (None: the root's tail). Segments already in the reader's cache are searched
    first: a delete or overwrite has just read the ones holding its files."""
    wanted = set(paths)
    found: dict[str, tuple[DataFile, str | None]] = {}
    for f in manifest.tail:
        if f.path in wanted:
            found[f.path] = (f, None)
    wanted -= found.keys()
    index, reader = manifest.index, manifest.reader
    if not wanted or index is None or reader is None:
        return found
    segments = sorted(index.segments, key=lambda s: reader.cached(s.path, manifest.schema, index.field_ids) is None)
    for summary in segments:
        segment = manifest.segment(summary.path)
        hits = {path: i for path in wanted if (i := segment.index_of(path)) is not None}
        for path, f in zip(hits, segment.files(list(hits.values()), index.deletes)):
            found[path] = (f, summary.path)
        wanted -= hits.keys()
        if not wanted:
            break
    return found


@dataclass(frozen=True)
class VersionDiff:
    """What a successor changed relative to a version, as rebasing asks it."""

    gone: set[str]
    """Files of the version that the successor no longer lists."""
    touched: set[str]
    """Files of both whose deletion vectors differ."""
    new_files: list[DataFile]
    """Files the successor added."""
    _after: dict[str, DataFile]
    _successor: Manifest

    def after(self, paths: Iterable[str]) -> dict[str, DataFile]:
        """The successor's entries of ``paths``."""
        found = {p: self._after[p] for p in paths if p in self._after}
        rest = [p for p in paths if p not in found]
        found.update({p: f for p, (f, _) in locate(self._successor, rest).items()})
        return found


def diff(prev: Manifest, successor: Manifest) -> VersionDiff:
    """Compare two versions reading only the segments one has and the other does not:
    a segment both list holds the same entries in both (segments are write-once), and
    their deletion vectors differ only where the roots' ``deletes`` maps do."""
    if prev.index is None or successor.index is None:
        before, after, shared_changes = prev.file_map(), successor.file_map(), set()
    else:
        shared = {s.path for s in prev.index.segments} & {s.path for s in successor.index.segments}
        before, after = _outside(prev, shared), _outside(successor, shared)
        maps = (prev.index.deletes, successor.index.deletes)
        shared_changes = {p for p in maps[0].keys() | maps[1].keys()
                          if p not in before and p not in after and maps[0].get(p) != maps[1].get(p)}
    touched = {p for p in before.keys() & after.keys() if before[p].deletes != after[p].deletes}
    return VersionDiff(gone=set(before.keys() - after.keys()), touched=touched | shared_changes,
                       new_files=[f for p, f in after.items() if p not in before], _after=after,
                       _successor=successor)


def _outside(manifest: Manifest, shared: set[str]) -> dict[str, DataFile]:
    """The entries of ``manifest`` outside the segments in ``shared``."""
    index = manifest.index
    assert index is not None
    segments = [manifest.segment(s.path) for s in index.segments if s.path not in shared]
    manifest.check_listed_once([s.listed for s in segments])
    out = {}
    for segment in segments:
        out.update((f.path, f) for f in segment.files(None, index.deletes))
    out.update((f.path, f) for f in manifest.tail)
    return out

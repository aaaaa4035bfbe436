"""The data files of a table state: all of them, or the ones a filter may match (planning),
reading no more of a v2 version than that needs.

Planning a v2 version skips every segment whose summary cannot match, filters the entries
of the others with one Arrow expression over their typed stats columns, and checks the
survivors with ``may_match``: the same answer as checking every file, at the cost of the
segments a filter touches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Protocol, overload

import numpy as np

from ..expressions import Expr
from ..expressions.arrow import matching_rows
from ..expressions.stats_arrow import stats_filter
from ..format.entries import DataFile, DeletionVector
from ..format.segment import Segment
from ..log.version import Version


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

    manifest: Version

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
            chosen = candidates(segment, where, index.deletes)
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
            yield from self.segment.files(self.indices[start : start + 4096], self.deletes)

    def __getitem__(self, i: int) -> DataFile:  # type: ignore[override]  # (an int: PlannedFiles slices)
        j = range(len(self.indices))[i]
        return self.segment.files(self.indices[j : j + 1], self.deletes)[0]


def candidates(segment: Segment, where: Expr | None, deletes: Mapping[str, DeletionVector]) -> np.ndarray:
    """Indices of the entries of ``segment`` with live rows whose stats may match the bound
    ``where`` (a superset of those ``may_match`` keeps), found by one Arrow filter over its
    typed stats columns (``matching_rows``: on the calling thread for a segment of up to 64k
    entries; ``Table.filter``'s hand-off to a thread pool cost a point update 1.4 ms per
    segment). ``deletes``: the root's override map."""
    live = segment.live(deletes)
    expr = stats_filter(where, segment.stats_columns) if where is not None else None
    if expr is not None:
        chosen = np.zeros(len(segment), dtype=bool)
        chosen[matching_rows(segment.table, expr)] = True
        live &= chosen
    return np.flatnonzero(live)

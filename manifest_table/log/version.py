"""A version as the version log reads it: the manifest's value bound to the log's segment
reader, so that its files can be listed; and the two lookups built on that, the entries of
given paths (``locate``) and what a successor changed (``diff``), reading no more segments
than they need."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..format.manifest import Manifest
from ..format.root import SegmentSummary
from .segments import SegmentReader

if TYPE_CHECKING:
    from ..format.segment import Segment

_SEGMENT_READERS = 4


@dataclass(frozen=True)
class Version(Manifest):
    """A committed (or just built) manifest and the reader its segments come from."""

    reader: SegmentReader | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, manifest: Manifest, reader: SegmentReader | None) -> Version:
        return cls(**{f.name: getattr(manifest, f.name) for f in dataclasses.fields(Manifest)}, reader=reader)

    @property
    def files(self) -> list[DataFile] | tuple[DataFile, ...]:
        """Every live file, in order. A v2 version reads all its segments for this: planning
        (data/file_sets.py) reads only the ones a filter needs."""
        if self.index is None:
            return self.tail
        out: list[DataFile] = []
        segments = list(self.segments(self.index.segments))
        self.check_listed_once([s.listed for s in segments])
        for segment in segments:
            out.extend(segment.files(None, self.index.deletes))
        out.extend(self.tail)
        return out

    def file_map(self) -> dict[str, DataFile]:
        return {f.path: f for f in self.files}

    def segment(self, key: str) -> Segment:
        if self.reader is None or self.index is None:
            raise ValueError(f"version {self.version} has no segment reader")
        return self.reader.read(key, self.schema, self.fields.ids)

    def segments(self, summaries: Sequence[SegmentSummary]) -> Iterator[Segment]:
        """The segments of ``summaries`` in order, read a few at a time in parallel: fetching
        and decoding them releases the GIL, and a full scan of a big table needs them all.
        Segments the reader has cached take no thread: a pool started for them cost a point
        update of a table of seven segments 0.5 ms (thread start-ups), reading nothing."""
        reader = self.reader
        if len(summaries) <= 1 or (
            reader is not None and all(reader.cached(s.path, self.schema, self.fields.ids) for s in summaries)
        ):
            yield from (self.segment(s.path) for s in summaries)
            return
        from concurrent.futures import ThreadPoolExecutor  # (not for a version read without segments)

        with ThreadPoolExecutor(max_workers=_SEGMENT_READERS) as pool:
            yield from pool.map(lambda s: self.segment(s.path), summaries)

    def with_fields(self, fields: FieldIds, last_field_id: int) -> Version:
        return Version.of(super().with_fields(fields, last_field_id), self.reader)


def locate(manifest: Version, paths: Iterable[str]) -> dict[str, tuple[DataFile, str | None]]:
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
    ids = manifest.fields.ids
    segments = sorted(index.segments, key=lambda s: reader.cached(s.path, manifest.schema, ids) is None)
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
    _successor: Version

    def after(self, paths: Iterable[str]) -> dict[str, DataFile]:
        """The successor's entries of ``paths``."""
        found = {p: self._after[p] for p in paths if p in self._after}
        rest = [p for p in paths if p not in found]
        found.update({p: f for p, (f, _) in locate(self._successor, rest).items()})
        return found


def diff(prev: Version, successor: Version) -> VersionDiff:
    """Compare two versions reading only the segments one has and the other does not:
    a segment both list holds the same entries in both (segments are write-once), and
    their deletion vectors differ only where the roots' ``deletes`` maps do."""
    if prev.index is None or successor.index is None:
        before, after, shared_changes = prev.file_map(), successor.file_map(), set()
    else:
        shared = {s.path for s in prev.index.segments} & {s.path for s in successor.index.segments}
        before, after = _outside(prev, shared), _outside(successor, shared)
        maps = (prev.index.deletes, successor.index.deletes)
        shared_changes = {
            p
            for p in maps[0].keys() | maps[1].keys()
            if p not in before and p not in after and maps[0].get(p) != maps[1].get(p)
        }
    touched = {p for p in before.keys() & after.keys() if before[p].deletes != after[p].deletes}
    return VersionDiff(
        gone=set(before.keys() - after.keys()),
        touched=touched | shared_changes,
        new_files=[f for p, f in after.items() if p not in before],
        _after=after,
        _successor=successor,
    )


def _outside(manifest: Version, shared: set[str]) -> dict[str, DataFile]:
    """The entries of ``manifest`` outside the segments in ``shared``."""
    index = manifest.index
    assert index is not None
    segments = [manifest.segment(s.path) for s in index.segments if s.path not in shared]
    manifest.check_listed_once([s.listed for s in segments])
    out: dict[str, DataFile] = {}
    for segment in segments:
        out.update((f.path, f) for f in segment.files(None, index.deletes))
    out.update((f.path, f) for f in manifest.tail)
    return out

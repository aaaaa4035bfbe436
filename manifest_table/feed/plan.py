"""What one commit changed, row by row, as positions in data files: the plan the change feed
reads (docs/changes.md). It is derived from the commit's version and its parent alone
(docs/design/005-change-feed.md), reading manifests and bitmaps, never data:

- *deleted*: per file of the parent (its entry there), the positions the commit newly
  deleted (a file it removed whole: every row that was live);
- *inserted*: per file the commit added, its live positions;
- *pairs*: rows an update or upsert replaced and their new versions, from the commit's
  ``parameters.replaced`` (format/replaced.py), taken out of both lists above.
Compaction's rewrites move rows without changing them: their sources and outputs are left
out, but for the rows a purge deleted itself (those its rewrite record drops that the parent
had not deleted). Within a transaction a row may be replaced twice (its first new version replaced
again) or inserted and then replaced: a pair's old row is always one of the parent's, its
new row one live in the commit; a new version that the commit itself deleted again leaves
its old row a delete."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from pyroaring import BitMap

from ..commit.changes import RewriteSource, rewrites_from_json
from ..data.tombstones import DeletionVectors
from ..errors import CorruptTableError
from ..format.entries import DataFile
from ..format.manifest import manifest_key
from ..format.replaced import Replacement, replacements_from_json
from ..log.version import Version
from ..mirrors.change import version_change


@dataclass(frozen=True)
class Rows:
    """Rows of one data file, by position."""

    file: DataFile
    positions: BitMap


@dataclass(frozen=True)
class Pair:
    """Rows of a parent's file and, in the same order, their new versions in an added file."""

    old: Rows
    new: Rows


@dataclass(frozen=True)
class CommitPlan:
    deleted: list[Rows]
    pairs: list[Pair]
    inserted: list[Rows]

    @property
    def empty(self) -> bool:
        return not (self.deleted or self.pairs or self.inserted)


def plan_commit(prev: Version | None, cur: Version, dvs: DeletionVectors) -> CommitPlan:
    """The rows ``cur`` changed relative to ``prev`` (None: the table did not exist before)."""
    rewritten = Rewritten.of(cur)
    deleted: dict[str, Rows] = {}
    if prev is None:
        added = list(cur.files)
    else:
        change = version_change(prev, cur)
        added = change.added
        for f in change.removed:
            if f.path not in rewritten.moved:
                deleted[f.path] = Rows(f, _all(f.rows) - dvs.of(f))
            elif dropped := rewritten.dropped(f, dvs):  # a purge's own deletes
                deleted[f.path] = Rows(f, dropped)
        for before, after in change.redeleted:
            deleted[before.path] = Rows(before, dvs.of(after) - dvs.of(before))
    inserted = {f.path: Rows(f, _all(f.rows) - dvs.of(f)) for f in added if f.path not in rewritten.moved}
    replaced = replacements_from_json(cur.parameters.get("replaced", []))
    pairs = _pairs(replaced, deleted, inserted, dvs, manifest_key(cur.version))
    for pair in pairs:
        deleted[pair.old.file.path] = _without(deleted[pair.old.file.path], pair.old.positions)
        inserted[pair.new.file.path] = _without(inserted[pair.new.file.path], pair.new.positions)
    return CommitPlan(
        [rows for rows in deleted.values() if rows.positions],
        pairs,
        [rows for rows in inserted.values() if rows.positions],
    )


@dataclass(frozen=True)
class Rewritten:
    """What a commit's rewrites (``parameters.rewrites``) did: the files they moved rows
    between, and each source's record. A compaction's record holds the deletes the source had
    when it was read (the parent's, or fewer: a delete that committed meanwhile was remapped
    onto the outputs); a purge's holds more, the rows it dropped itself."""

    sources: Mapping[str, RewriteSource]
    moved: frozenset[str]

    @classmethod
    def of(cls, cur: Version) -> Rewritten:
        rewrites = rewrites_from_json(cur.parameters.get("rewrites", []))
        sources = {s.path: s for rw in rewrites for s in rw.sources}
        return cls(sources, frozenset(sources.keys() | {o.path for rw in rewrites for o in rw.outputs}))

    def dropped(self, parent_file: DataFile, dvs: DeletionVectors) -> BitMap:
        """The rows of ``parent_file`` (the parent's entry) a rewrite dropped of its own: in its
        source's record, live in the parent. Empty for a compaction, even one a delete raced
        (its record holds fewer deletes than the parent, not more); the bitmaps are read only
        where the record and the parent differ."""
        source = self.sources.get(parent_file.path)
        if source is None or source.deletes == parent_file.deletes or source.deletes is None:
            return BitMap()
        return dvs.load(source.deletes) - dvs.of(parent_file)


def _pairs(
    replacements: list[Replacement],
    deleted: Mapping[str, Rows],
    inserted: Mapping[str, Rows],
    dvs: DeletionVectors,
    key: str,
) -> list[Pair]:
    """The recorded replacements as pairs of a parent's rows and live new rows (module
    docstring). Pairs are resolved in commit order: a source among the files the commit
    added takes the old rows of the pairs that made it, if any."""
    by_new: dict[str, list[Pair]] = {}
    for replacement in replacements:
        for old, new in _pieces(replacement, deleted, inserted, dvs, key):
            path = old.file.path
            found = [Pair(old, new)] if path in deleted else list(_through(old, new, by_new.get(path, [])))
            by_new.setdefault(new.file.path, []).extend(found)
    live = [_live(pair, inserted[pair.new.file.path].positions) for pairs in by_new.values() for pair in pairs]
    pairs = [pair for pair in live if pair.new.positions]
    for pair in pairs:
        if not pair.old.positions <= deleted[pair.old.file.path].positions:
            raise CorruptTableError(
                f"{key}: field parameters.replaced names rows of {pair.old.file.path} this commit did not delete"
            )
    return pairs


def _pieces(
    replacement: Replacement, deleted: Mapping[str, Rows], inserted: Mapping[str, Rows], dvs: DeletionVectors, key: str
) -> Iterator[tuple[Rows, Rows]]:
    """The replacement cut where a source or an output file ends: (old rows, new rows) of one
    source file and one output file each, the k-th new row replacing the k-th old one."""
    outputs = iter(replacement.outputs)
    output, used = None, 0
    for source in replacement.sources:
        file = (deleted.get(source.path) or inserted.get(source.path) or _unknown(key, source.path)).file
        positions = dvs.load(source.positions, file.rows) if source.positions else _newly_deleted(file, deleted, dvs)
        if len(positions) != source.rows:
            raise CorruptTableError(
                f"{key}: field parameters.replaced says {source.rows} rows of {source.path}, "
                f"which this commit deletes {len(positions)} of"
            )
        taken = 0
        while taken < source.rows:
            if output is None or used == output.rows:
                output, used = next(outputs), 0
            target = inserted.get(output.path) or _unknown(key, output.path)
            if output.rows > target.file.rows:
                raise CorruptTableError(
                    f"{key}: field parameters.replaced takes {output.rows} rows of {output.path}, "
                    f"which has {target.file.rows}"
                )
            n = min(source.rows - taken, output.rows - used)
            new = BitMap()
            new.add_range(used, used + n)
            yield Rows(file, positions[taken : taken + n]), Rows(target.file, new)
            taken, used = taken + n, used + n


def _through(old: Rows, new: Rows, earlier: Iterable[Pair]) -> Iterator[Pair]:
    """Pairs for new rows replacing rows ``old`` of a file the commit added: each old row
    that is the new version in an ``earlier`` pair hands its parent's row on."""
    for pair in earlier:
        common = old.positions & pair.new.positions
        if common:
            values = _array(common)
            yield Pair(
                Rows(pair.old.file, _at(pair.old.positions, _ranks(pair.new.positions, values))),
                Rows(new.file, _at(new.positions, _ranks(old.positions, values))),
            )


def _live(pair: Pair, live: BitMap) -> Pair:
    """``pair`` without the new rows the commit deleted again (and their old rows)."""
    if pair.new.positions <= live:
        return pair
    keep = np.flatnonzero(np.isin(_array(pair.new.positions), _array(pair.new.positions & live)))
    return Pair(Rows(pair.old.file, _at(pair.old.positions, keep)), Rows(pair.new.file, _at(pair.new.positions, keep)))


def _newly_deleted(file: DataFile, deleted: Mapping[str, Rows], dvs: DeletionVectors) -> BitMap:
    """Every position the commit newly deleted in ``file`` (one it added: its whole bitmap)."""
    return deleted[file.path].positions if file.path in deleted else dvs.of(file)


def _unknown(key: str, path: str) -> NoReturn:
    raise CorruptTableError(f"{key}: field parameters.replaced names {path}, which this commit did not change")


def _all(rows: int) -> BitMap:
    every = BitMap()
    every.add_range(0, rows)
    return every


def _without(rows: Rows, positions: BitMap) -> Rows:
    return Rows(rows.file, rows.positions - positions)


def _array(bitmap: BitMap) -> np.ndarray:
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32)


def _ranks(bitmap: BitMap, values: np.ndarray) -> np.ndarray:
    """The index in ``bitmap`` of each of ``values`` (all members of it)."""
    return np.searchsorted(_array(bitmap), values)


def _at(bitmap: BitMap, indices: np.ndarray) -> BitMap:
    return BitMap(_array(bitmap)[indices])

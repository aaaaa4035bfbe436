"""What the retained versions of a table need: every object key they reference (GC keeps
these and may delete the rest of our writers' objects)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ..commit.changes import rewrites_from_json
from ..errors import CorruptTableError, NotFound, VersionExpiredError
from ..format.listed_once import ListedPaths
from ..log.version import Version

logger = logging.getLogger(__name__)


def referenced_keys(manifests: Iterable[Version], stored: Callable[[int], bool]) -> set[str]:
    """Every object key the manifests need: segments, data files, their bitmaps, and the
    bitmaps a compaction's rewrites record (a concurrent delete rebasing onto it reads them).
    Roots share most segments: each distinct one is read once. A segment entry's bitmap
    that the root's ``deletes`` map overrides is not needed by that root. A root that lists a
    file twice is corrupt: GC stops rather than judge its objects. A version whose objects
    have gone since it was listed is skipped if it is no longer ``stored`` (a concurrent GC
    expired it: a version goes before its objects); under a stored version it is damage, and
    GC stops before deleting anything (``CorruptTableError``): what that version references
    cannot be known, so nothing unreferenced can be told apart from it."""
    keys: set[str] = set()
    vectors: dict[str, list[tuple[str, str]]] = {}  # segment -> (file, its stored bitmap's object)
    listed: dict[str, ListedPaths] = {}
    for manifest in manifests:
        try:
            _add_references(manifest, keys, vectors, listed)
        except (NotFound, VersionExpiredError) as exc:
            if stored(manifest.version):
                raise CorruptTableError(
                    f"garbage collection stopped and deleted nothing: version {manifest.version}, which it "
                    f"retains, references an object that is missing ({exc}). The table is damaged: repair "
                    "(`manifest-table repair`, Table.repair or Database.repair) commits a version without "
                    "what is gone, and gc proceeds once it retains no damaged version (after they age out "
                    "of retain_for, or with a shorter one)"
                ) from exc
            logger.info("version %d was expired by a concurrent GC", manifest.version)
    return keys


def _add_references(
    manifest: Version, keys: set[str], vectors: dict[str, list[tuple[str, str]]], listed: dict[str, ListedPaths]
) -> None:
    index = manifest.index
    for summary in index.segments if index is not None else ():
        if summary.path not in vectors:
            segment = manifest.segment(summary.path)
            entries, listed[summary.path] = segment.table, segment.listed
            keys.add(summary.path)
            keys.update(entries.column("path").to_pylist())
            vectors[summary.path] = [
                (p, v) for p, v in zip(entries.column("path").to_pylist(), entries.column("dv_path").to_pylist()) if v
            ]
        keys.update(v for p, v in vectors[summary.path] if p not in index.deletes)  # type: ignore[union-attr]
    if index is not None:
        manifest.check_listed_once([listed[s.path] for s in index.segments])
    keys.update(ref.path for ref in (index.deletes.values() if index is not None else ()))
    for f in manifest.tail:
        keys.add(f.path)
        if f.deletes:
            keys.add(f.deletes.path)
    for rewrite in rewrites_from_json(manifest.parameters.get("rewrites", [])):
        keys.update(src.deletes.path for src in rewrite.sources if src.deletes)

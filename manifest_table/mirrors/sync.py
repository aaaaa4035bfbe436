"""Deciding what each mirror writes, for which versions (docs/mirrors.md, "Consistency").

1. Find the mirror's newest version m (its pointer, then probing forward).
2. Each version after m, up to the target, is written incrementally from the one before it,
   as long as our version m is still retained and every version in between had the mirror on
   with the target's options. Otherwise the mirror starts over at the target: a full
   description (Iceberg: every manifest; Delta: a checkpoint). A database's table has its
   versions written only where it changed: the target, from m (``every_version_changes``).
3. A version another writer mirrored first is taken as it is.
A mirror only ever describes committed versions (it reads our manifests), never blocks a
commit (``after_commit`` logs and swallows its failures) and may lag: the next sync, the next
commit or the maintenance job catches it up."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..format.mirrors import DELTA, ICEBERG, MIRRORS
from ..log.version import Version
from ..log.version_log import VersionLog
from ..process_pools import ProcessLock, ProcessPool
from . import delta, iceberg
from .change import version_change
from .source import Source

logger = logging.getLogger("manifest_table.mirrors")
LATEST: dict[str, Callable[[Source], int | None]] = {ICEBERG: iceberg.latest, DELTA: delta.latest}
HAS: dict[str, Callable[[Source, int], bool]] = {ICEBERG: iceberg.has, DELTA: delta.has}
_MIRRORS = ProcessPool(4, "mirror")
_NEWEST: dict[tuple[str, str], int] = {}
"""(location, mirror) -> the newest version this process mirrored there (write-once objects:
it stays mirrored)."""
_NEWEST_LOCK = ProcessLock()


def start(vlog: VersionLog, committed: Version) -> Callable[[], None]:
    """The hook at our commit point: begin mirroring ``committed``, just committed here, on
    the mirror threads (one per mirror: their objects are independent), while the caller
    advances its pointer; returns the wait for them. Best effort, each mirror on its own: a
    failure is logged, and the next sync repairs the lag."""
    src = Source.of(vlog)
    pending = [_MIRRORS.get().submit(_mirror, src, name, committed) for name in MIRRORS if name in committed.mirrors]

    def wait() -> None:
        for done in pending:
            done.result()

    return wait


def after_commit(vlog: VersionLog, committed: Version) -> None:
    """``start`` and wait: mirror a version just committed."""
    start(vlog, committed)()


def _mirror(src: Source, name: str, committed: Version) -> None:
    try:
        sync_one(src, name, committed, fresh=True)
    except Exception as exc:  # never fail a commit that has landed
        logger.warning(
            "%s: mirroring version %d to %s failed (the next sync repairs it): %s: %s",
            src.log.location,
            committed.version,
            name,
            type(exc).__name__,
            exc,
        )


def sync(vlog: VersionLog, target: Version) -> dict[str, int | None]:
    """Bring every mirror ``target`` has on up to ``target``; returns each one's version."""
    src = Source.of(vlog)
    return {name: sync_one(src, name, target) for name in MIRRORS if name in target.mirrors}


def status(vlog: VersionLog, names: list[str]) -> dict[str, int | None]:
    """Each mirror's newest version (None: none yet)."""
    src = Source.of(vlog)
    return {name: LATEST[name](src) for name in names}


def _mirrored(src: Source, name: str, target: Version, fresh: bool = False) -> int | None:
    """The mirror's newest version. Found with a HEAD or two when it is the target or the
    version before it (a commit mirrored right after the one before it), else from the
    mirror's pointer: Delta's probes forward from the last checkpoint, one HEAD a version.
    ``fresh``: the target was just committed here, so only the version before it is asked
    (should another writer have mirrored the target already, its create-only commit point
    stands and this one's objects go with GC)."""
    if fresh and _NEWEST.get((src.location, name)) == target.version - 1:
        return target.version - 1  # this process wrote it: no request needed
    for version in (target.version - 1,) if fresh else (target.version, target.version - 1):
        if version >= 0 and HAS[name](src, version):
            return version
    return LATEST[name](src)


def sync_one(src: Source, name: str, target: Version, fresh: bool = False) -> int:
    done = _sync_one(src, name, target, fresh)
    with _NEWEST_LOCK:
        _NEWEST[(src.location, name)] = done
        while len(_NEWEST) > 64:
            _NEWEST.pop(next(iter(_NEWEST)))
    return done


def _sync_one(src: Source, name: str, target: Version, fresh: bool) -> int:
    mirrored = _mirrored(src, name, target, fresh)
    if mirrored is not None and mirrored >= target.version:
        if name == ICEBERG:
            iceberg.advance(src, mirrored)
        return mirrored
    prev = src.log.find(mirrored) if mirrored is not None else None
    options = target.mirrors[name]
    between = range(prev.version + 1, target.version) if prev is not None and src.log.every_version_changes else ()
    versions = [src.log.find(v) for v in between]
    if prev is None or any(m is None or m.mirrors.get(name) != options for m in [prev, *versions]):
        _full(src, name, target)
        return target.version
    for cur in [*versions, target]:
        assert cur is not None
        _incremental(src, name, prev, cur)
        prev = cur
    return target.version


def _full(src: Source, name: str, target: Version) -> None:
    logger.info("%s: %s mirror starts at version %d", src.location, name, target.version)
    if name == ICEBERG:
        iceberg.write_version(src, target, None, None, None)
    else:
        delta.start(src, target)


def _incremental(src: Source, name: str, prev: Version, cur: Version) -> None:
    change = version_change(prev, cur)
    if name == ICEBERG:
        state = iceberg.read_state(src, prev.version)
        iceberg.write_version(src, cur, prev if state is not None else None, state, change.new_tombstones)
    else:
        delta.write_commit(src, change)

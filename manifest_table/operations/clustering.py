"""Planning a clustering compaction: which files it rewrites, read off the manifest alone.

A table with ``cluster_by`` keeps its rows in **runs**: the files one clustering rewrite
wrote, ordered along the curve (data/curve.py) and cut so that their boxes (the min/max of
the cluster columns) barely overlap. Each file records its run (``DataFile.cluster_run``,
whose top bits fingerprint the columns it was clustered by: a run clustered by other columns
counts as no run). Files in no run (appended since, or clustered by other columns) are
**unclustered**. A selective read touches about one file per run, plus every unclustered
file its filter may match.

A compaction clusters new data into the layout the way a size-tiered LSM tree merges
(Delta's liquid clustering keeps "ZCubes" the same way), so that its cost follows the new
data, not the table:

1. Runs, largest first, then the unclustered files as the smallest tier.
2. For each run ``j`` from the largest, the *tail* is every smaller run and the unclustered
   files. The files of run ``j`` whose boxes overlap a tail file's box are *touched*. If
   they hold at most ``RATIO`` times the tail's rows, the touched files and the tail are
   rewritten as one run, keeping run ``j``'s id (the files of run ``j`` left alone stay
   where they are: the new data went only where it overlapped them).
3. Otherwise no run is merged, and two or more unclustered files (or one too big for one
   output) are clustered among themselves into a new run.
A merge is sorted in one process, in memory, so none takes more than ``MAX_MERGE_BYTES``:
step 2 passes over a run it cannot take whole, and step 3 cuts the unclustered files into
several runs (rewritten in parallel on Spark) that no later merge joins beyond the bound.

New rows spread over the whole key range therefore wait in small runs, each rewritten only
with data of a comparable size, until the smaller runs together hold a ``1/RATIO`` of a
bigger one; rows that arrive in a narrow range (new ``user_id`` values, today's dates) touch
only the few files they overlap. Each row is rewritten about ``RATIO`` times per tier, the
tiers number ``log_RATIO`` of the table over a run of new data, and a read touches one file
per tier where its filter lands. Overlap is judged on boxes in which a column shared at a
single value does not count (files cut inside a run of one value cannot do better), so the
plan of a clustered table is empty: running compaction again changes nothing."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgumentError
from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..format.stats import instant_type

RATIO = 4
"""A run's overlapped files are rewritten with the smaller runs and new files once those
hold at least a quarter of their rows: each row is rewritten about 4 times per tier."""
MAX_MERGE_BYTES = 2 * 2**30
"""The most Parquet bytes (live rows' estimate) one merge takes: a merge is sorted in one
process, in memory (a few times its Parquet size as Arrow)."""
_ID_BITS = 48
"""The low bits of a run id are random; the bits above fingerprint the cluster columns."""


@dataclass(frozen=True)
class Merge:
    """Files to rewrite as one run along the curve, and the run id their outputs take."""

    files: tuple[DataFile, ...]
    run: int


def cluster_field_ids(fields: FieldIds, columns: Sequence[str]) -> tuple[int, ...]:
    """The field ids of ``columns`` (the ``cluster_by`` property); ``InvalidArgumentError``
    for a column the schema lacks (the property is checked at every commit that changes it
    or the schema, so this means a version written by something else)."""
    ids = dict(zip(fields.schema.names, fields.ids))
    missing = [name for name in columns if name not in ids]
    if missing:
        raise InvalidArgumentError(f"cluster_by names columns {missing} that the table does not have")
    return tuple(ids[name] for name in columns)


def new_run(order: Sequence[int]) -> int:
    """A fresh run id for files clustered by the columns ``order`` (field ids)."""
    return (_fingerprint(order) << _ID_BITS) | (uuid.uuid4().int & ((1 << _ID_BITS) - 1))


def _fingerprint(order: Sequence[int]) -> int:
    return zlib.crc32(",".join(map(str, order)).encode()) & 0x7FFF


def plan_merges(
    files: Sequence[DataFile], fields: FieldIds, columns: Sequence[str], target_file_size: int
) -> list[Merge]:
    """The files the next clustering rewrites take (steps 1-3 of the module's docstring), none
    when the layout is as good as it gets. ``files``: the live files of a version. No merge
    holds more than ``MAX_MERGE_BYTES`` (step 2 passes over a run it cannot take whole; step
    3 cuts the unclustered files into runs of at most that)."""
    order = cluster_field_ids(fields, columns)
    runs: dict[int, list[int]] = {}
    loose: list[int] = []
    for i, f in enumerate(files):
        if f.cluster_run is not None and f.cluster_run >> _ID_BITS == _fingerprint(order):
            runs.setdefault(f.cluster_run, []).append(i)
        else:
            loose.append(i)
    rows = np.array([f.live_rows for f in files], np.int64)
    live = np.array([f.size * f.live_rows / f.rows if f.rows else 0.0 for f in files])
    tiers = sorted(runs.items(), key=lambda run: (-int(rows[run[1]].sum()), run[1][0]))  # ties: manifest order
    lo, hi = boxes(files, fields, columns)
    for j, (run, members) in enumerate(tiers):
        tail = [i for _, later in tiers[j + 1 :] for i in later] + loose
        if not tail:
            break
        touched = [i for i, hit in zip(members, overlapping(lo, hi, members, tail)) if hit]
        if rows[touched].sum() <= RATIO * rows[tail].sum() and live[touched + tail].sum() <= MAX_MERGE_BYTES:
            return [Merge(tuple(files[i] for i in sorted(touched + tail)), run)]
    chunks: list[list[int]] = []
    for i in loose:  # next-fit, in manifest order
        if not chunks or live[chunks[-1] + [i]].sum() > MAX_MERGE_BYTES:
            chunks.append([])
        chunks[-1].append(i)
    return [
        Merge(tuple(files[i] for i in chunk), new_run(order))
        for chunk in chunks
        if len(chunk) > 1 or live[chunk[0]] > 1.5 * target_file_size
    ]


def boxes(files: Sequence[DataFile], fields: FieldIds, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each file's box over ``columns`` from its statistics, as dense ranks among every
    bound of the files (n files x d columns, low and high corners). An unknown bound is
    below (above) every value; nulls sort after every value, so a file holding nulls
    reaches the top, and one holding only nulls is the top."""
    lo = np.zeros((len(files), len(columns)), np.int64)
    hi = np.zeros_like(lo)
    for c, name in enumerate(columns):
        stats = [f.stats.get(name) for f in files]
        values = pa.array(
            [s.min if s else None for s in stats] + [s.max if s else None for s in stats],
            instant_type(fields.schema.field(name).type),
        )
        ranks = pc.rank(values, "ascending", tiebreaker="dense").to_numpy().astype(np.int64)
        top = int(ranks[values.is_valid().to_numpy(zero_copy_only=False)].max(initial=0)) + 1
        known = values.is_valid().to_numpy(zero_copy_only=False)
        lo[:, c] = np.where(known[: len(files)], ranks[: len(files)], 0)
        hi[:, c] = np.where(known[len(files) :], ranks[len(files) :], top)
        for i, (f, s) in enumerate(zip(files, stats)):
            if s is None or s.null_count is None or s.null_count > 0:
                hi[i, c] = top
            if s is not None and s.null_count == f.rows:
                lo[i, c] = top
    return lo, hi


def overlapping(lo: np.ndarray, hi: np.ndarray, these: Sequence[int], others: Sequence[int]) -> np.ndarray:
    """For each file of ``these``, whether its box overlaps the box of some file of
    ``others``: they meet in every column and cross (not just touch) in at least one."""
    found = np.zeros(len(these), bool)
    a_lo, a_hi = lo[list(these)][:, None, :], hi[list(these)][:, None, :]
    for start in range(0, len(others), 256):  # bounded memory: these x 256 x columns
        chunk = list(others[start : start + 256])
        b_lo, b_hi = lo[chunk][None, :, :], hi[chunk][None, :, :]
        meet = np.all((a_lo <= b_hi) & (b_lo <= a_hi), axis=2)
        cross = np.any((a_lo < b_hi) & (b_lo < a_hi), axis=2)
        found |= np.any(meet & cross, axis=1)
    return found

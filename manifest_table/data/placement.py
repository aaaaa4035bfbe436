"""Where a clustering rewrite put each row of its sources, recomputed from the sources.

A clustering rewrite (operations/compaction.py) orders its sources' live rows along the
curve (data/curve.py), a pure function of the values of the ``order`` columns with ties in
the sources' order, and records only the columns (commit/changes.py, ``Rewrite.order``).
To carry a delete through it, rebasing (commit/conflicts.py) reads those columns of the
sources again, with the deletes the rewrite dropped, and recomputes the order. This costs a
read of a few columns of the rewrite's sources, and only when a concurrent delete hit one
of them; storing the permutation instead would cost every clustering a write of about four
bytes per row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..format.entries import DataFile
from ..format.field_ids import FieldIds
from ..storage import FileIO
from .curve import curve_order
from .scan import Scan, Snapshot
from .tombstones import DeletionVectors


def placement(
    io: FileIO, version: int, sources: Sequence[DataFile], fields: FieldIds, order: Sequence[int], dvs: DeletionVectors
) -> np.ndarray:
    """For a clustering rewrite of ``sources`` (files of ``version`` with the deletes the
    rewrite dropped, in its order) by the columns with field ids ``order``: the place in the
    rewrite's outputs, concatenated, of each live row of the sources, concatenated."""
    names = dict(zip(fields.ids, fields.schema.names))
    columns = [names[fid] for fid in order]
    snapshot = Snapshot(version, fields.schema, list(sources), dvs.of, fields=fields)
    rows = Scan(snapshot, io, columns).to_arrow()
    ordered = curve_order([rows.column(name) for name in columns])
    places = np.empty(len(ordered), np.int64)
    places[ordered] = np.arange(len(ordered), dtype=np.int64)
    return places

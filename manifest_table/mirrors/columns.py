"""The column statistics of many data files at once, as Arrow arrays of the current schema's
types: how both mirrors describe a whole segment (thousands of files) without decoding each
file's stats one by one (at 1,000 files that was three quarters of a mirror's full build)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..format.segment import entries_of
from ..format.stats import has_stats, instant_type
from ..log.version import Version


@dataclass(frozen=True)
class Bounds:
    """One column over many files: min and max (None: unknown), null counts."""

    mins: pa.Array | None
    maxs: pa.Array | None
    nulls: list[int | None] | None


def file_bounds(entries: pa.Table, fields: FieldIds) -> dict[int, Bounds]:
    """Field id -> its bounds, from a segment-shaped table (format/segment.py) written under
    this schema or an earlier one: a widened column's stats are cast to its type now, and a
    column added since has none."""
    out = {}
    names = set(entries.column_names)
    for fid, column in zip(fields.ids, fields.schema):
        nulls = entries.column(f"nulls_{fid}").to_pylist() if f"nulls_{fid}" in names else None
        mins = maxs = None
        if has_stats(column.type) and f"min_{fid}" in names:
            target = instant_type(column.type)
            mins, maxs = (entries.column(f"{b}_{fid}").combine_chunks().cast(target) for b in ("min", "max"))
        out[fid] = Bounds(mins, maxs, nulls)
    return out


def bounds_of(manifest: Version, files: Sequence[DataFile], segment: str | None = None) -> dict[int, Bounds]:
    """The bounds of ``files``: all the entries of ``segment`` of ``manifest``, in order, or
    entries listed one by one (the root's tail, a commit's new files)."""
    fields = manifest.fields
    entries = manifest.segment(segment).table if segment is not None else entries_of(files, fields.schema, fields.ids)
    return file_bounds(entries, fields)

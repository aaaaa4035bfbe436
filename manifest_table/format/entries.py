"""A data file's entry, as every manifest format lists it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .stats import ColumnStats

ROW_POSITIONS = 2**32  # rows per file are bounded by 32-bit positions (bitmaps address rows with uint32)


@dataclass(frozen=True)
class DeletionVector:
    """Where a data file's bitmap of deleted row positions lives inside a tombstone object."""

    path: str
    offset: int
    length: int
    cardinality: int


@dataclass(frozen=True)
class DataFile:
    path: str
    rows: int
    size: int
    stats: Mapping[str, ColumnStats] = field(default_factory=dict, compare=False)
    encoded_stats: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """``stats`` as stored, kept from the manifest it was read from: every commit rewrites the
    whole file list, and re-encoding unchanged stats would dominate its cost."""
    deletes: DeletionVector | None = None
    cluster_run: int | None = field(default=None, compare=False)
    """The clustering run the file belongs to (operations/clustering.py): files a clustering
    compaction wrote together share one; None for every other file."""

    @property
    def deleted_rows(self) -> int:
        return self.deletes.cardinality if self.deletes else 0

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows

    def with_deletes(self, deletes: DeletionVector | None) -> DataFile:
        return replace(self, deletes=deletes)

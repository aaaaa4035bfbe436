"""Delete as merge-on-read: the positions of the matching live rows, never a data rewrite.

1. Plan the files whose stats may match the condition, read only the condition's columns of
   the row groups whose footer stats may match, and keep the positions of live matching
   rows (data/scan.py, ``matching_positions``).
2. Stage the positions per data file (``Staging.stage_deletes``). A distributed engine that
   computed them itself hands them over with ``delete_positions``.
3. At commit, one tombstone object holds, per touched file, the union of its committed
   bitmap and the new positions (commit/builder.py, data/tombstones.py): each file keeps one
   live bitmap. A delete rebases onto concurrent appends and deletes, and its positions
   follow rows through a concurrent compaction (commit/conflicts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any

from pyroaring import AbstractBitMap, BitMap

from ..errors import InvalidArgumentError, InvalidFilterError, ManifestTableError
from ..expressions import Expr, to_expr
from ..format.keys import DATA_PREFIX, caller_key
from .staging import Staging


def delete(staging: Staging, where: str | Expr) -> int:
    """Stage deleting the live rows matching ``where``; returns how many."""
    expr = to_expr(where)
    if expr is None:
        raise InvalidFilterError("delete needs a condition; use overwrite() to replace every row")
    scan = staging.scan(columns=[], where=expr)
    return staging.stage_deletes((file.path, positions) for file, positions in scan.matching_positions())


def delete_positions(staging: Staging, positions: dict[str, BitMap]) -> int:
    """Stage deleting rows by position, per data file of the snapshot; returns how many
    positions were given."""
    _check_positions(staging, positions)
    unknown = sorted(set(positions) - staging.files_named(positions).keys())
    if unknown:
        raise ManifestTableError(f"not data files of version {staging.base.version}: {unknown[:5]}")
    return staging.stage_deletes(positions.items())


def _check_positions(staging: Staging, positions: Any) -> None:
    """A mapping of path -> bitmap of row positions inside that file: a position past the
    end would make every later scan of the table fail. (Paths are checked by the caller.)"""
    if not isinstance(positions, Mapping):
        raise InvalidArgumentError(
            f"positions must be a dict of data file path -> BitMap, not {type(positions).__name__}"
        )
    for path in positions:
        caller_key(path, DATA_PREFIX, "delete_positions")
    rows = {path: f.rows for path, f in staging.files_named(positions).items()}
    for path, bitmap in positions.items():
        if not isinstance(bitmap, AbstractBitMap):
            raise InvalidArgumentError(f"positions of {path} must be a pyroaring BitMap, not {type(bitmap).__name__}")
        if path in rows and bitmap and bitmap.max() >= rows[path]:
            past = list(islice(bitmap.iter_equal_or_larger(rows[path]), 5))
            raise InvalidArgumentError(
                f"positions {past} are past the end of {path}, which has "
                f"{rows[path]} rows (positions 0..{rows[path] - 1})"
            )

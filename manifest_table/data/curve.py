"""The order a clustering compaction writes rows in: a Hilbert curve over 1 to 4 columns.

Each column's values are first normalised to their dense rank among the values being
ordered (nulls after every value), scaled to ``64 // d`` bits for ``d`` columns, so a
column's spread, type and skew do not matter: a column of two values takes the low and the
high half of its axis, one of a million distinct values all of it. The ranks are then the
coordinates of a point, and rows are ordered by the point's position along a Hilbert curve
(Skilling's transpose algorithm, "Programming the Hilbert curve", AIP 2004, vectorised).
Hilbert rather than Z-order: consecutive stretches of a Hilbert curve are compact, so files
cut from it have boxes (min/max per column) that overlap their neighbours' less (Delta uses
Hilbert for liquid clustering, and Z-order for OPTIMIZE ZORDER BY, for this reason). One
column is a plain sort.

The order is a pure function of the values, ties kept in their incoming order (a stable
sort): rebasing a concurrent delete onto a clustering rewrite recomputes it from the
rewrite's sources to find where each row went (commit/conflicts.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_COLUMNS = 4
BITS = 16
"""Bits per axis: 65,536 cells a side, far finer than any file's share of an axis."""


def curve_order(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """The permutation (indices into the rows) that orders the rows of ``columns`` (equal
    lengths, 1 to ``MAX_COLUMNS``) along the curve; ties stay in input order."""
    if len(columns) == 1:
        keys = pa.table({"k": columns[0]})
        return pc.sort_indices(keys, [("k", "ascending")]).to_numpy()
    bits = min(BITS, 64 // len(columns))
    coords = np.stack([_scaled_rank(c, bits) for c in columns], axis=1)
    return np.argsort(hilbert_index(coords, bits), kind="stable")


def _scaled_rank(column: pa.Array | pa.ChunkedArray, bits: int) -> np.ndarray:
    """Dense ranks of ``column`` (nulls last), spread over ``[0, 2**bits)``."""
    ranks = pc.rank(column, "ascending", tiebreaker="dense")  # nulls last: the default
    values = ranks.to_numpy().astype(np.uint64) - np.uint64(1)  # rank() counts from 1
    top = int(values.max()) + 1 if len(values) else 1
    if top <= 1:
        return np.zeros(len(values), np.uint64)
    # rank * 2**bits // top, exactly, without overflowing 64 bits
    scale = (1 << bits) / top
    return np.minimum(np.floor(values.astype(np.float64) * scale), (1 << bits) - 1).astype(np.uint64)


def hilbert_index(coords: np.ndarray, bits: int) -> np.ndarray:
    """Positions along the Hilbert curve of ``coords`` (n points x d axes, each an integer
    below ``2**bits``, ``bits <= 16``, ``d * bits <= 64``), as uint64."""
    return np.concatenate(
        [_hilbert(coords[i : i + _CHUNK], bits) for i in range(0, len(coords), _CHUNK)] or [np.zeros(0, np.uint64)]
    )


_CHUNK = 1 << 16
"""Points per step: the arrays of a step stay in the CPU's cache (3x faster at 1M points)."""


def _hilbert(coords: np.ndarray, bits: int) -> np.ndarray:
    x = [coords[:, i].astype(np.uint32) for i in range(coords.shape[1])]
    d, zero = len(x), np.uint32(0)
    q = 1 << (bits - 1)
    while q > 1:  # inverse undo: reflect and exchange, from the top bit down
        p, mask = np.uint32(q - 1), np.uint32(q)
        for i in range(d):
            high = (x[i] & mask) != zero
            if i:  # low: exchange the low bits of axes 0 and i
                t = (x[0] ^ x[i]) & p
                t[high] = zero
                x[0] ^= t
                x[i] ^= t
            np.bitwise_xor(x[0], p, out=x[0], where=high)  # high: reflect axis 0
        q >>= 1
    for i in range(1, d):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros(len(x[0]), np.uint32)
    q = 1 << (bits - 1)
    while q > 1:
        t ^= np.where((x[d - 1] & np.uint32(q)) != zero, np.uint32(q - 1), zero)
        q >>= 1
    index = np.zeros(len(x[0]), np.uint64)
    for i in range(d):  # interleave: bit b of axis i goes to bit b * d + (d - 1 - i)
        x[i] ^= t
        for byte in range(-(-bits // 8)):
            spread = _SPREAD[d][(x[i] >> np.uint32(8 * byte)) & np.uint32(0xFF)]
            index |= spread << np.uint64(8 * byte * d + d - 1 - i)
    return index


_SPREAD = {
    d: np.array([sum(((v >> b) & 1) << (b * d) for b in range(8)) for v in range(256)], np.uint64) for d in range(1, 5)
}
"""For each axis count d: a byte's bits spread d apart (bit b to bit b * d)."""

"""Rows as every reader's values compare: imported by the matrix (tests/mirror_matrix.py) and
by the reader subprocesses (tests/duckdb_mirror_reader.py, tests/spark_mirror_reader.py), so it
imports nothing but the standard library.

A value becomes a string that does not depend on how a reader's client spells it: instants
in UTC (an aware datetime in a repeated hour never equals one of another zone, PEP 495),
decimals without trailing zeros (a reader may keep another scale), bytes as hex, NaN as
``NaN``; None stays None. A row is its values in column-name order; rows are sorted."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any


def value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return (v.astimezone(dt.UTC) if v.tzinfo is not None else v).isoformat()
    if isinstance(v, Decimal):
        return f"{v.normalize():f}" if v == v else "NaN"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return str(v)


def canonical(names: list[str], records: list[tuple]) -> list[list[str | None]]:
    """``records`` (tuples in ``names`` order) with their columns in name order, sorted."""
    order = sorted(range(len(names)), key=names.__getitem__)
    return sorted(([value(r[i]) for i in order] for r in records), key=repr)


def of_arrow(table: Any) -> list[list[str | None]]:
    """A pyarrow table's rows, canonical."""
    return canonical(table.column_names, list(zip(*(c.to_pylist() for c in table.columns))))

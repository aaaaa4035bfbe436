"""manifest_table: transactional tables of Parquet files on object storage.

Write-once data, tombstone and manifest objects; one pointer advanced by compare-and-swap.
See README.md and docs/ for the format and the commit protocol.

The names below are imported on first use (PEP 562), so that ``import manifest_table`` and
the ``manifest-table`` command start at once: pyarrow, pandas and the rest load only when a
call needs them (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

_EXPORTS = {
    "ChangeFeed": ".feed",
    "CommitChanges": ".feed",
    "CommitInfo": ".commit",
    "Scan": ".data.scan",
    "Database": ".database",
    "DatabaseSnapshot": ".database",
    "DatabaseTable": ".database",
    "DatabaseTransaction": ".database",
    "create_database": ".database",
    "open_database": ".database",
    "create_table": ".entry_points",
    "open_table": ".entry_points",
    "write_table": ".entry_points",
    "col": ".expressions",
    "Table": ".table",
    "Transaction": ".transaction",
}

__all__ = [
    "ChangeFeed",
    "CommitChanges",
    "CommitInfo",
    "Database",
    "DatabaseSnapshot",
    "DatabaseTable",
    "DatabaseTransaction",
    "Scan",
    "Table",
    "Transaction",
    "col",
    "create_database",
    "create_table",
    "open_database",
    "open_table",
    "write_table",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'manifest_table' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from .commit import CommitInfo
    from .data.scan import Scan
    from .database import (
        Database,
        DatabaseSnapshot,
        DatabaseTable,
        DatabaseTransaction,
        create_database,
        open_database,
    )
    from .entry_points import create_table, open_table, write_table
    from .expressions import col
    from .feed import ChangeFeed, CommitChanges
    from .table import Table
    from .transaction import Transaction

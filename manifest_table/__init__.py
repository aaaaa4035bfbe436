"""manifest_table: transactional tables of Parquet files on object storage.

Write-once data, tombstone and manifest objects; one pointer advanced by compare-and-swap.
See README.md and docs/ for the format and the commit protocol."""

from .commit import CommitInfo
from .data.scan import Scan
from .database import Database, DatabaseSnapshot, DatabaseTable, DatabaseTransaction, create_database, open_database
from .entry_points import create_table, open_table, write_table
from .expressions import col
from .feed import ChangeFeed, CommitChanges
from .table import Table
from .transaction import Transaction

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

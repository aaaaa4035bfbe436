"""manifest_table: transactional tables of Parquet files on object storage.

Write-once data, tombstone and manifest objects; one pointer advanced by compare-and-swap.
See README.md and docs/ for the format and the commit protocol."""

from .commit import CommitInfo
from .data.scan import Scan
from .expressions import col
from .table import Table, create_table, open_table, write_table
from .transaction import Transaction

__all__ = ["CommitInfo", "Scan", "Table", "Transaction", "col", "create_table", "open_table", "write_table"]

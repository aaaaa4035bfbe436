"""Databases: one log over many tables (docs/databases.md, docs/design/003-databases.md).

A database's pointer and write-once versions (log.py) name each table's write-once root;
a table is read through the database's view of it (table_log.py, table.py); a commit over
any number of tables is one database version, made by the commit loop like a table's
(commit.py); transactions (transaction.py), the facade (database.py), and garbage
collection over every table (garbage_collection.py); the change feed over every table
(changes.py). ``DatabaseTransaction`` loads transaction.py when first used: opening a
database's table and reading it load no commit code (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .database import Database, DatabaseSnapshot, create_database, open_database
from .table import DatabaseTable

if TYPE_CHECKING:
    from .transaction import DatabaseTransaction

__all__ = ["Database", "DatabaseSnapshot", "DatabaseTable", "DatabaseTransaction", "create_database", "open_database"]


def __getattr__(name: str) -> Any:
    if name != "DatabaseTransaction":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .transaction import DatabaseTransaction

    return DatabaseTransaction

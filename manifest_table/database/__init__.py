"""Databases: one log over many tables (docs/databases.md, docs/design/003-databases.md).

A database's pointer and write-once versions (log.py) name each table's write-once root;
a table is read through the database's view of it (table_log.py, table.py); a commit over
any number of tables is one database version, made by the commit loop like a table's
(commit.py); transactions (transaction.py), the facade (database.py), and garbage
collection over every table (garbage_collection.py); the change feed over every table
(changes.py)."""

from .database import Database, DatabaseSnapshot, create_database, open_database
from .table import DatabaseTable
from .transaction import DatabaseTransaction

__all__ = ["Database", "DatabaseSnapshot", "DatabaseTable", "DatabaseTransaction", "create_database", "open_database"]

"""What a database's tables, transactions and garbage collection work on, as ``handle.py`` is
for a table: the location, its stores, the database's log and the options every table of the
handle uses. ``Database`` (database.py) is this plus the public API."""

from __future__ import annotations

from ..commit import CommitOptions
from ..data.write import WriteOptions
from ..format.keys import TABLES_PREFIX
from ..storage import ObjectStore
from ..storage.retry import RetryingStore
from .log import DatabaseLog


class DatabaseHandle:
    def __init__(
        self, uri: str, store: ObjectStore, write_options: WriteOptions, commit_options: CommitOptions
    ) -> None:
        self.uri = uri
        self.raw_store = store
        """The store as given: each table's handle reads its own folder of it."""
        self.store = RetryingStore(store, (TABLES_PREFIX,))
        self.log = DatabaseLog(self.store, uri)
        self.write_options, self.commit_options = write_options, commit_options

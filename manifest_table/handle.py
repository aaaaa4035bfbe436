"""The narrow handle every operation works on. delta-rs builds each operation from a log store
and a snapshot, never from the table object; ours take a ``TableHandle``: where the table
is, its store (safe calls retried), file I/O for data files, its version log, and the options
its writes and commits use. ``Transaction``, the operations, Spark and the maintenance job
depend on it; the ``Table`` facade is this handle plus the user-facing methods."""

from __future__ import annotations

from .commit import CommitOptions
from .data.write import WriteOptions
from .format.keys import DATA_PREFIX, ROOT_PREFIX, SEGMENT_PREFIX, TOMBSTONE_PREFIX
from .format.properties import TABLE
from .log.version_log import VersionLog
from .storage import FileIO, ObjectStore
from .storage.retry import RetryingStore


def retrying(store: ObjectStore) -> RetryingStore:
    """``store`` as every part of the library uses it: transient failures of the calls that
    are safe to repeat are retried (storage/retry.py), creates of uniquely named objects
    (data files, tombstones, segments, a database's table roots) included."""
    if isinstance(store, RetryingStore):
        return store
    return RetryingStore(store, (DATA_PREFIX, TOMBSTONE_PREFIX, SEGMENT_PREFIX, ROOT_PREFIX))


class TableHandle:
    """What an operation needs of a table, and nothing of the facade. It holds no snapshot:
    an operation reads the version it works on from ``log``."""

    property_scope = TABLE
    """Which properties the table takes (format/properties.py): a database's table fewer."""

    def __init__(
        self,
        uri: str,
        store: ObjectStore,
        write_options: WriteOptions | None = None,
        commit_options: CommitOptions | None = None,
    ) -> None:
        self.uri = uri
        self.store = retrying(store)
        self.io = FileIO(self.store)
        self.write_options = write_options or WriteOptions()
        self.commit_options = commit_options or CommitOptions()
        self.log = VersionLog(self.store, uri)

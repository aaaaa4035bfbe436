"""A database's log: its pointer and write-once versions (``PointerLog``, shared with
tables), and the cache of its tables' roots. Roots and versions are write-once, so a handle
that has read them never reads them again: a commit from an open handle costs a GET of the
pointer and, when another writer committed since, one of the new version."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..errors import DatabaseNotFoundError
from ..format.database import DatabaseVersion, decode_root
from ..format.manifest import Manifest
from ..log.version_log import PointerLog
from ..storage import ObjectStore

_CACHED_ROOTS = 256


class DatabaseLog(PointerLog[DatabaseVersion]):
    def __init__(self, store: ObjectStore, location: str) -> None:
        super().__init__(store, location)
        self._roots: OrderedDict[str, Manifest] = OrderedDict()
        self._roots_lock = threading.Lock()

    def _decode(self, data: bytes, key: str) -> DatabaseVersion:
        return DatabaseVersion.from_json(data, key)

    def _missing(self) -> Exception:
        return DatabaseNotFoundError(f"no database at {self.location}")

    def create(self, version: DatabaseVersion) -> DatabaseVersion:
        """The commit point: create-only write of the database version."""
        return self._store_version(version)

    def root(self, key: str) -> Manifest:
        """The table state stored in root ``key`` (database-relative), read once per handle."""
        with self._roots_lock:
            found = self._roots.get(key)
            if found is not None:
                self._roots.move_to_end(key)
                return found
        state = decode_root(self.store.get(key), key)
        self.remember_root(key, state)
        return state

    def remember_root(self, key: str, state: Manifest) -> None:
        with self._roots_lock:
            self._roots[key] = state
            self._roots.move_to_end(key)
            while len(self._roots) > _CACHED_ROOTS:
                self._roots.popitem(last=False)

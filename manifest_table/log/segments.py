"""Reading a table's segments (format v2) from its store, through one cache per version log:
segments are write-once, so a cached one never goes stale, and consecutive commits and plans
of one table share most of theirs. Decoding a segment (format/segment.py) loads pyarrow and
numpy: it is imported by the first read, not by opening a log (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..storage import ObjectStore

if TYPE_CHECKING:
    import pyarrow as pa

    from ..format.segment import Segment

_CACHED_ENTRIES = 1 << 20
"""Decoded segment entries kept per reader (about 300 bytes each): a table's hot segments."""


class SegmentReader:
    """Reads and caches decoded segments, keyed by object and by the schema they decode under
    (a rename or a widening decodes the same object differently)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._cache: OrderedDict[tuple[str, tuple], Segment] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()

    def read(self, key: str, schema: pa.Schema, field_ids: Sequence[int]) -> Segment:
        from ..format.segment import decode_segment, shape

        cache_key = (key, shape(schema, field_ids))
        with self._lock:
            found = self._cache.get(cache_key)
            if found is not None:
                self._cache.move_to_end(cache_key)
                return found
        segment = decode_segment(self.store.get(key), key, schema, field_ids)
        self.remember(segment)
        return segment

    def cached(self, key: str, schema: pa.Schema, field_ids: Sequence[int]) -> Segment | None:
        from ..format.segment import shape

        with self._lock:
            return self._cache.get((key, shape(schema, field_ids)))

    def remember(self, segment: Segment) -> None:
        with self._lock:
            cache_key = (segment.key, segment.shape)
            if cache_key not in self._cache:
                self._entries += len(segment)
            self._cache[cache_key] = segment
            while self._entries > _CACHED_ENTRIES and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._entries -= len(dropped)

"""Row groups ruled out by their bloom filters: the membership test a row group's statistics
carry (``ColumnStats.may_contain``) when its column chunk has a filter this reader can probe
(``format/bloom_filter.py``; the writer adds them for the ``bloom_filter_columns`` property).

A table clustered by one key and looked up by another has the looked-up key spread over every
row group: min/max prune nothing there, and each lookup decoded the key column of every row
group (10M rows: 85-100 ms). A probe costs a 32-byte read and a hash per row group.

Only where byte ranges cost no request (a local file, or one in memory): on an object store a
probe is a round trip per row group, about what reading the chunk costs."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..format.bloom_filter import BLOCK_BYTES, HEADER_BYTES, SplitBlockFilter, block_may_contain, plain_bytes, xxh64
from ..storage.fileio import ParquetSource
from .page_layouts import natural_schema


def membership(source: ParquetSource, group: int, leaf: int) -> Callable[[Any], bool] | None:
    """Whether column chunk (``group``, ``leaf``) may hold a value, by its bloom filter; None
    when it has none to probe here. Its header is read once per file (``source.derived``)."""
    if not source.local:
        return None
    key = ("bloom", group, leaf)
    if key not in source.derived:
        source.derived[key] = _find(source, group, leaf)
    found = source.derived[key]
    return None if found is None else functools.partial(_may_contain, source, *found)


@contextlib.contextmanager
def batched() -> Iterator[None]:
    """Within, probes read their blocks through one open file per data file, opened at its
    first probe: a scan choosing a file's row groups probes each of them. (The file opened
    for each 32-byte block took a third of a clustered table's point lookup: design note
    008, part ten.)"""
    if getattr(_OPEN, "files", None) is not None:  # (within another: its files)
        yield
        return
    with contextlib.ExitStack() as stack:
        _OPEN.files, _OPEN.stack = {}, stack
        try:
            yield
        finally:
            _OPEN.files = _OPEN.stack = None


_OPEN = threading.local()
"""In ``batched``: ``files``, id(source) -> its open file, and the ``stack`` closing them."""


def _find(source: ParquetSource, group: int, leaf: int) -> tuple[SplitBlockFilter, str, pa.DataType] | None:
    chunk = source.metadata.row_group(group).column(leaf)
    offset, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
    if offset is None or offset <= 0:
        return None
    with source.fragment.open() as file:
        size = file.size()
        if offset >= size:
            return None
        head = file.read_at(min(HEADER_BYTES, size - offset), offset)
    found = SplitBlockFilter.of(head, offset, length if length and length > 0 else None, size)
    column = source.metadata.schema.column(leaf)
    natural = natural_schema(source).get_field_index(column.path)
    if found is None or column.max_repetition_level or natural < 0:
        return None
    return found, chunk.physical_type, natural_schema(source).field(natural).type


def _may_contain(
    source: ParquetSource, found: SplitBlockFilter, physical: str, stored: pa.DataType, value: Any
) -> bool:
    encoded = plain_bytes(value, physical, stored)
    if encoded is None:
        return True
    hashed = _hash(encoded)
    files = getattr(_OPEN, "files", None)
    if files is None:
        with source.fragment.open() as file:
            return _block_may_contain(file, found, hashed)
    file = files.get(id(source))
    if file is None:
        file = files[id(source)] = _OPEN.stack.enter_context(source.fragment.open())
    return _block_may_contain(file, found, hashed)


def _block_may_contain(file: pa.NativeFile, found: SplitBlockFilter, hashed: int) -> bool:
    block = file.read_at(BLOCK_BYTES, found.block_at(hashed))
    return len(block) != BLOCK_BYTES or block_may_contain(block, hashed)


@functools.lru_cache(maxsize=1024)
def _hash(encoded: bytes) -> int:
    """(One value is probed in every row group of every file a lookup reaches.)"""
    return xxh64(encoded)

"""The ``sort_by`` property at write time: the rows of each appended batch sorted by the
columns it names (ascending, nulls last), so that the files and row groups written hold
narrow ranges of them and scans skip the rest by their statistics.

A stream is sorted in chunks of at most ``CHUNK_BYTES`` of Arrow data, so an append of any
size runs in bounded memory; a batch below that (any in-memory table of ordinary size) is
sorted whole. Clustering across batches is compaction's job (``cluster_by``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa

CHUNK_BYTES = 512 * 1024 * 1024
"""Arrow bytes sorted at once: a few data files' worth."""


def sorted_batches(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, columns: Sequence[str], chunk_bytes: int = CHUNK_BYTES
) -> Iterator[pa.RecordBatch]:
    """``batches`` (of ``schema``) with each chunk's rows sorted by ``columns``."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.nbytes
        if size >= chunk_bytes:
            yield from _sorted(pending, schema, columns)
            pending, size = [], 0
    if pending:
        yield from _sorted(pending, schema, columns)


def _sorted(batches: list[pa.RecordBatch], schema: pa.Schema, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(batches, schema)
    yield from table.sort_by([(name, "ascending") for name in columns]).to_batches()

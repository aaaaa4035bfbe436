"""Corpus cases of the table layouts and the operations: format v1, format v2 (the tail,
segments, merges, the ``deletes`` map), deletes accumulating into one bitmap per file,
overwrites, updates, upserts, transactions, compaction records, streaming batches, files of
other writers, mirrors and expired versions."""

from __future__ import annotations

import io
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from manifest_table.format.entries import DataFile
from tests.conformance.registry import TINY, Site, case, ints

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("qty", pa.int32())])


def rows(ids: range | list[int], tag: str = "n") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {"id": ids, "name": [None if i % 5 == 4 else f"{tag}{i}" for i in ids], "qty": [i % 7 for i in ids]},
        schema=SCHEMA,
    )


def appended(site: Site, batches: int, size: int = 4, **options: object) -> object:
    table = site.table(SCHEMA, **options)
    for b in range(batches):
        table.append(rows(range(b * size, (b + 1) * size)))
    return table


# --- format v1 -----------------------------------------------------------------------------
@case("v1-appends", "A format-1 table: every version's manifest lists every live file.", "format v1", "files")
def _(site: Site) -> None:
    appended(site, 3, format_version=1)


@case(
    "v1-deletes-accumulate",
    "Format 1: deletes on the same files over several versions; each version holds one bitmap "
    "per file, the union of every delete so far, in the tombstone object of the latest delete.",
    "format v1",
    "tombstones",
    "one live bitmap per file",
)
def _(site: Site) -> None:
    table = appended(site, 2, size=6, format_version=1)
    table.delete("id = 1")
    table.delete("id = 3 OR id = 7")
    table.delete("id >= 10")
    table.delete("id = 0")


@case(
    "v1-overwrite-compact",
    "Format 1: an overwrite with a condition, then a compaction with one output.",
    "format v1",
    "overwrite",
    "compaction",
    "rewrites output",
)
def _(site: Site) -> None:
    table = appended(site, 3, format_version=1)
    table.overwrite(rows([4, 5, 100], "o"), where="id >= 4 AND id < 8 OR id = 100")
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)


# --- format v2 -----------------------------------------------------------------------------
@case("v2-tail", "Format 2 with default limits: every file stays in the root's tail.", "format v2", "tail")
def _(site: Site) -> None:
    appended(site, 3)


@case(
    "v2-tail-flush",
    "Format 2, tail_limit 2: the third file overfills the tail, which is flushed into a segment.",
    "format v2",
    "tail",
    "segments",
    "properties",
)
def _(site: Site) -> None:
    appended(site, 5, properties=TINY)


@case(
    "v2-many-segments",
    "Format 2 with one entry per segment and no merging: a version of many segments.",
    "format v2",
    "segments",
    "many segments",
)
def _(site: Site) -> None:
    props = {"tail_limit": 1, "deletes_limit": 64, "segment_target_files": 1, "max_small_segments": 100}
    table = appended(site, 9, size=2, properties=props)
    table.delete("id = 3 OR id = 12")


@case(
    "v2-segment-merges",
    "Format 2, tiny limits: small segments are merged pairwise as commits go on.",
    "format v2",
    "segments",
    "segment merges",
)
def _(site: Site) -> None:
    appended(site, 12, size=2, properties=TINY)


@case(
    "v2-deletes-map",
    "Format 2: deletes of files held in segments go to the root's deletes map, which overrides "
    "the vectors the segments store.",
    "format v2",
    "segments",
    "deletes map",
    "tombstones",
)
def _(site: Site) -> None:
    props = {**TINY, "deletes_limit": 8, "max_small_segments": 8}
    table = appended(site, 5, properties=props)
    table.delete("id = 1")
    table.delete("id = 2 OR id = 5")


@case(
    "v2-deletes-map-folded",
    "Format 2, deletes_limit 1: a delete that takes the map past its limit rewrites the segments "
    "holding its files with the vectors folded in.",
    "format v2",
    "segments",
    "deletes map",
    "segment rewrites",
)
def _(site: Site) -> None:
    props = {**TINY, "deletes_limit": 1, "max_small_segments": 8}
    table = appended(site, 5, properties=props)
    table.delete("id = 1 OR id = 5")
    table.delete("id = 6")


@case(
    "v2-deletes-in-tail",
    "Format 2: deletes of files in the tail replace the tail entries' vectors; a second delete "
    "of the same file writes the union.",
    "format v2",
    "tail",
    "tombstones",
    "one live bitmap per file",
)
def _(site: Site) -> None:
    table = appended(site, 2, size=6)
    table.delete("id = 2")
    table.delete("id = 3 OR id = 8")


@case(
    "deletes-accumulated",
    "Many deletes over the same files, in segments and in the tail, until one file has every "
    "row deleted (cardinality equal to its rows).",
    "format v2",
    "tombstones",
    "one live bitmap per file",
    "fully deleted file",
)
def _(site: Site) -> None:
    table = appended(site, 4, size=5, properties={**TINY, "deletes_limit": 4})
    for where in ("id = 0", "id = 1 OR id = 11", "id = 2 OR id = 17", "id >= 0 AND id < 5", "id = 16"):
        table.delete(where)


@case("empty-table", "A table created and never written: version 0 lists no file.", "format v2", "create")
def _(site: Site) -> None:
    site.table(SCHEMA)


@case(
    "empty-after-delete",
    "Every row deleted: the files stay listed, each with a bitmap of all its rows.",
    "format v2",
    "tombstones",
    "fully deleted file",
)
def _(site: Site) -> None:
    appended(site, 2).delete("id >= 0")


@case(
    "overwrite-everything",
    "An overwrite without a condition removes every file from the version (segments rewritten "
    "without them) and adds the new rows.",
    "format v2",
    "overwrite",
    "segment rewrites",
)
def _(site: Site) -> None:
    table = appended(site, 4, properties=TINY)
    table.overwrite(rows(range(50, 53), "o"))


@case(
    "update",
    "Updates: new row versions in new files, the old positions in a tombstone, and parameters.replaced pairing them.",
    "update",
    "replaced",
    "tombstones",
)
def _(site: Site) -> None:
    table = appended(site, 2, size=5)
    table.update({"qty": "qty + 10"}, where="id < 3")
    table.update(values={"name": "late"}, where="id = 7")


@case(
    "upsert",
    "Upserts: matched keys replaced, new keys inserted; then a snapshot sync that also deletes "
    "the keys its source lacks.",
    "upsert",
    "replaced",
    "tombstones",
)
def _(site: Site) -> None:
    table = appended(site, 2, size=4, properties=TINY)
    table.upsert(rows([1, 2, 20], "u"), on=["id"])
    table.upsert(rows([2, 3, 21], "s"), on=["id"], when_not_matched_by_source="delete")


@case(
    "transaction-mixed",
    "Transactions mixing operations (operation 'transaction'): an append, a delete and an update "
    "in one commit; then a row updated twice in one commit, whose second source is a file the "
    "same commit added (replaced with explicit positions).",
    "transaction",
    "replaced",
    "replaced positions",
)
def _(site: Site) -> None:
    table = appended(site, 2, size=5)
    with table.transaction() as tx:
        tx.append(rows([30, 31], "t"))
        tx.delete("id = 4")
        tx.update(values={"qty": 99}, where="id = 6")
    with table.transaction() as tx:
        tx.update(values={"name": "twice"}, where="id = 7")
        tx.update(values={"qty": 77}, where="id = 7")
        tx.delete("id = 8")


@case(
    "compaction-one-output",
    "A compaction of small files with deletes into one file: parameters.rewrites with 'output'.",
    "compaction",
    "rewrites output",
)
def _(site: Site) -> None:
    table = appended(site, 4, properties=TINY)
    table.delete("id = 2 OR id = 9")
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)
    table.delete("id = 5")


@case(
    "compaction-many-outputs",
    "A compaction of one file with many deletes into several files cut by rows: "
    "parameters.rewrites with 'outputs' and their rows.",
    "compaction",
    "rewrites outputs",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA)
    table.append(
        pa.table(
            {
                "id": range(900),
                "name": [f"r{i * 7919 % 900}" for i in range(900)],
                "qty": [i % 100 for i in range(900)],
            },
            schema=SCHEMA,
        )
    )
    table.delete("id % 10 = 3")
    size = table.manifest().files[0].size
    table.compact(target_file_size=size // 3, min_deleted_fraction=0.05)
    table.delete("id = 450")


@case(
    "compaction-dead-files",
    "A compaction of files whose every row is deleted: a rewrite with output null, the sources only removed.",
    "compaction",
    "rewrites output null",
)
def _(site: Site) -> None:
    table = appended(site, 3)
    table.delete("id < 8")
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.5)


@case(
    "compaction-row-groups",
    "A compaction into one file of several row groups (row_group_size 256 bytes), then deletes "
    "whose positions run across the row groups.",
    "compaction",
    "row groups",
    "tombstones",
)
def _(site: Site) -> None:
    table = appended(site, 4, size=10, row_group_size=256)
    table.compact(target_file_size=10_000_000, min_deleted_fraction=1.0)
    table.delete("id % 4 = 1")


@case(
    "app-transactions",
    "Streaming batches: app_transactions carried forward by every commit, "
    "parameters.app_transaction on the batches' commits (a replayed batch commits nothing).",
    "app transactions",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA)
    for app, batch, ids in (("query-a", 0, [1, 2]), ("query-b", 7, [3]), ("query-a", 1, [4]), ("query-a", 1, [5])):
        with table.transaction() as tx:
            tx.set_app_transaction(app, batch)
            tx.append(rows(ids))
    table.delete("id = 3")


@case(
    "foreign-data-file",
    "A data file of another writer (a key not of our shape, no field ids, three row groups, no "
    "statistics) added with add_files, rows deleted by position across its row groups, next to "
    "files of ours.",
    "add_files",
    "files without field ids",
    "row groups",
    "foreign key shape",
)
def _(site: Site) -> None:
    table = appended(site, 1)
    sink = io.BytesIO()
    foreign = pa.table(
        {"id": range(100, 112), "name": [f"f{i}" for i in range(12)], "qty": pa.array(range(12), pa.int32())}
    )
    pq.write_table(foreign, sink, row_group_size=4)
    key = "data/part-00000-4b1d5c1e-7c2a-4c1e-9a55-3c2d1f0e9b8a-c000.snappy.parquet"
    site.store.put_if_absent(key, sink.getvalue())
    with table.transaction() as tx:
        tx.add_files([DataFile(key, 12, len(sink.getvalue()))])
    with table.transaction() as tx:
        tx.delete_positions({key: BitMap([0, 5, 6, 11])})
    table.append(rows([200]))


@case(
    "mirrors-on",
    "A table mirrored to Iceberg and Delta: the root's 'mirrors' field, and the mirrors' own "
    "objects beside ours, which a reader of this format ignores.",
    "mirrors",
    "format v2",
)
def _(site: Site) -> None:
    table = site.table(SCHEMA, mirrors=["iceberg", "delta"])
    table.append(rows(range(4)))
    table.delete("id = 1")


@case(
    "mirrors-turned-off",
    "Mirrors turned on, changed and off: the 'mirrors' field follows; the mirrors' objects stay "
    "until garbage collection.",
    "mirrors",
    "format v2",
)
def _(site: Site) -> None:
    table = appended(site, 1)
    table.set_mirrors(["delta"])
    table.append(rows(range(4, 6)))
    table.set_mirrors([])
    table.append(rows(range(6, 8)))


@case(
    "gc-expired-prefix",
    "Garbage collection expired a prefix of the versions: only the retained ones are readable, "
    "and the objects only expired versions needed are gone.",
    "gc",
    "expired versions",
)
def _(site: Site) -> None:
    table = appended(site, 3, properties=TINY)
    table.delete("id = 1")
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)
    table.append(rows([50]))
    table.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)


@case(
    "not-null-and-ints",
    "Non-nullable columns next to nullable ones, and a column named like a SQL keyword.",
    "nullability",
)
def _(site: Site) -> None:
    schema = pa.schema([("id", pa.int64(), False), ("select", pa.int16(), False), ("note", pa.string())])
    table = site.table(schema)
    table.append(ints(range(5), select=lambda i: i * 2, note=lambda i: None if i % 2 else "x").cast(schema))


@case(
    "format-3-properties",
    "A property release 0.3.0 does not know (gc_grace) set on a table: from that commit on its "
    "roots are format 3, which 0.3.0 refuses rather than drop the property; earlier versions "
    "stay format 2.",
    "format v3",
    "properties",
    "format v2",
)
def _(site: Site) -> None:
    table = appended(site, 2, properties=TINY)
    table.set_properties({"gc_grace": "36h"})
    table.append(rows(range(8, 12)))
    table.delete("id = 9")

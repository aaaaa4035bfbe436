"""Corpus cases of databases: versions naming each table's root, transactions over several
tables, catalog changes (create, rename, swap, drop, a dropped name reused), a database's
tables in segments, its streaming batches, an Iceberg mirror of a table, and versions
expired by the database's garbage collection."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa

from tests.conformance.registry import TINY, Site, case

ORDERS = pa.schema([("order", pa.int64(), False), ("sku", pa.string()), ("qty", pa.int32())])
STOCK = pa.schema([("sku", pa.string(), False), ("qty", pa.int64())])


def orders(ids: range | list[int]) -> pa.Table:
    ids = list(ids)
    return pa.table({"order": ids, "sku": [f"s{i % 3}" for i in ids], "qty": [1 + i % 4 for i in ids]}, schema=ORDERS)


def stock(skus: list[str], qty: int = 10) -> pa.Table:
    return pa.table({"sku": skus, "qty": [qty] * len(skus)}, schema=STOCK)


@case(
    "db-two-tables",
    "A database of two tables: appends to each, then transactions writing both in one version "
    "(an append to one, an update of the other), and a schema change of one table.",
    "database",
    "transaction across tables",
    "table roots",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("orders", ORDERS)
    db.create_table("stock", STOCK).append(stock(["s0", "s1", "s2"]))
    db.table("orders").append(orders(range(3)))
    for i in (3, 4):
        with db.transaction() as tx:
            tx.table("orders").append(orders([i]))
            tx.table("stock").update({"qty": "qty - 1"}, where=f"sku = 's{i % 3}'")
    with db.table("stock").update_schema() as s:
        s.add_column("note", pa.string())


@case(
    "db-catalog-changes",
    "Catalog changes: tables created, renamed, swapped in one transaction, dropped, and a "
    "dropped name given to a new table (a new table id) in the same version.",
    "database",
    "catalog changes",
    "dropped tables",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("a", STOCK).append(stock(["a1"]))
    db.create_table("b", STOCK).append(stock(["b1", "b2"]))
    db.rename_table("a", "alpha")
    with db.transaction() as tx:
        tx.rename_table("alpha", "tmp")
        tx.rename_table("b", "alpha")
        tx.rename_table("tmp", "b")
    with db.transaction() as tx:
        tx.drop_table("alpha")
        tx.create_table("alpha", STOCK).append(stock(["new"]))
    db.drop_table("b")


@case(
    "db-dropped-table",
    "A table with data dropped: earlier versions still hold it (and its objects stay), the latest does not.",
    "database",
    "dropped tables",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("keep", STOCK).append(stock(["k"]))
    gone = db.create_table("gone", ORDERS)
    gone.append(orders(range(4)))
    gone.delete("order = 1")
    db.drop_table("gone")
    db.table("keep").append(stock(["k2"]))


@case(
    "db-tables-in-segments",
    "A database's table under tiny limits: its roots list segments, a tail and a deletes map; "
    "compaction and an upsert run on it.",
    "database",
    "segments",
    "deletes map",
    "compaction",
    "upsert",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    table = db.create_table("orders", ORDERS, properties=TINY)
    for start in range(0, 15, 3):
        table.append(orders(range(start, start + 3)))
    table.delete("order = 1 OR order = 4")
    table.upsert(orders([2, 30]), on=["order"])
    table.compact(target_file_size=10_000_000, min_deleted_fraction=0.01)


@case(
    "db-app-transactions",
    "Streaming batches written through database transactions: each table's root keeps its app_transactions.",
    "database",
    "app transactions",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("orders", ORDERS)
    db.create_table("stock", STOCK)
    for batch, ids in ((0, [1, 2]), (1, [3]), (1, [4])):
        with db.transaction() as tx:
            tx.table("orders").set_app_transaction("loader", batch)
            tx.table("orders").append(orders(ids))
            tx.table("stock").append(stock([f"b{batch}-{ids[0]}"]))


@case(
    "db-iceberg-mirror",
    "A database's table mirrored to Iceberg in its folder: the mirror's objects under "
    "tables/<id>/, which a reader of this format ignores.",
    "database",
    "mirrors",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    table = db.create_table("orders", ORDERS, mirrors=["iceberg"])
    table.append(orders(range(3)))
    table.delete("order = 0")


@case(
    "db-gc",
    "The database's garbage collection expired its first versions, among them every version "
    "that held a dropped table, whose objects are gone too.",
    "database",
    "gc",
    "expired versions",
    "dropped tables",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("scratch", STOCK).append(stock(["x"]))
    db.create_table("orders", ORDERS).append(orders(range(3)))
    db.drop_table("scratch")
    db.table("orders").append(orders([3]))
    db.table("orders").delete("order = 0")
    db.gc(retain_versions=2, retain_for=None, grace=timedelta(0), force=True)


@case(
    "db-properties",
    "A database property (gc_grace) set: from that commit on the database's versions are "
    "format 2 and hold 'properties'.",
    "database",
    "properties",
    kind="database",
)
def _(site: Site) -> None:
    db = site.database()
    db.create_table("orders", ORDERS).append(orders(range(3)))
    db.set_properties({"gc_grace": "2d"})
    db.table("orders").append(orders([3]))

"""Exact S3 requests of database commits, counted at the moto server as
test_s3_requests.py does: the budget of docs/design/003-databases.md ("Request budget")."""

from __future__ import annotations

import pyarrow as pa

import manifest_table as mt
from tests.protocol.test_s3_requests import Requests, requests  # noqa: F401  (the fixture)

SCHEMA = pa.schema([("id", pa.int64())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids)}, schema=SCHEMA)


def test_a_one_row_append_costs_four_puts_and_two_gets(s3_uri: str, requests: Requests) -> None:  # noqa: F811
    db = mt.create_database(s3_uri)
    assert requests.take() == {"HEAD pointer": 1, "PUT manifest": 1, "PUT pointer": 1}
    db.create_table("a", SCHEMA)
    db.create_table("b", SCHEMA)
    requests.take()

    reopened = mt.open_database(s3_uri)
    table = reopened.table("a")
    assert requests.take() == {"GET pointer": 1, "GET manifest": 1, "GET root": 1}
    table.append(rows(1))  # the version and the root are cached: only the pointer is read
    assert requests.take() == {"GET pointer": 1, "PUT data": 1, "PUT root": 1, "PUT manifest": 1, "PUT pointer": 1}

    mt.open_database(s3_uri).table("b").append(rows(2))  # another writer, another table
    requests.take()
    table.append(rows(3))  # the new version is read; the table's root is the one cached
    assert requests.take() == {"GET pointer": 1, "GET manifest": 1,
                               "PUT data": 1, "PUT root": 1, "PUT manifest": 1, "PUT pointer": 1}
    assert sorted(table.to_arrow().column("id").to_pylist()) == [1, 3]


def test_a_transaction_over_k_tables_costs_k_plus_two_puts_and_its_data(s3_uri: str,
                                                                     requests: Requests) -> None:  # noqa: F811
    db = mt.create_database(s3_uri)
    names = ["a", "b", "c"]
    for name in names:
        db.create_table(name, SCHEMA)
    db.table("a").to_arrow()
    requests.take()
    with db.transaction() as tx:
        for i, name in enumerate(names):
            tx.table(name).append(rows(i))
    counts = requests.take()
    assert {k: v for k, v in counts.items() if k.startswith("PUT")} == {
        "PUT data": 3, "PUT root": 3, "PUT manifest": 1, "PUT pointer": 1}
    assert counts["GET pointer"] == 1 and counts["GET manifest"] == 0


def test_a_tables_history_reads_no_database_version_older_than_the_table(s3_uri: str,
                                                                          requests: Requests) -> None:  # noqa: F811
    """``history()`` walks back from the pointer and stops at the version before the table's
    creation: a table created late in a long-lived database reads only its own versions."""
    db = mt.create_database(s3_uri)
    old = db.create_table("old", SCHEMA)
    for i in range(6):
        old.append(rows(i))
    db.create_table("new", SCHEMA).append(rows(1))
    new = mt.open_database(s3_uri).table("new")
    requests.take()
    assert [v.version for v in new.history()] == [9, 8]
    # (versions 8 and 7, and the root 8 names; version 9 and its root were read on opening)
    assert requests.take() == {"GET pointer": 1, "GET manifest": 2, "GET root": 1}

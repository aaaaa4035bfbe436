"""Differential test: our filters select exactly the rows DuckDB selects, and pruning never
drops a matching row.

A seeded random table (nulls, NaN, infinities, signed zeros, unicode, quotes, backslashes and
wildcards in strings, a zoned timestamp across both 2024 daylight-saving changes in Berlin, a
millisecond timestamp against microsecond literals, decimals, uint64 values at and above
2**63, float32) is written as several files with small
row groups, some rows are deleted, and the live rows are loaded into DuckDB. Then random
filters (comparisons either way round, IN / NOT IN, [NOT] BETWEEN, [NOT] LIKE and ILIKE with
escapes, IS [NOT] NULL, AND / OR / NOT, lower() / upper() of strings and integer remainders,
`i % k`) are checked three ways:

- rows: our row filter over all live rows selects DuckDB's rows;
- pruning: no file and no row group that the manifest or footer statistics rule out holds a
  matching live row (each such file or row group is checked against the matching rows);
- end to end: `table.scan(where=...)` returns DuckDB's rows (every few filters; it reads files).

The filters come from tests/filter_generator.py (shared with the differential read-path
test). The filter text is ours; DuckDB gets the same text except where the dialects differ:
LIKE gains `ESCAPE '\\'` (DuckDB has no escape character by default), timestamp literals
against the zoned column become TIMESTAMPTZ (with the session zone UTC, as our naive literals
are UTC), and BETWEEN is spelled as its two comparisons.

`MT_FUZZ_FILTERS=20000` runs more filters (1,000 by default); `MT_FUZZ_SEED` picks the seed.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import manifest_table as mt
from manifest_table.data import page_layouts, point_reads
from manifest_table.data.scan import _group_stats, _stats_lookup
from manifest_table.expressions import parse
from manifest_table.format.stats import leaf_columns
from manifest_table.storage import ParquetSource
from tests.filter_generator import FilterColumn, Text, like_pattern, random_filter, same, string_literal

duckdb = pytest.importorskip("duckdb")

FILTERS = int(os.environ.get("MT_FUZZ_FILTERS", "1000"))
SEED = int(os.environ.get("MT_FUZZ_SEED", "20241027"))
SCAN_EVERY = 25  # an end-to-end scan reads files (ten of them): every 25th filter

UTC = dt.UTC
SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("i", pa.int64()),
    ("u", pa.uint64()),
    ("f", pa.float64()),
    ("f32", pa.float32()),
    ("d", pa.decimal128(10, 2)),
    ("s", pa.string()),
    ("t", pa.timestamp("us", tz="Europe/Berlin")),
    ("tn", pa.timestamp("ms")),
    ("day", pa.date32()),
    ("b", pa.bool_()),
])

NAN, INF = float("nan"), float("inf")
# Around Berlin's 2024 changes: clocks went back at 01:00 UTC on 27 October (02:00-03:00 local
# happened twice) and forward at 01:00 UTC on 31 March.
INSTANTS = [dt.datetime(2024, 10, 26, 23, tzinfo=UTC) + dt.timedelta(minutes=15 * k) for k in range(17)] + [
    dt.datetime(2024, 3, 31, 0, 30, tzinfo=UTC) + dt.timedelta(minutes=15 * k) for k in range(5)]
VALUES: dict[str, list[object]] = {
    "i": [-3, -2, -1, 0, 1, 2, 3, -(2**63), 2**63 - 1],
    "u": [0, 1, 5, 2**63 - 1, 2**63, 2**64 - 1],
    "f": [NAN, -0.0, 0.0, 0.1, 1.5, -2.5, INF, -INF, 1e300],
    "f32": [NAN, -0.0, 0.0, 0.1, 1.5, 16777216.0, 3.4e38, -INF],
    "d": [Decimal(v) for v in ["-1.00", "0.00", "1.00", "1.10", "1.11", "99999999.99", "-99999999.99"]],
    "s": ["", "a", "ab", "a%b", "a_b", "a\\b", "it's", "ä", "äb", "日本", "x\ny", "A", "\\", "%", "_", "ab\\", "b"],
    "t": INSTANTS,
    "tn": [dt.datetime(2024, 1, 1, 0, 0, 0, 1000 * k) for k in range(4)] + [dt.datetime(2262, 1, 1)],
    "day": [dt.date(2024, 10, 25) + dt.timedelta(days=k) for k in range(5)],
    "b": [True, False],
}


def random_rows(rng: random.Random, first_id: int, count: int) -> list[dict[str, object]]:
    rows = []
    for n in range(count):
        row: dict[str, object] = {"id": first_id + n}
        for name, values in VALUES.items():
            row[name] = None if rng.random() < 0.15 else rng.choice(values)
        rows.append(row)
    return rows


def batches(rng: random.Random) -> list[pa.Table]:
    """Appends whose rows are sorted by different columns, so that files and row groups have
    narrow statistics that prune, plus one constant batch (min == max)."""
    out, next_id = [], 0
    for sort_key in ["i", "u", "f", "f32", "d", "s", "t", "tn", "day", None]:
        rows = random_rows(rng, next_id, rng.randint(40, 90))
        next_id += len(rows)
        if sort_key is not None:
            rows.sort(key=lambda row: (row[sort_key] is None, _sort_value(row[sort_key])))
        out.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    constant = [{"id": next_id + n, **{name: values[1] for name, values in VALUES.items()}} for n in range(30)]
    out.append(pa.Table.from_pylist(constant, schema=SCHEMA))
    return out


def _sort_value(value: object) -> object:
    if isinstance(value, float) and value != value:
        return float("inf")  # any order will do; NaN just must not break sorting
    return value if value is not None else 0


# --- filters as text: ours and DuckDB's (tests/filter_generator.py) -------------------------
def timestamp_literal(rng: random.Random) -> Text:
    instant = rng.choice(INSTANTS) + dt.timedelta(minutes=rng.choice([0, 0, 0, 7, -1]))
    offset = rng.choice([None, 0, 1, 2, -5])
    if offset is None:  # naive: UTC for us; TIMESTAMPTZ in a UTC session for DuckDB
        wall = instant.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
        return Text(f"TIMESTAMP '{wall}'", f"TIMESTAMPTZ '{wall}'")
    shown = instant.astimezone(dt.timezone(dt.timedelta(hours=offset))).isoformat(sep=" ")
    return Text(f"TIMESTAMP '{shown}'", f"TIMESTAMPTZ '{shown}'")


LITERALS: dict[str, Callable[[random.Random], Text]] = {
    "id": lambda rng: same(str(rng.randint(-5, 700))),
    "i": lambda rng: same(str(rng.choice(VALUES["i"] + [-4, 4, 2**63, -(2**63) - 1, 10**20, -(10**20)]))
                          if rng.random() < 0.7 else rng.choice(["2.0", "-3e0", "0.0", "1e0", "1.5", "-0.5", "2.5e0",
                                                                 "9223372036854775807e0", "-9.3e18"])),
    "u": lambda rng: same(str(rng.choice([0, 1, 4, 5, 6, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64, -1, 10**20]))
                          if rng.random() < 0.8 else rng.choice(["5.5", "4.5e0", "1.8446744073709552e19", "0.0"])),
    "f": lambda rng: same(rng.choice(["0.1", "-0.0", "0.0", "1.5", "-2.5", "0.10000000000000001", "1", "0", "-3",
                                      "0.1e0", "-0.0e0", "1.5e0", "1e300", "-1e300", "1.7976931348623157e308"])),
    "f32": lambda rng: same(rng.choice(["0.1", "1.5", "16777217", "16777216.0", "0", "-0.0", "0.10000000149011612",
                                        "0.1e0", "0.10000000149011612e0", "1.5e0", "3.4e38", "3.5e38", "1e39"])),
    "d": lambda rng: same(rng.choice(["1.1", "1.10", "1.105", "1.0000000000000000001", "0.999999999999", "-1", "0",
                                      "99999999.99", "99999999.995", "100000000", "123456789012.5", "-0.005",
                                      "1.5e0", "1.1e0", "1.11"])),
    "s": lambda rng: same(string_literal(rng.choice(VALUES["s"] + ["a\\%", "aa", "z", "äc", "it"]))),  # type: ignore[operator]
    "t": timestamp_literal,
    "tn": lambda rng: same(  # type: ignore[operator]
        f"TIMESTAMP '{rng.choice(VALUES['tn'] + [dt.datetime(2024, 1, 1, 0, 0, 0, 1500), dt.datetime(2300, 1, 1), dt.datetime(1, 1, 1)])}'"  # noqa: E501
    ),
    "day": lambda rng: same(f"DATE '{rng.choice(VALUES['day'] + [dt.date(2024, 10, 24)])}'"),  # type: ignore[operator]
    "b": lambda rng: same(rng.choice(["TRUE", "FALSE"])),
}
COLUMNS = [FilterColumn(name, name, literal, like_pattern if name == "s" else None,
                        integer=pa.types.is_integer(SCHEMA.field(name).type))
           for name, literal in LITERALS.items()]


# --- the table -----------------------------------------------------------------------------
@dataclass
class Piece:
    """A file or one of its row groups: the statistics pruning sees, and its live row ids."""

    where: str
    stats: Callable[[str], object]
    ids: set[int]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[mt.Table, pa.Table, list[Piece]]:
    rng = random.Random(SEED)
    root: Path = tmp_path_factory.mktemp("duck") / "table"
    table = mt.create_table(str(root), SCHEMA, row_group_size=512)
    for batch in batches(rng):
        table.append(batch)
    table.delete("id IN (" + ", ".join(str(rng.randrange(600)) for _ in range(60)) + ")")
    table.delete("s = 'ä' AND i > 0")
    live = table.scan().to_arrow()
    return table, live, pieces(table)


def pieces(table: mt.Table) -> list[Piece]:
    """Each file, each row group, and each run of rows within one page of every column (what
    a point read prunes by: ``point_reads.candidate_spans``)."""
    snapshot = table.scan().snapshot
    names = {name: name for name in SCHEMA.names}  # the files have the table's column names
    found = []
    for file in snapshot.files:
        with table.io.open(file.path) as opened:
            fragment = ds.ParquetFileFormat().make_fragment(pa.py_buffer(opened.read()))
        source = ParquetSource(fragment, fragment.metadata, local=True)
        ids = fragment.to_table(columns=["id"])["id"].to_numpy()
        meta, leaves = source.metadata, leaf_columns(fragment.physical_schema)
        alive = np.ones(len(ids), dtype=bool)
        alive[np.asarray(snapshot.deleted(file).to_array(), dtype=np.int64)] = False
        found.append(Piece(file.path, file.stats.get, set(ids[alive].tolist())))
        start = 0
        for group in range(meta.num_row_groups):
            end = start + meta.row_group(group).num_rows
            lookup = _stats_lookup(file, names, functools.partial(_group_stats, source, group, leaves))
            found.append(Piece(f"{file.path} row group {group}", {name: lookup(name) for name in SCHEMA.names}.get,
                               set(ids[start:end][alive[start:end]].tolist())))
            pages = {name: page_layouts.chunk_pages(source, group, leaf) for name, leaf in leaves.items()}
            bounded = {name: c for name, c in pages.items() if c is not None and c.bounds is not None}
            cuts = sorted({row for c in bounded.values() for row in c.firsts} | {end - start})
            for lo, hi in zip(cuts, cuts[1:]):
                lookup = _stats_lookup(file, names, functools.partial(point_reads._piece_stats, bounded, lo, hi))
                found.append(Piece(f"{file.path} row group {group} pages {lo}-{hi}",
                                   {name: lookup(name) for name in SCHEMA.names}.get,
                                   set(ids[start + lo : start + hi][alive[start + lo : start + hi]].tolist())))
            start = end
    return found


def test_the_table_is_what_the_fuzzer_needs(written: tuple[mt.Table, pa.Table, list[Piece]]) -> None:
    table, live, found = written
    files = [p for p in found if "row group" not in p.where]
    groups = [p for p in found if p.where.endswith(tuple("0123456789")) and "pages" not in p.where]
    pages = [p for p in found if "pages" in p.where]
    assert len(files) >= 5 and len(groups) >= 3 * len(files)  # several files, small groups
    assert len(pages) >= len(groups)  # every row group has its page bounds (a page index)
    bounded = {name for p in pages for name in SCHEMA.names if p.stats(name) is not None}
    assert bounded >= {"id", "i", "u", "f", "s", "t", "tn", "day"}, bounded
    assert 0 < live.num_rows < sum(len(t) for t in batches(random.Random(SEED)))  # some rows deleted
    u = live["u"].to_pylist()
    assert 2**64 - 1 in u and 2**63 in u
    assert any(v != v for v in live["f"].to_pylist() if v is not None)


def duck_ids(connection: object, sql: str) -> list[int]:
    return [row[0] for row in connection.execute(f"SELECT id FROM live WHERE {sql} ORDER BY id").fetchall()]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def connection(written: tuple[mt.Table, pa.Table, list[Piece]]) -> object:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET threads = 1")  # tiny queries: threads only cost
    connection.register("arrow_live", written[1])
    connection.execute("CREATE TABLE live AS SELECT * FROM arrow_live")
    return connection


def test_filters_match_duckdb(written: tuple[mt.Table, pa.Table, list[Piece]], connection: object) -> None:
    table, live, found = written
    rng = random.Random(SEED + 1)
    ids = live["id"]
    pruned = 0
    for n in range(FILTERS):
        text = random_filter(rng, COLUMNS)
        expected = duck_ids(connection, text.duck)
        bound = parse(text.ours).bind(SCHEMA)
        mask = bound.evaluate(live)
        got = sorted(ids.filter(mask).to_pylist())
        assert got == expected, f"rows differ for {text.ours!r} (DuckDB: {text.duck!r})"
        matching = set(got)
        for piece in found:
            if not bound.may_match(piece.stats):
                pruned += 1
                held = piece.ids & matching
                assert not held, f"{piece.where} pruned for {text.ours!r} but holds {held}"
        if n % SCAN_EVERY == 0:
            scanned = sorted(table.scan(columns=["id"], where=text.ours).to_arrow()["id"].to_pylist())
            assert scanned == expected, f"scan differs for {text.ours!r}"
    assert pruned > FILTERS  # the statistics do prune: the soundness checks are not vacuous

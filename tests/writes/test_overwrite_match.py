"""An overwrite with a condition writes only rows that satisfy it (issue 30 item 1): a row
outside it would be kept beside the rows it was meant to replace (ids 1, 2, 2), and no later
overwrite of the condition would remove it. Python, transactions, the CLI; Spark's paths are
in tests/spark/test_spark_native.py, the model and differential tests draw it too."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import InvalidArgumentError
from tests.catalog import assert_rejected

SCHEMA = pa.schema([("event_id", pa.int64()), ("day", pa.date32()), ("kind", pa.string())])
NOV1, NOV2 = date(2026, 11, 1), date(2026, 11, 2)
WHERE = "day = DATE '2026-11-01'"


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(tmp_path / "t", SCHEMA)
    t.append([{"event_id": 1, "day": NOV1, "kind": "view"}, {"event_id": 2, "day": NOV1, "kind": "buy"},
              {"event_id": 3, "day": NOV2, "kind": "view"}])
    return t


def ids(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("event_id").to_pylist())


def test_rows_outside_the_condition_are_refused_and_nothing_is_written(table: mt.Table):
    rows = [{"event_id": 1, "day": NOV1, "kind": "view"}, {"event_id": 2, "day": NOV2, "kind": "buy"}]
    assert_rejected(table.store, InvalidArgumentError, lambda: table.overwrite(rows, where=WHERE),
                    match=r"^1 of the 2 new rows does not satisfy the overwrite's condition day = DATE '2026-11-01' "
                          r"\(e.g. the row with day = DATE '2026-11-02'\).*require_match=False")
    assert ids(table) == [1, 2, 3] and table.version == 1


def test_a_row_where_the_condition_is_unknown_does_not_satisfy_it(table: mt.Table):
    """Three-valued logic: a null day is neither on the day nor off it, so it is not written."""
    with pytest.raises(InvalidArgumentError, match=r"1 of the 1 new row .* day = NULL"):
        table.overwrite([{"event_id": 4, "day": None, "kind": "x"}], where=WHERE)
    with pytest.raises(InvalidArgumentError, match="kind = NULL"):
        table.overwrite([{"event_id": 4, "day": NOV1, "kind": None}], where="day = DATE '2026-11-01' AND kind != 'x'")


def test_matching_rows_replace_and_require_match_false_writes_the_others(table: mt.Table):
    table.overwrite([{"event_id": 1, "day": NOV1, "kind": "view"}], where=WHERE)
    assert ids(table) == [1, 3]
    info = table.overwrite([{"event_id": 5, "day": NOV2, "kind": "late"}], where=WHERE, require_match=False)
    assert info.committed and ids(table) == [3, 5]


def test_every_batch_of_a_stream_is_checked(table: mt.Table):
    """The check covers every file the overwrite writes, from statistics where they prove it
    and by reading the condition's column where they do not (a file of both days)."""
    small = mt.open_table(table.uri, target_file_size=1, row_group_size=64)
    good = pa.table({"event_id": range(100, 2100), "day": [NOV1] * 2000, "kind": ["x"] * 2000}, schema=SCHEMA)
    bad = pa.table({"event_id": [9, 10], "day": [NOV1, NOV2], "kind": ["x", "y"]}, schema=SCHEMA)
    stream = pa.RecordBatchReader.from_batches(SCHEMA, [*good.to_batches(max_chunksize=500), *bad.to_batches()])
    assert_rejected(small.store, InvalidArgumentError, lambda: small.overwrite(stream, where=WHERE),
                    match=r"^1 of the 2002 new rows does not satisfy .*\(e.g. the row with day = DATE '2026-11-02'\)")
    assert ids(table) == [1, 2, 3]


def test_in_a_transaction_the_failed_overwrite_leaves_the_earlier_operations(table: mt.Table):
    with table.transaction() as tx:
        tx.append([{"event_id": 7, "day": NOV2, "kind": "x"}])
        with pytest.raises(InvalidArgumentError, match="does not satisfy"):
            tx.overwrite([{"event_id": 8, "day": NOV2, "kind": "y"}], where=WHERE)
    assert ids(table) == [1, 2, 3, 7]


def test_the_cli_refuses_rows_outside_where_in_its_own_words(table: mt.Table, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    """Every file of the command is checked (the second file's row is the one outside), and
    the way out is the command line's flag."""
    (tmp_path / "a.csv").write_text("event_id,day,kind\n1,2026-11-01,view\n")
    (tmp_path / "b.csv").write_text("event_id,day,kind\n2,2026-11-02,buy\n")
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    assert main(["overwrite", table.uri, *files, "--where", WHERE]) == 1
    err = capsys.readouterr().err
    assert "1 of the 2 new rows does not satisfy" in err and "add --no-require-match" in err
    assert "require_match=" not in err and ids(table) == [1, 2, 3] and table.version == 1
    assert main(["overwrite", table.uri, *files, "--where", WHERE, "--no-require-match"]) == 0
    assert ids(table) == [1, 2, 3]  # 1 and 2 replaced, 2 now on the 2nd, 3 kept
    assert main(["overwrite", table.uri, str(tmp_path / "a.csv"), "--where", WHERE]) == 0
    assert ids(table) == [1, 2, 3]

"""The manifest-table command, run in-process through ``main`` and, for the real entry point,
as ``python -m manifest_table``: every command, its output formats, and how it fails."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
import manifest_table.entry_points
from manifest_table.cli import main
from tests.column_types import SUPPORTED
from tests.column_types import values as type_values

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
Run = Callable[..., tuple[int, str, str]]


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "ts": pa.array([i * 1_000_000 for i in ids], pa.timestamp("us", tz="UTC")),
        },
        schema=SCHEMA,
    )


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """``run(*argv) -> (exit code, stdout, stderr)`` of one in-process command."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """A local table: version 1 holds ids 0-2, version 2 adds ids 3-4."""
    table = mt.create_table(tmp_path / "t", SCHEMA)
    table.append(rows(0, 3))
    table.append(rows(3, 5))
    return str(tmp_path / "t")


def assert_user_error(result: tuple[int, str, str], message: str) -> None:
    """Exit code 1, nothing on stdout, the message on stderr and no traceback."""
    code, out, err = result
    assert code == 1 and out == ""
    assert err.startswith("manifest-table: error: ") and message in err and "Traceback" not in err


def data_files(uri: str) -> set[str]:
    return set(os.listdir(Path(uri, "data")))


# --- create ------------------------------------------------------------------------------
def test_create_from_a_schema_spec(run: Run, tmp_path: Path):
    uri = str(tmp_path / "t")
    spec = (
        "id:int64, small:int8, u:uint16, f:float32, x:double, name:string, ok:bool, day:date, "
        "ts:timestamp[us, tz=UTC], naive:timestamp[ms], amount:decimal(10, 2), raw:binary"
    )
    code, out, _ = run("create", uri, "--schema", spec)
    assert code == 0 and "created" in out
    assert mt.open_table(uri).schema == pa.schema(
        [
            ("id", pa.int64()),
            ("small", pa.int8()),
            ("u", pa.uint16()),
            ("f", pa.float32()),
            ("x", pa.float64()),
            ("name", pa.string()),
            ("ok", pa.bool_()),
            ("day", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("naive", pa.timestamp("ms")),
            ("amount", pa.decimal128(10, 2)),
            ("raw", pa.binary()),
        ]
    )


def test_create_in_an_older_format_version(run: Run, tmp_path: Path):
    uri = str(tmp_path / "t")
    code, out, _ = run("create", uri, "--schema", "id:int64", "--format-version", "1")
    assert code == 0 and "format version 1" in out
    code, out, _ = run("info", uri)
    assert code == 0 and dict(line.split(":", 1) for line in out.splitlines()[:9])["format version"].strip() == "1"


def test_create_like_a_parquet_file(run: Run, tmp_path: Path):
    pq.write_table(rows(0, 2), tmp_path / "sample.parquet")
    code, _, _ = run("create", str(tmp_path / "t"), "--like", str(tmp_path / "sample.parquet"))
    assert code == 0 and mt.open_table(tmp_path / "t").schema == SCHEMA


@pytest.mark.parametrize(
    "spec, message",
    [
        ("id:int65", "unknown type 'int65'"),
        ("id:int64,name", "expected NAME:TYPE"),
        ("ts:timestamp[us, tz=Nowhere/Town]", "Nowhere/Town"),
        ("d:decimal(50, 2)", "precision"),
        ("id:int64,id:string", "unique"),
    ],
)
def test_bad_schema_creates_nothing(run: Run, tmp_path: Path, spec: str, message: str):
    assert_user_error(run("create", str(tmp_path / "t"), "--schema", spec), message)
    assert not (tmp_path / "t" / "manifest").exists()


def test_create_over_a_table_fails(run: Run, uri: str):
    assert_user_error(run("create", uri, "--schema", "id:int64"), "already exists")
    assert mt.open_table(uri).version == 2


# --- reading -----------------------------------------------------------------------------
def test_info(run: Run, uri: str):
    mt.open_table(uri).delete("id = 0")
    code, out, _ = run("info", uri)
    facts = dict(line.split(":", 1) for line in out.splitlines()[:9])
    assert code == 0 and facts["version"].split()[0] == "3"
    assert {
        k: facts[k].strip()
        for k in ("format version", "oldest retained version", "data files", "segments", "live rows", "deleted rows")
    } == {
        "format version": "2",
        "oldest retained version": "0",
        "data files": "2",
        "segments": "0",
        "live rows": "4",
        "deleted rows": "1",
    }
    assert int(facts["data bytes"]) > 0
    assert out.splitlines()[-3:] == [
        "  id: int64 (field id 1)",
        "  name: string (field id 2)",
        "  ts: timestamp[us, tz=UTC] (field id 3)",
    ]


def test_history_text_and_json(run: Run, uri: str):
    code, out, _ = run("history", uri)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["version", "timestamp", "operation", "metrics"]
    assert [line.split()[0] for line in lines[2:]] == ["2", "1", "0"]
    assert lines[2].split()[2:] == ["append", "rows_added=2", "files_added=1"]
    code, out, _ = run("history", uri, "--json", "--limit", "2")
    commits = json.loads(out)
    assert [(c["version"], c["operation"]) for c in commits] == [(2, "append"), (1, "append")]
    assert commits[0]["metrics"]["rows_added"] == 2


def test_scan_prints_an_aligned_table(run: Run, uri: str):
    code, out, err = run("scan", uri, "--columns", "id,name", "--where", "id >= 3")
    assert code == 0 and err == ""
    assert out.splitlines() == ["id  name", "--  ----", "3   n3", "4   n4"]
    code, out, _ = run("scan", uri, "--columns", "id,name", "--where", "id > 99")
    assert code == 0 and out.splitlines() == ["id  name", "--  ----"]  # no rows: still the header


def test_scan_preview_is_capped_and_says_so(run: Run, uri: str):
    mt.open_table(uri).append(rows(5, 30))
    code, out, err = run("scan", uri)
    assert code == 0 and len(out.splitlines()) == 2 + 20 and "first 20 rows" in err
    code, out, err = run("scan", uri, "--limit", "0", "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(out)))) == 30 and err == ""


def test_scan_csv_and_json_parse_back(run: Run, uri: str):
    _, out, _ = run("scan", uri, "--format", "csv", "--where", "id < 2")
    assert list(csv.DictReader(io.StringIO(out))) == [
        {"id": "0", "name": "n0", "ts": "1970-01-01 00:00:00.000000Z"},
        {"id": "1", "name": "n1", "ts": "1970-01-01 00:00:01.000000Z"},
    ]
    _, out, _ = run("scan", uri, "--format", "json", "--columns", "ts,id", "--limit", "1")
    assert [json.loads(line) for line in out.splitlines()] == [{"ts": "1970-01-01T00:00:00.000000Z", "id": 0}]


def test_changes_in_each_format(run: Run, uri: str, tmp_path: Path):
    """``changes --from V``: the rows changed after version V, as CSV, JSON lines or Parquet;
    a filter and a column list as for scan; --to pins the end (docs/changes.md)."""
    mt.open_table(uri).update(values={"name": "x"}, where="id = 1")  # version 3
    _, out, _ = run("changes", uri, "--from", "1", "--format", "csv", "--columns", "id,name")
    found = [(r["id"], r["name"], r["_change_type"], r["_commit_version"]) for r in csv.DictReader(io.StringIO(out))]
    assert found == [
        ("3", "n3", "insert", "2"),
        ("4", "n4", "insert", "2"),
        ("1", "n1", "update_preimage", "3"),
        ("1", "x", "update_postimage", "3"),
    ]
    _, out, _ = run("changes", uri, "--from", "1", "--to", "2", "--format", "jsonl", "--where", "id = 4")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [4]
    assert run("changes", uri, "--from", "1", "--output", str(tmp_path / "c.parquet"))[0] == 0
    assert pq.read_table(tmp_path / "c.parquet").column("_change_type").to_pylist() == [
        "insert",
        "insert",
        "update_preimage",
        "update_postimage",
    ]
    assert_user_error(run("changes", uri), "--from")
    assert_user_error(run("changes", uri, "--from", "9"), "version 9 does not exist")
    assert_user_error(run("changes", uri, "--from", "0", "--where", "nope > 1"), "nope")


def test_scan_to_files_round_trips_through_append(run: Run, uri: str, tmp_path: Path):
    """--output writes every row (no preview cap), in the format its extension names, and
    each written format reads back into a table with the same rows."""
    mt.open_table(uri).append(rows(5, 30))
    expected = mt.open_table(uri).to_arrow().sort_by("id")
    names = ("rows.parquet", "rows.csv", "rows.jsonl", "rows.arrow")
    for name in names:
        assert run("scan", uri, "--output", str(tmp_path / name))[0] == 0
    assert pq.read_table(tmp_path / "rows.parquet").sort_by("id") == expected
    assert pa.ipc.open_stream(pa.memory_map(str(tmp_path / "rows.arrow"))).read_all().sort_by("id") == expected
    copy = str(tmp_path / "copy")
    assert run("create", copy, "--like", str(tmp_path / "rows.parquet"))[0] == 0
    code, out, _ = run("append", copy, *(str(tmp_path / n) for n in names))
    assert code == 0 and out.strip() == "committed version 1 (append): rows_added=120 files_added=4"
    copied = mt.open_table(copy).to_arrow()
    assert (
        copied.num_rows == 120
        and copied.filter(pa.compute.equal(copied["id"], 7)).to_pylist()
        == expected.filter(pa.compute.equal(expected["id"], 7)).to_pylist() * 4
    )


def test_scan_output_formats_by_every_extension(run: Run, uri: str, tmp_path: Path):
    """The other names of each format (docs/cli.md): .ndjson and .json are JSON lines, .arrows
    the Arrow stream, .txt the text table (every row, nothing cut)."""
    for name in ("rows.ndjson", "rows.json", "rows.arrows", "rows.txt"):
        assert run("scan", uri, "--output", str(tmp_path / name))[0] == 0
    for name in ("rows.ndjson", "rows.json"):
        assert [json.loads(line)["id"] for line in (tmp_path / name).read_text().splitlines()] == [0, 1, 2, 3, 4]
    assert pa.ipc.open_stream(pa.memory_map(str(tmp_path / "rows.arrows"))).read_all().num_rows == 5
    lines = (tmp_path / "rows.txt").read_text().splitlines()
    assert lines[0].split() == ["id", "name", "ts"] and len(lines) == 7


def test_an_arrow_ipc_file_of_many_batches_loads_every_batch(run: Run, uri: str, tmp_path: Path):
    """The IPC file format (Feather v2), not only the stream ``scan --format arrow`` writes."""
    with pa.ipc.new_file(str(tmp_path / "rows.feather"), SCHEMA) as writer:
        for start in range(100, 130, 7):
            writer.write_table(rows(start, min(start + 7, 130)))
    assert run("append", uri, str(tmp_path / "rows.feather"))[0] == 0
    ids = mt.open_table(uri).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [*range(5), *range(100, 130)]


def test_scan_output_errors(run: Run, uri: str, tmp_path: Path):
    assert_user_error(run("scan", uri, "--output", str(tmp_path / "no" / "rows.csv")), "No such file")


def test_count_and_time_travel(run: Run, uri: str):
    assert run("count", uri) == (0, "5\n", "")
    assert run("count", uri, "--where", "name IN ('n1', 'n4')") == (0, "2\n", "")
    assert run("count", uri, "--version", "1") == (0, "3\n", "")
    first = mt.open_table(uri).history()[-2].timestamp.isoformat()
    assert run("count", uri, "--as-of", first) == (0, "3\n", "")
    _, out, _ = run("scan", uri, "--as-of", first, "--format", "json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [0, 1, 2]
    assert_user_error(run("count", uri, "--version", "9"), "version 9 does not exist")
    assert_user_error(run("scan", uri, "--as-of", "2000-01-01"), "did not exist yet")
    assert run("count", uri, "--version", "1", "--as-of", first)[0] == 2


# --- writing -----------------------------------------------------------------------------
def test_append_mixed_files_in_one_commit(run: Run, uri: str, tmp_path: Path):
    pq.write_table(rows(10, 12), tmp_path / "a.parquet")
    (tmp_path / "b.csv").write_text("id,name,ts\n20,x,2025-01-01T00:00:00Z\n21,,\n")
    (tmp_path / "c.jsonl").write_text('{"id": 30, "name": "y"}\n')
    code, out, _ = run("append", uri, *(str(tmp_path / n) for n in ("a.parquet", "b.csv", "c.jsonl")))
    assert code == 0 and out.strip() == "committed version 3 (append): rows_added=5 files_added=3"
    table = mt.open_table(uri)
    assert table.version == 3
    assert table.scan(where="id >= 10").to_arrow().sort_by("id").to_pylist() == [
        {"id": 10, "name": "n10", "ts": pa.scalar(10_000_000, SCHEMA.field("ts").type).as_py()},
        {"id": 11, "name": "n11", "ts": pa.scalar(11_000_000, SCHEMA.field("ts").type).as_py()},
        {"id": 20, "name": "x", "ts": pa.scalar(1735689600_000000, SCHEMA.field("ts").type).as_py()},
        {"id": 21, "name": None, "ts": None},
        {"id": 30, "name": "y", "ts": None},
    ]


def test_append_parses_csv_as_the_table_types(run: Run, tmp_path: Path):
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int32,amount:decimal(10,2),day:date")
    (tmp_path / "in.csv").write_text("id,amount,day\n1,12.50,2025-10-04\n")
    assert run("append", uri, str(tmp_path / "in.csv"))[0] == 0
    assert mt.open_table(uri).to_arrow().to_pylist() == [
        {"id": 1, "amount": Decimal("12.50"), "day": pa.scalar(20365, pa.date32()).as_py()}
    ]


def test_timestamps_without_an_offset_are_utc(run: Run, tmp_path: Path):
    """CSV and JSON lines into a zoned column: no offset means UTC. A column without a zone
    keeps wall-clock times and refuses an offset rather than guess."""
    zoned, naive = str(tmp_path / "zoned"), str(tmp_path / "naive")
    run("create", zoned, "--schema", "ts:timestamp[ms, tz=Europe/Paris]")
    run("create", naive, "--schema", "ts:timestamp[ms]")
    (tmp_path / "in.csv").write_text("ts\n2025-01-01 12:00\n2025-01-01T13:00:00+01:00\n2025-01-01\n")
    (tmp_path / "in.jsonl").write_text('{"ts": "2025-01-01T12:00:00"}\n{"ts": "2025-01-01 12:00:00Z"}\n')
    assert run("append", zoned, str(tmp_path / "in.csv"), str(tmp_path / "in.jsonl"))[0] == 0
    instants = [
        None if v is None else v.astimezone(UTC).replace(tzinfo=None)
        for v in mt.open_table(zoned).to_arrow().column("ts").to_pylist()
    ]
    noon, midnight = datetime(2025, 1, 1, 12), datetime(2025, 1, 1)
    assert instants == [noon, noon, midnight, noon, noon]
    assert_user_error(run("append", naive, str(tmp_path / "in.csv")), "zone offset")
    (tmp_path / "plain.csv").write_text("ts\n2025-01-01 12:00:00\n")
    assert run("append", naive, str(tmp_path / "plain.csv"))[0] == 0
    assert mt.open_table(naive).to_arrow().column("ts").to_pylist() == [noon]


def test_append_reads_a_parquet_file_under_key_value_directories(run: Run, uri: str, tmp_path: Path):
    """A dataset reader with hive partitioning would take ``id`` and ``name`` from the path."""
    folder = tmp_path / "id=99" / "name=dir"
    folder.mkdir(parents=True)
    pq.write_table(rows(10, 12), folder / "in.parquet")
    assert run("append", uri, str(folder / "in.parquet"))[0] == 0
    assert mt.open_table(uri).scan(columns=["id", "name"], where="id >= 10").to_arrow().to_pylist() == [
        {"id": 10, "name": "n10"},
        {"id": 11, "name": "n11"},
    ]


def test_csv_nulls_are_only_empty_unquoted_fields(run: Run, tmp_path: Path):
    """pyarrow's default null list read Namibia's code ``NA``, ``NULL``, ``N/A``, ``#N/A``
    and every ``NaN`` as nulls; docs/cli.md says only an unquoted empty field is null."""
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "code:string,x:float64")
    texts = ["NA", "null", "N/A", "NULL", "#N/A", "NaN", "nan", "-NaN", "None"]
    (tmp_path / "in.csv").write_text("code,x\n" + "".join(f"{v},NaN\n" for v in texts) + ',\n"",inf\n')
    assert run("append", uri, str(tmp_path / "in.csv"))[0] == 0
    got = [(r["code"], str(r["x"])) for r in mt.open_table(uri).to_arrow().to_pylist()]
    assert got == [(v, "nan") for v in texts] + [(None, "None"), ("", "inf")]


def test_null_value_and_delimiter(run: Run, tmp_path: Path):
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "code:string,n:int64")
    (tmp_path / "in.csv").write_text("code;n\nNA;1\nNULL;NULL\n;\n")
    assert (
        run("append", uri, str(tmp_path / "in.csv"), "--delimiter", ";", "--null-value", "NULL", "--null-value", "")[0]
        == 0
    )
    assert mt.open_table(uri).to_arrow().to_pylist() == [
        {"code": "NA", "n": 1},
        {"code": None, "n": None},
        {"code": None, "n": None},
    ]
    (tmp_path / "tabs.csv").write_text("code\tn\nNA\t2\n\t3\n")
    assert run("append", uri, str(tmp_path / "tabs.csv"), "--delimiter", "\\t", "--null-value", "NA")[0] == 0
    assert mt.open_table(uri).scan(where="n > 1").to_arrow().to_pylist() == [
        {"code": None, "n": 2},
        {"code": "", "n": 3},
    ]
    assert run("scan", uri, "--format", "csv", "--delimiter", "|", "--where", "n = 1")[1] == '"code"|"n"\n"NA"|1\n'
    for bad in ("ab", ".", "1", '"'):
        assert run("append", uri, str(tmp_path / "in.csv"), "--delimiter", bad)[0] == 2


ROUND_TRIP = pa.schema(
    [
        ("id", pa.int64()),
        ("f", pa.float64()),
        ("f32", pa.float32()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("d", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("ns", "Europe/Paris")),
        ("tn", pa.timestamp("us")),
        ("day", pa.date32()),
        ("ok", pa.bool_()),
        ("u", pa.uint64()),
        ("tm", pa.time64("us")),
        ("l", pa.list_(pa.float64())),
        ("st", pa.struct([("x", pa.binary()), ("y", pa.decimal128(5, 1))])),
        ("m", pa.map_(pa.string(), pa.int32())),
        ("lts", pa.list_(pa.timestamp("ms", "UTC"))),
    ]
)


def round_trip_rows() -> pa.Table:
    """What JSON and CSV cannot hold as themselves: NaN and infinities, bytes that are not
    text, decimals, nanoseconds and zones, uint64 past 2**53, empty strings beside nulls."""
    nan, inf = float("nan"), float("inf")
    return pa.table(
        {
            "id": [1, 2, 3],
            "f": [nan, -inf, None],
            "f32": pa.array([0.1, inf, 1.5], pa.float32()),
            "s": ["NA", "", None],
            "b": [b"\xff\x00", b"", None],
            "d": [Decimal("1.25"), None, Decimal("-0.01")],
            "ts": pa.array([1735787045123456789, None, 0], pa.timestamp("ns", "Europe/Paris")),
            "tn": [datetime(2025, 1, 2, 3, 4, 5, 6), None, datetime(1, 1, 1)],
            "day": [datetime(2025, 1, 2).date(), None, datetime(1970, 1, 1).date()],
            "ok": [True, None, False],
            "u": pa.array([2**64 - 1, 0, None], pa.uint64()),
            "tm": [datetime(1, 1, 1, 12, 30, 1, 123456).time(), None, datetime(1, 1, 1).time()],
            "l": [[nan, 1.0], None, []],
            "st": [{"x": b"\x00", "y": Decimal("1.5")}, None, {"x": None, "y": None}],
            "m": [[("a", 1)], None, []],
            "lts": [[datetime(2025, 1, 1, tzinfo=UTC)], [None], None],
        },
        schema=ROUND_TRIP,
    )


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_scan_output_appends_back_exactly(run: Run, tmp_path: Path, fmt: str):
    """``scan --format jsonl`` is strict JSON (no NaN or Infinity literals) in the mapping of
    docs/cli.md, and what ``scan`` writes as JSON lines or CSV (scalar columns: CSV has no
    nested values) ``append`` reads back as the same values."""
    schema = ROUND_TRIP if fmt == "jsonl" else pa.schema([f for f in ROUND_TRIP if not pa.types.is_nested(f.type)])
    source = mt.create_table(tmp_path / "source", schema)
    source.append(round_trip_rows().select(schema.names))
    out = tmp_path / f"rows.{fmt}"
    assert run("scan", source.uri, "--format", fmt, "--output", str(out))[0] == 0
    if fmt == "jsonl":

        def refuse(constant: str) -> None:
            raise ValueError(f"not JSON: {constant}")

        assert [json.loads(line, parse_constant=refuse)["f"] for line in out.read_text().splitlines()] == [
            "NaN",
            "-Infinity",
            None,
        ]
    copy = mt.create_table(tmp_path / "copy", schema)
    assert run("append", copy.uri, str(out)) == (0, "committed version 1 (append): rows_added=3 files_added=1\n", "")
    assert repr(copy.to_arrow().sort_by("id").to_pylist()) == repr(source.to_arrow().sort_by("id").to_pylist())


def test_json_lines_write_timestamps_in_iso_8601s_extended_form(run: Run, tmp_path: Path):
    """``T`` between date and time and a colon in the offset, as RFC 3339 readers expect
    (Arrow's text has a space and ``+0200``); UTC as ``Z``; naive timestamps without offset."""
    schema = pa.schema([("ts", pa.timestamp("us", "Europe/Berlin")), ("utc", pa.timestamp("ms", "UTC")),
                        ("naive", pa.timestamp("s"))])
    table = mt.create_table(tmp_path / "t", schema)
    table.append(pa.table({"ts": [1_751_371_200_000_000, 1_735_732_800_000_000], "utc": [0, 1], "naive": [0, 1]},
                          schema=schema))
    code, out, _ = run("scan", table.uri, "--format", "jsonl")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        {"ts": "2025-07-01T14:00:00.000000+02:00", "utc": "1970-01-01T00:00:00.000Z", "naive": "1970-01-01T00:00:00"},
        {"ts": "2025-01-01T13:00:00.000000+01:00", "utc": "1970-01-01T00:00:00.001Z", "naive": "1970-01-01T00:00:01"},
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_every_column_type_appends_back_exactly(run: Run, tmp_path: Path, name: str, fmt: str):
    """Each type of tests/column_types.py at its whole precision, and a null, through
    ``scan`` and ``append`` (CSV: the types it can hold, every one but the nested)."""
    dtype = SUPPORTED[name]
    if fmt == "csv" and pa.types.is_nested(dtype):
        pytest.skip("CSV has no nested values: refused (test_csv_refuses_nested_columns_before_writing)")
    schema = pa.schema([("id", pa.int64()), ("v", dtype)])
    source = mt.create_table(tmp_path / "source", schema)
    source.append(
        pa.table(
            {"id": range(6), "v": pa.concat_arrays([type_values(dtype, range(5)), pa.nulls(1, dtype)])}, schema=schema
        )
    )
    assert run("scan", source.uri, "--format", fmt, "--output", str(tmp_path / f"rows.{fmt}"))[0] == 0
    copy = mt.create_table(tmp_path / "copy", schema)
    assert run("append", copy.uri, str(tmp_path / f"rows.{fmt}"))[0] == 0
    assert copy.to_arrow().sort_by("id").equals(source.to_arrow().sort_by("id"))


def test_csv_refuses_nested_columns_before_writing(run: Run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", ROUND_TRIP)
    table.append(round_trip_rows())
    assert_user_error(
        run("scan", table.uri, "--format", "csv", "--output", str(tmp_path / "o.csv")),
        "CSV cannot hold the nested columns",
    )
    assert not (tmp_path / "o.csv").exists()
    code, out, _ = run("scan", table.uri, "--format", "csv", "--columns", "id,b")
    assert code == 0 and out.splitlines()[1] == '1,"/wA="'  # binary in base64


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("wrong.csv", "id,nmae\n1,a\n", "unknown columns ['nmae']"),
        ("late.csv", "id,name,ts\n" + "1,a,\n" * 300_000 + "x,b,\n", "invalid value 'x'"),
        ("bad.jsonl", '{"id": "one"}\n', "cannot read"),
        ("rows.txt", "1,a\n", "cannot tell the format"),
    ],
)
def test_failed_append_leaves_the_table_unchanged(
    run: Run, uri: str, tmp_path: Path, name: str, content: str, message: str
):
    pq.write_table(rows(10, 12), tmp_path / "good.parquet")
    (tmp_path / name).write_text(content)
    before = data_files(uri)
    assert_user_error(run("append", uri, str(tmp_path / "good.parquet"), str(tmp_path / name)), message)
    assert mt.open_table(uri).version == 2 and data_files(uri) == before


@pytest.mark.parametrize("name", ["gone.csv", "gone.parquet", "gone.jsonl", "gone.arrow"])
def test_append_missing_file_writes_nothing(run: Run, uri: str, tmp_path: Path, name: str):
    pq.write_table(rows(10, 12), tmp_path / "good.parquet")
    before = data_files(uri)
    missing = str(tmp_path / name)
    good = str(tmp_path / "good.parquet")
    assert_user_error(run("append", uri, good, missing), f"cannot read {missing}: no such file")
    assert mt.open_table(uri).version == 2 and data_files(uri) == before


def test_an_input_that_is_a_directory_or_missing_is_named(run: Run, uri: str, tmp_path: Path):
    (tmp_path / "dir.parquet").mkdir()
    assert_user_error(run("append", uri, str(tmp_path / "dir.parquet")), "dir.parquet: a directory")
    assert_user_error(run("create", str(tmp_path / "new"), "--like", str(tmp_path / "no.csv")), "no.csv: no such file")
    assert not (tmp_path / "new").exists()


def test_delete(run: Run, uri: str):
    assert run("delete", uri, "id IN (1, 3)") == (0, "deleted 2 rows; the table is now at version 3\n", "")
    assert run("delete", uri, "id = 99") == (0, "deleted 0 rows; the table is unchanged at version 3\n", "")
    assert run("count", uri)[1] == "3\n"


def test_upsert(run: Run, uri: str, tmp_path: Path):
    source = tmp_path / "changes.csv"
    source.write_text("id,name,ts\n1,one,2025-01-01 00:00:00\n9,nine,2025-01-02 00:00:00\n")
    code, out, err = run("upsert", uri, str(source), "--on", "id")
    assert (code, err) == (0, "")
    assert out.startswith("committed version 3 (upsert):") and "rows_updated=1" in out and "rows_inserted=1" in out
    table = mt.open_table(uri)
    assert {r["id"]: r["name"] for r in table.to_arrow().to_pylist()} == {
        0: "n0",
        1: "one",
        2: "n2",
        3: "n3",
        4: "n4",
        9: "nine",
    }
    code, out, _ = run("upsert", uri, str(source), "--on", "id", "--when-matched", "ignore")
    assert code == 0 and out == "nothing to commit; the table is unchanged at version 3\n"


def test_upsert_errors_are_one_line(run: Run, uri: str, tmp_path: Path):
    source = tmp_path / "dup.csv"
    source.write_text("id,name,ts\n1,a,2025-01-01 00:00:00\n1,b,2025-01-01 00:00:00\n")
    assert_user_error(run("upsert", uri, str(source), "--on", "id"), "more than once")
    assert_user_error(run("upsert", uri, str(source), "--on", "nope"), "unknown columns ['nope']")
    assert run("upsert", uri, str(source))[0] == 2  # --on is required
    assert mt.open_table(uri).version == 2


# --- failures ----------------------------------------------------------------------------
def test_bad_filter_is_a_user_error(run: Run, uri: str):
    assert_user_error(run("scan", uri, "--where", "nope = 1"), "unknown column 'nope'")
    assert_user_error(run("count", uri, "--where", "id = 'abc'"), "cannot compare column 'id'")
    # A parse error points at the place: its message goes on after the first line.
    assert_user_error(run("delete", uri, "id >"), "expected a literal after '>'")
    assert mt.open_table(uri).version == 2 and mt.open_table(uri).scan().count() == 5


def test_missing_table(run: Run, tmp_path: Path):
    for command in (["info"], ["history"], ["scan"], ["count"], ["delete", "id = 1"]):
        assert_user_error(run(command[0], str(tmp_path / "none"), *command[1:]), "no table at")


@pytest.mark.parametrize(
    "argv",
    [
        ["create", "", "--schema", "id:int64"],
        ["create", " ", "--schema", "id:int64"],
        ["info", ""],
        ["scan", ""],
        ["append", "\t", "x.csv"],
        ["gc", ""],
    ],
)
def test_an_empty_location_is_a_user_error(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]):
    """``manifest-table create ""`` made a table in the working directory."""
    monkeypatch.chdir(tmp_path)
    assert_user_error(run(*argv), "the table location is")
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_exit_2(run: Run, uri: str):
    code, _, err = run("scan")
    assert code == 2 and "manifest-table scan: error: the following arguments are required: URI" in err
    assert run("frobnicate", uri)[0] == 2
    assert run("scan", uri, "--storage-option", "novalue")[0] == 2
    assert run("history", uri, "--limit", "-1")[0] == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "{t}", "--as-of", "yesterday"],
        ["count", "{t}", "--as-of", "5"],
        ["changes", "{t}", "--since", "5"],
        ["changes", "{t}", "--from", "0", "--until", "tomorrow"],
        ["db", "tables", "{t}", "--as-of", "noon"],
    ],
)
def test_a_time_that_is_not_iso_8601_is_a_usage_error_naming_its_flag(run: Run, uri: str, argv: list[str]):
    """Checked as the flag is parsed, like a duration or a size: ``changes --since 5`` said
    "as_of is not an ISO 8601 time", naming no flag the command has."""
    code, _, err = run(*[a.format(t=uri) for a in argv])
    flag = argv[-2]
    assert code == 2 and f"error: argument {flag}: not an ISO 8601 time: {argv[-1]!r}" in err, err
    assert "as_of" not in err and "Traceback" not in err


def test_storage_options(run: Run, uri: str):
    assert_user_error(run("--storage-option", "region=eu-west-1", "info", uri), "only to s3://")
    assert_user_error(run("info", "s3://bucket/t", "--storage-option", "colour=blue"), "unknown S3 storage option")


def test_s3_table_with_storage_options(run: Run, s3_uri: str, moto_endpoint: str, tmp_path: Path):
    options = ["--storage-option", f"endpoint_url={moto_endpoint}", "--storage-option", "region=us-east-1"]
    (tmp_path / "in.csv").write_text("id\n1\n2\n")
    assert run(*options, "create", s3_uri, "--schema", "id:int64")[0] == 0
    assert run("append", s3_uri, str(tmp_path / "in.csv"), *options)[0] == 0
    assert run("count", s3_uri, *options) == (0, "2\n", "")


def test_version_and_help(run: Run):
    code, out, _ = run("--version")
    assert code == 0 and out.startswith("manifest-table 0.")
    code, out, _ = run("--help")
    assert code == 0 and all(
        name in out
        for name in (
            "info",
            "describe",
            "history",
            "scan",
            "count",
            "create",
            "append",
            "delete",
            "overwrite",
            "compact",
            "gc",
            "maintain",
        )
    )


def test_unexpected_errors_keep_their_traceback(run: Run, uri: str, monkeypatch: pytest.MonkeyPatch):
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(manifest_table.entry_points, "open_table", broken)  # what cli.options.open_from calls
    with pytest.raises(RuntimeError, match="a bug"):
        main(["info", uri])


# --- the real entry point ----------------------------------------------------------------
def python_m(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "manifest_table", *argv], capture_output=True, text=True, timeout=60)


def test_subprocess_round_trip(uri: str, tmp_path: Path):
    (tmp_path / "more.jsonl").write_text('{"id": 7, "name": "seven"}\n')
    done = python_m("append", uri, str(tmp_path / "more.jsonl"), "-v")
    assert done.returncode == 0 and "committed version 3" in done.stdout
    done = python_m("scan", uri, "--where", "id = 7", "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"id": 7, "name": "seven", "ts": None}


def test_subprocess_user_error_has_no_traceback(uri: str):
    done = python_m("scan", uri, "--where", "nope = 1")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("manifest-table: error: unknown column 'nope'")
    assert done.stderr.count("\n") == 1


# --- every command as a subprocess, on a local table and on S3 ---------------------------
def command(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """``manifest-table ARGV`` through ``python -m manifest_table.cli``; the moto fixture's
    AWS_* variables reach it through the environment."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # output to a pipe is never cut
    return subprocess.run(
        [sys.executable, "-m", "manifest_table.cli", *argv], capture_output=True, timeout=120, env=env
    )


def ok(*argv: str) -> str:
    done = command(*argv)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    return done.stdout.decode()


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "t") if request.param == "local" else request.getfixturevalue("s3_uri")


def test_every_command_as_a_subprocess(location: str, tmp_path: Path):
    # Naive timestamps are UTC: 00:00 and 02:00+02:00 are the same instant.
    (tmp_path / "in.csv").write_text(
        'id,name,ts\n1,a,2025-01-01T00:00:00\n2,"two\nlines",2025-01-01 02:00:00+02:00\n3,c,\n'
    )
    (tmp_path / "more.jsonl").write_text('{"id": 20, "name": "x", "ts": "2025-01-02 00:00:00"}\n')
    assert "created" in ok("create", location, "--schema", "id:int64,name:string,ts:timestamp[us, tz=UTC]")
    assert (
        ok("append", location, str(tmp_path / "in.csv")) == "committed version 1 (append): rows_added=3 files_added=1\n"
    )
    assert ok("count", location) == "3\n" and ok("count", location, "--where", "ts IS NULL") == "1\n"
    table = mt.open_table(location)
    assert (
        table.scan(columns=["ts"], where="id < 3").to_arrow().column("ts").to_pylist()
        == [pa.scalar(1735689600_000000, SCHEMA.field("ts").type).as_py()] * 2
    )

    text = ok("scan", location).splitlines()
    assert text[0].split() == ["id", "name", "ts"] and "two\\nlines" in text[3] and len(text) == 5
    expected = table.to_arrow()
    assert pa.ipc.open_stream(command("scan", location, "--format", "arrow").stdout).read_all().equals(expected)
    assert pq.read_table(io.BytesIO(command("scan", location, "--format", "parquet").stdout)).equals(expected)
    ok("scan", location, "--output", str(tmp_path / "out.csv"))
    assert len(list(csv.DictReader(open(tmp_path / "out.csv", newline="")))) == 3
    assert [json.loads(line)["id"] for line in ok("scan", location, "--format", "jsonl").splitlines()] == [1, 2, 3]

    facts = json.loads(ok("info", location, "--json"))
    assert (facts["version"], facts["live_rows"], facts["data_files"]) == (1, 3, 1)
    assert [f["name"] for f in facts["schema"]] == ["id", "name", "ts"]
    assert "live rows:               3" in ok("describe", location)

    assert ok("delete", location, "id = 1") == "deleted 1 row; the table is now at version 2\n"
    assert ok("overwrite", location, str(tmp_path / "more.jsonl"), "--where", "id IN (2, 20)").startswith(
        "committed version 3 (overwrite)"
    )
    assert ok("append", location, str(tmp_path / "more.jsonl")).startswith("committed version 4")
    assert [c["operation"] for c in json.loads(ok("history", location, "--json"))] == [
        "append",
        "overwrite",
        "delete",
        "append",
        "create",
    ]
    assert ok("compact", location, "--dry-run") == "compaction (dry run): would rewrite 3 files into 1\n"
    assert ok("compact", location).startswith("compaction: version 5: 3 files -> 1")
    collect = ["--retain-versions", "1", "--retain-for", "0", "--grace", "0", "--force"]
    assert "dry run: nothing was deleted" in ok("gc", location, "--dry-run", *collect)
    assert "versions 0..4 expired" in ok("gc", location, *collect)
    assert "summary: 1 table, 1 ok, 0 failed" in ok("maintain", location, *collect)
    assert sorted(mt.open_table(location).to_arrow().column("id").to_pylist()) == [3, 20, 20]


def single_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert done.returncode == 1 and done.stdout == b"", err
    assert err.startswith("manifest-table: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


USER_ERRORS = [  # (argv, message); {t} is the table, {tmp} a directory with bad input files
    (["scan", "{t}", "--where", 'country = "DE"'], "string literals take single quotes"),
    (["scan", "{t}", "--where", "id >"], "expected a literal after '>'"),
    (["count", "{t}", "--where", "nope = 1"], "unknown column 'nope'"),
    (["scan", "{t}", "--columns", "id,nope"], "unknown columns ['nope']"),
    (["scan", "{t}", "--version", "9"], "version 9 does not exist"),
    (["info", "{t}/missing"], "no table at"),
    (["create", "{t}", "--schema", "id:int64"], "already exists"),
    (["create", "{t}2", "--schema", "id:integer"], "unknown type 'integer'"),
    (["append", "{t}", "{tmp}/bad.csv"], "cannot read"),
    (["append", "{t}", "{tmp}/missing.csv"], "missing.csv"),
    (["overwrite", "{t}", "{tmp}/wrong.csv"], "unknown columns ['nmae']"),
    (["delete", "{t}", "name = 3"], "cannot compare column 'name'"),
    (["gc", "{t}", "--retain-for", "1h"], "shorter than grace"),
    (["append", "{t}", "{tmp}/\udcff.csv"], "the file name is not valid Unicode"),  # the shell gave byte 0xff
    (["create", "{t}2", "--schema", "i\udcffd:int64"], "the schema is not valid Unicode"),
]


def assert_user_errors(uri: str, tmp_path: Path, cases: list[tuple[list[str], str]]) -> None:
    """Each user mistake: exit 1, one line on stderr, and the table unchanged."""
    table = mt.create_table(uri, SCHEMA)
    table.append(rows(0, 3))
    (tmp_path / "bad.csv").write_text("id,name,ts\nx,a,\n")
    (tmp_path / "wrong.csv").write_text("id,nmae\n1,a\n")
    before = table.history()
    for argv, message in cases:
        err = single_error_line(command(*(a.format(t=uri, tmp=tmp_path) for a in argv)))
        assert message in err, (argv, err)
    assert table.history() == before


@pytest.mark.parametrize("argv, message", USER_ERRORS)
def test_user_errors_as_a_subprocess(tmp_path: Path, argv: list[str], message: str):
    assert_user_errors(str(tmp_path / "t"), tmp_path, [(argv, message)])


def test_user_errors_on_s3_as_a_subprocess(s3_uri: str, tmp_path: Path):
    """The same mistakes on S3, in one test: one table, one subprocess per mistake."""
    assert_user_errors(s3_uri, tmp_path, USER_ERRORS)


def test_a_closed_pipe_ends_quietly(tmp_path: Path):
    """``manifest-table scan ... | head -1``: the reader goes away; exit 0, nothing on stderr."""
    uri = str(tmp_path / "t")
    mt.create_table(uri, SCHEMA).append(rows(0, 200_000))
    for fmt in ("csv", "table", "jsonl"):
        with subprocess.Popen(
            [sys.executable, "-m", "manifest_table.cli", "scan", uri, "--format", fmt, "--limit", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc:
            assert proc.stdout.readline()
            proc.stdout.close()
            err = proc.stderr.read()
            assert proc.wait(timeout=120) == 0 and err == b"", (fmt, err)


def on_a_terminal(*argv: str) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run a command with stderr on a pseudo-terminal; return it and what the terminal got."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "manifest_table.cli", *argv], stdout=subprocess.PIPE, stderr=follower, timeout=120
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal is closed once everything was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    return done, shown


def test_progress_only_on_a_terminal(tmp_path: Path):
    uri = str(tmp_path / "t")
    table = mt.create_table(uri, SCHEMA)
    table.append(rows(0, 50_000))
    table.append(rows(50_000, 50_010))
    scan = ["scan", uri, "--output", str(tmp_path / "out.parquet")]
    piped = command(*scan)
    assert piped.returncode == 0 and piped.stderr == b""
    done, shown = on_a_terminal(*scan)
    assert done.returncode == 0 and done.stdout == b"" and b"writing" in shown
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 50_010
    done, shown = on_a_terminal("compact", uri)
    assert done.returncode == 0 and done.stdout.startswith(b"compaction: version 3") and b"compacting" in shown


def test_scheduled_job_takes_storage_options(s3_uri: str, moto_endpoint: str):
    """gc/maintain.py reaches an S3 endpoint given only as --storage-option."""
    table = mt.create_table(s3_uri, SCHEMA)
    table.append(rows(0, 3))
    table.append(rows(3, 5))
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    script = Path(__file__).resolve().parents[2] / "gc" / "maintain.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            s3_uri,
            "--storage-option",
            f"endpoint_url={moto_endpoint}",
            "--storage-option",
            "region=us-east-1",
            "--log-level",
            "WARNING",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "compaction: version 3: 2 files -> 1" in done.stdout and "summary: 1 table, 1 ok" in done.stdout


def test_text_table_cuts_wide_values_to_the_terminal(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "40")
    uri = str(tmp_path / "t")
    table = mt.create_table(uri, SCHEMA)
    table.append(
        pa.table({"id": [1, 2, 3], "name": ["x" * 500, "tab\there", "日本語" * 10], "ts": [None] * 3}, schema=SCHEMA)
    )
    code, out, _ = run("scan", uri)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5 and max(map(len, lines)) <= 40
    assert "…" in lines[2] and lines[3].split() == ["2", "tab\\there", "null"]
    # Wide characters take two cells each: the row still fits and its last column still aligns.
    from rich.cells import cell_len

    assert cell_len(lines[4]) <= 40 and cell_len(lines[4].rsplit(" ", 1)[0]) == cell_len(lines[3].rsplit(" ", 1)[0])
    monkeypatch.delenv("COLUMNS")  # not a terminal: nothing is cut
    code, out, _ = run("scan", uri)
    assert code == 0 and "x" * 500 in out.splitlines()[2]


def test_text_table_of_wide_characters_and_long_names(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Uncut, a column of only wide characters is as wide as its widest value in cells; cut, a
    long name is cut like a value and its underline fits under it."""
    from rich.cells import cell_len

    monkeypatch.delenv("COLUMNS", raising=False)
    uri = str(tmp_path / "t")
    schema = pa.schema([("a_rather_long_column_name", pa.int64()), ("name", pa.string())])
    table = mt.create_table(uri, schema)
    table.append(pa.table({"a_rather_long_column_name": [1, 2], "name": ["日本語日本語", "é"]}, schema=schema))
    code, out, _ = run("scan", uri)
    lines = out.splitlines()
    assert code == 0 and "日本語日本語" in lines[2] and lines[1].split() == ["-" * 25, "----"]
    assert cell_len(lines[2]) == cell_len("1".ljust(25) + "  " + "日本語日本語")
    monkeypatch.setenv("COLUMNS", "16")
    code, out, _ = run("scan", uri)
    lines = out.splitlines()
    assert code == 0 and max(map(cell_len, lines)) <= 16
    assert "…" in lines[0] and "…" not in lines[1] and set(lines[1].replace(" ", "")) == {"-"}


def test_text_table_shows_binary_as_bytes_even_when_they_are_text(run: Run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("raw", pa.binary())]))
    table.append(pa.table({"id": [1, 2], "raw": pa.array([b"abc", b"\xff\x00"], pa.binary())}))
    code, out, _ = run("scan", table.uri, "--where", "id = 1")  # valid UTF-8 alone, still bytes
    assert code == 0 and out.splitlines()[2:] == ["1   b'abc'"]
    code, out, _ = run("scan", table.uri)
    assert code == 0 and out.splitlines()[2:] == ["1   b'abc'", "2   b'\\xff\\x00'"]


def test_update_sets_expressions_and_plain_values(run: Run, uri: str):
    code, out, err = run(
        "update",
        uri,
        "--where",
        "id >= 3",
        "--set",
        "id=id * 10",
        "--value",
        "name=id",
        "--value",
        "ts=2026-01-02 03:04:05",
    )
    assert (code, err) == (0, "") and out == "updated 2 rows; the table is now at version 3\n"
    got = {r["id"]: r for r in mt.open_table(uri).to_arrow().to_pylist()}
    assert sorted(got) == [0, 1, 2, 30, 40]
    assert got[30]["name"] == "id" and got[30]["ts"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (
        run("update", uri, "--where", "id = 99", "--value", "name=x")[1]
        == "updated 0 rows; the table is unchanged at version 3\n"
    )


def test_update_errors_point_at_the_fix(run: Run, uri: str):
    assert_user_error(run("update", uri, "--set", "name=shipped"), "use --value name=shipped")
    assert_user_error(run("update", uri, "--value", "id=seven"), "--value id='seven' is not a value of type int64")
    assert_user_error(run("update", uri, "--value", "nmae=x"), "did you mean 'name'?")
    assert_user_error(run("update", uri), "needs set=")
    assert mt.open_table(uri).version == 2


def test_upsert_merge_options(run: Run, uri: str, tmp_path: Path):
    partial = tmp_path / "names.csv"
    partial.write_text("id,name\n1,one\n9,nine\n")
    code, out, err = run("upsert", uri, str(partial), "--on", "id", "--columns", "name")
    assert (code, err) == (0, "") and "rows_updated=1" in out and "rows_inserted=1" in out
    got = {r["id"]: r for r in mt.open_table(uri).to_arrow().to_pylist()}
    assert got[1]["name"] == "one" and got[1]["ts"] is not None and got[9]["ts"] is None
    snapshot = tmp_path / "snapshot.jsonl"
    snapshot.write_text('{"id": 2, "name": "x"}\n{"id": 3, "name": "y"}\n')
    code, out, err = run(
        "upsert",
        uri,
        str(snapshot),
        "--on",
        "id",
        "--when-matched",
        "delete",
        "--when-not-matched-by-source",
        "delete",
        "--when-not-matched",
        "ignore",
    )
    assert (code, err) == (0, "") and "rows_removed=6" in out
    assert mt.open_table(uri).to_arrow().num_rows == 0
    assert_user_error(run("upsert", uri, str(partial), "--on", "id", "--columns", "nmae"), "did you mean 'name'?")


def test_maintain_usage_errors_exit_2(run: Run, uri: str):
    """docs/operations.md and gc/README.md: no table at the root, or a retention shorter than
    the grace period, is a usage error (2), as for gc/maintain.py; it exited 1."""
    for argv, message in (
        ([uri + "/nothing-here"], "no table at or under"),
        ([""], "the table location is empty"),
        ([uri, "--retain-for", "1h", "--grace", "2h"], "shorter than grace"),
    ):
        code, out, err = run("maintain", *argv)
        assert (code, out) == (2, "") and err.startswith("manifest-table: error: ") and message in err


def test_counts_read_as_english(run: Run, uri: str, tmp_path: Path):
    code, out, _ = run("create", str(tmp_path / "one"), "--schema", "id:int64")
    assert out.endswith("with 1 column\n")
    out = run(
        "maintain", str(tmp_path / "one"), "--retain-versions", "1", "--retain-for", "0", "--grace", "0", "--force"
    )[1]
    assert "summary: 1 table, 1 ok, 0 failed, 0 compactions skipped" in out and "  version 0 retained" in out


@pytest.mark.parametrize(
    "name, text",
    [
        ("rows.csv", "id,name,ts\n1,a,2025-01-01T00:00:00Z\n2,,2025-01-02T00:00:00Z\n"),
        ("rows.jsonl", '{"id": 1, "name": "a", "ts": "2025-01-01T00:00:00Z"}\n{"id": 2, "name": null, "ts": null}\n'),
    ],
)
def test_create_like_infers_csv_and_json_lines(run: Run, tmp_path: Path, name: str, text: str):
    (tmp_path / name).write_text(text)
    uri = str(tmp_path / "t")
    code, out, err = run("create", uri, "--like", str(tmp_path / name))
    assert (code, err) == (0, "") and out.endswith("with 3 columns\n")
    schema = mt.open_table(uri).schema
    assert schema.field("id").type == pa.int64() and schema.field("name").type == pa.string()
    assert pa.types.is_timestamp(schema.field("ts").type)
    assert run("append", uri, str(tmp_path / name))[0] == 0 and mt.open_table(uri).scan().count() == 2


def test_append_create_makes_the_table_from_the_first_file(run: Run, tmp_path: Path):
    (tmp_path / "a.csv").write_text("id;name\n1;a\n")
    (tmp_path / "b.csv").write_text("id;name\n2;b\n")
    uri = str(tmp_path / "new")
    assert_user_error(run("append", uri, str(tmp_path / "a.csv"), "--delimiter", ";"), "no table at")
    code, out, err = run(
        "append", uri, str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--delimiter", ";", "--create"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"created {uri} (version 0, format version 2) with 2 columns",
        "committed version 1 (append): rows_added=2 files_added=1",
    ]
    code, out, _ = run("append", uri, str(tmp_path / "b.csv"), "--delimiter", ";", "--create")
    assert code == 0 and out.startswith("committed version 2")  # there already: appended
    assert sorted(mt.open_table(uri).to_arrow().column("id").to_pylist()) == [1, 2, 2]
    (tmp_path / "nulls.jsonl").write_text('{"id": 1, "x": null}\n')
    assert_user_error(
        run("create", str(tmp_path / "n"), "--like", str(tmp_path / "nulls.jsonl")),
        "cannot tell the type of columns ['x']",
    )

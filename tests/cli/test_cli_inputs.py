"""Inputs that load exactly or fail cleanly, and a command line that speaks its own words
(issue 30 items 3-5 and 7-9): CSV type inference, quoted newlines and long values, bad
headers, ``append --create`` all or nothing, ``--schema-mode merge``, contradictory flags,
errors in the CLI's words, a missing S3 bucket, and the preview note."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import StoreError, TableNotFoundError
from manifest_table.storage import store_for_uri

Run = tuple[int, str, str]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]):
    def invoke(*argv: str) -> Run:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def user_error(result: Run, *fragments: str) -> str:
    code, out, err = result
    assert code == 1 and err.startswith("manifest-table: error: ") and "Traceback" not in err, result
    assert all(f in err for f in fragments), err
    return err


def no_table_at(uri: Path) -> bool:
    try:
        mt.open_table(uri)
    except TableNotFoundError:
        return not any(p.is_file() for p in uri.rglob("*")) if uri.exists() else True
    return False


# --- item 3: inference -----------------------------------------------------------------------
def test_times_with_and_without_offsets_are_one_zoned_column(run, tmp_path: Path):
    """Arrow left such a column as text, and a filter on it compared text: '2025-10-04 12:00:00'
    sorted after '2025-10-04T10:00:00Z'. Offset-less values are UTC."""
    (tmp_path / "ts.csv").write_text(
        "id,ts\n1,2025-10-04T12:00:00Z\n2,2025-10-04T12:00:00+02:00\n3,2025-10-04 11:30:00\n4,2025-10-04\n5,\n"
    )
    code, _, err = run("append", str(tmp_path / "t"), str(tmp_path / "ts.csv"), "--create")
    assert (code, err) == (0, "")
    table = mt.open_table(tmp_path / "t")
    assert table.schema.field("ts").type == pa.timestamp("us", "UTC")
    assert run("count", table.uri, "--where", "ts > '2025-10-04 11:00'")[1] == "2\n"  # ids 1 and 3, not 2 (10:00 UTC)


def test_a_column_that_looks_numeric_or_temporal_but_stays_text_is_noted(run, tmp_path: Path):
    (tmp_path / "odd.csv").write_text("id,zip,day,name\n1,12345,2025-01-01,a\n2,N/A,2025-13-01,b\n3,99,2025-01-02,c\n")
    code, out, err = run("create", str(tmp_path / "t"), "--like", str(tmp_path / "odd.csv"))
    assert code == 0 and out.startswith("created")
    assert "note: column 'zip' of" in err and "look like numbers, but 'N/A' is not a number" in err
    assert "note: column 'day' of" in err and "look like times, but '2025-13-01' is not an ISO 8601 time" in err
    assert "'name'" not in err  # plain text is not noted
    assert mt.open_table(tmp_path / "t").schema.field("zip").type == pa.string()


# --- item 4: what loads ------------------------------------------------------------------------
def test_quoted_newlines_load_also_from_the_tables_own_scan(run, tmp_path: Path):
    """A quoted newline near a block boundary put Arrow's parser "out of sync with chunker";
    every CSV the CLI writes must read back."""
    rows = 200_000
    lines = "".join(f'{i},"line\nbreak, ""quoted"" {i}",{i % 7}\n' for i in range(rows))
    (tmp_path / "nl.csv").write_text("id,note,k\n" + lines)
    assert run("append", str(tmp_path / "t"), str(tmp_path / "nl.csv"), "--create")[0] == 0
    table = mt.open_table(tmp_path / "t")
    assert table.scan(where="id = 12345").to_arrow().column("note").to_pylist() == ['line\nbreak, "quoted" 12345']
    assert run("scan", table.uri, "--output", str(tmp_path / "back.csv"))[0] == 0
    assert (
        run("create", str(tmp_path / "copy"), "--like", str(Path(table.uri) / table.manifest().files[0].path))[0] == 0
    )
    assert run("append", str(tmp_path / "copy"), str(tmp_path / "back.csv"))[0] == 0
    copy = mt.open_table(tmp_path / "copy")
    assert copy.scan().count() == rows and copy.to_arrow().sort_by("id").equals(table.to_arrow().sort_by("id"))


def test_a_value_longer_than_a_block_loads(run, tmp_path: Path):
    """Arrow's reader refused a row longer than its 1 MiB block ("straddling object"), in the
    first block (the schema's inference) and further in."""
    big = "x" * (3 * 1024 * 1024)
    (tmp_path / "first.csv").write_text(f"id,v\n1,{big}\n2,small\n")
    (tmp_path / "later.csv").write_text(
        "id,v\n" + "".join(f"{i},v{i}\n" for i in range(3, 60_000)) + f'60000,"{big}\nwith a newline"\n60001,end\n'
    )
    assert (
        run("append", str(tmp_path / "t"), str(tmp_path / "first.csv"), str(tmp_path / "later.csv"), "--create")[0] == 0
    )
    table = mt.open_table(tmp_path / "t")
    assert table.scan().count() == 60_001
    assert [len(v) for v in table.scan(["v"], "id IN (1, 60000)").to_arrow().column("v").to_pylist()] == [
        len(big),
        len(big) + 15,
    ]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('{"id": 1', "line {n}: not JSON"),
        ("[1, 2]", "line {n}: expected an object, not [1, 2]"),
        ('{"id": "7"}', "(lines {first}-{last}): '7' is not a value of type int64"),
    ],
    ids=["not-json", "an-array", "a-string-for-an-integer"],
)
def test_a_bad_json_line_is_named_by_its_number_in_any_batch(run, tmp_path: Path, bad_line: str, message: str):
    """Blank lines are skipped, yet counted; lines are read 65,536 at a time, and the number
    named is the file's, past the first batch too."""
    from manifest_table.cli.jsonl import LINES_PER_BATCH

    good = "".join(f'{{"id": {i}}}\n' for i in range(LINES_PER_BATCH + 2))
    path = tmp_path / "rows.jsonl"
    path.write_text("\n" + good + bad_line + "\n\n")
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    n = LINES_PER_BATCH + 4
    user_error(run("append", table.uri, str(path)), message.format(n=n, first=LINES_PER_BATCH + 1, last=n + 1))
    assert table.version == 0
    path.write_text("\n" + good + "\n\n")
    assert run("append", table.uri, str(path))[0] == 0 and table.scan().count() == LINES_PER_BATCH + 2


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"pair": [1, 2, 3]}', "a fixed_size_list<item: int64>[2] value is a list of 2 items"),
        ('{"m": [["k"]]}', "entry is a [key, value] pair"),
        ('{"s": {"x": 1, "y": 2}}', "unknown fields ['y'] in a struct<x: int64>"),
        ('{"f": "many"}', "'many' is not a value of type double"),
        ('{"raw": "AP!8="}', "'AP!8=' is not base64"),  # not b'\\x00\\xff', the '!' dropped
        ('{"wait": true}', "True is not a value of type duration[s]"),
        ('{"s": {"x": true}}', "True is not a value of type int64"),  # a bool is no integer in JSON either
        ('{"flag": 1}', "1 is not a value of type bool"),
        ('{"f": "NaN", "pair": [1, null], "raw": "AP8=", "wait": 90, "amount": 123456789012345678.91}', None),
    ],
    ids=["fixed-size-list", "map", "struct", "float", "base64", "duration", "bool-for-int", "int-for-bool", "fine"],
)
def test_json_lines_values_of_the_wrong_shape_are_named(run, tmp_path: Path, line: str, message: str | None):
    schema = pa.schema(
        [("pair", pa.list_(pa.int64(), 2)), ("m", pa.map_(pa.string(), pa.int64())),
         ("s", pa.struct([("x", pa.int64())])), ("f", pa.float64()), ("raw", pa.binary()), ("wait", pa.duration("s")),
         ("flag", pa.bool_()), ("amount", pa.decimal128(20, 2))]
    )
    table = mt.create_table(tmp_path / "t", schema)
    (tmp_path / "rows.jsonl").write_text(line + "\n")
    result = run("append", table.uri, str(tmp_path / "rows.jsonl"))
    if message is None:
        row = table.to_arrow().to_pylist()[0]
        assert result[0] == 0 and (row["pair"], row["raw"], row["wait"].total_seconds()) == ([1, None], b"\x00\xff", 90)
        assert row["amount"] == Decimal("123456789012345678.91")  # every digit: JSON numbers are not doubles here
    else:
        user_error(result, "rows.jsonl (lines 1-1)", message)
        assert table.version == 0


@pytest.mark.parametrize(
    "header, message",
    [
        (b"id,id\n1,2\n", "the header of {} names columns ['id'] more than once"),
        (b"id,\n1,2\n", "the header of {} has an empty column name (column 2)"),
        (b"id,n\xe9\n1,2\n", "the header of {} is not UTF-8 (byte b'\\xe9' in a column name): save the file as UTF-8"),
    ],
    ids=["repeated", "empty", "latin-1"],
)
def test_a_bad_header_is_a_one_line_error(run, tmp_path: Path, header: bytes, message: str):
    path = tmp_path / "bad.csv"
    path.write_bytes(header)
    user_error(run("append", str(tmp_path / "new"), str(path), "--create"), message.format(path))
    assert no_table_at(tmp_path / "new")
    existing = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    user_error(run("append", existing.uri, str(path)), message.format(path))
    assert existing.version == 0


# --- item 5: append --create is all or nothing --------------------------------------------------
def test_append_create_that_fails_leaves_nothing_behind(run, tmp_path: Path):
    (tmp_path / "a.csv").write_text("id,name\n1,a\n2,b\n")
    (tmp_path / "b.csv").write_text("id,name\n3,c\nfour,d\n")  # not an integer, on the last line
    user_error(
        run("append", str(tmp_path / "t"), str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--create"),
        "cannot read",
        "b.csv",
    )
    assert no_table_at(tmp_path / "t")
    assert run("db", "create", str(tmp_path / "db"))[0] == 0  # a database's table: one database commit
    user_error(
        run("append", str(tmp_path / "db" / "t"), str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--create"), "b.csv"
    )
    assert run("db", "tables", str(tmp_path / "db"))[1] == ""
    code, out, _ = run("append", str(tmp_path / "db" / "t"), str(tmp_path / "a.csv"), "--create")
    assert code == 0 and out.startswith(f"created {tmp_path / 'db' / 't'}") and "committed version" in out
    assert mt.open_table(tmp_path / "db" / "t").scan().count() == 2


# --- item 7: contradictory flags ------------------------------------------------------------------
@pytest.mark.parametrize("flags", [["--iceberg", "--off"], ["--delta", "--off"], ["--iceberg", "--delta", "--sync"]])
def test_contradictory_mirror_flags_are_a_usage_error(run, tmp_path: Path, flags: list[str]):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    code, out, err = run("mirror", table.uri, *flags)
    assert code == 2 and out == "" and "cannot be combined with" in err
    assert table.mirrors == [] and table.version == 0


# --- item 8: --schema-mode merge -------------------------------------------------------------------
def test_schema_mode_merge_adds_columns_on_append_overwrite_and_upsert(run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("kind", pa.string())]))
    table.append(pa.table({"id": [1, 2], "kind": ["a", "b"]}))
    (tmp_path / "new.csv").write_text("id,kind,channel\n3,c,web\n")
    user_error(
        run("append", table.uri, str(tmp_path / "new.csv")),
        "unknown columns ['channel'] (--schema-mode merge adds new columns)",
    )
    (tmp_path / "new.jsonl").write_text('{"id": 3, "kind": "c"}\n{"id": 4, "kind": "d", "channel": "app"}\n')
    user_error(  # a key the table lacks is no value to drop, in any line
        run("append", table.uri, str(tmp_path / "new.jsonl")),
        "unknown columns ['channel'] (--schema-mode merge adds new columns)",
    )
    assert run("append", table.uri, str(tmp_path / "new.csv"), "--schema-mode", "merge")[0] == 0
    assert table.schema.names == ["id", "kind", "channel"]
    (tmp_path / "more.jsonl").write_text('{"id": 4, "kind": "d", "channel": "app", "region": "EU"}\n')
    assert (
        run("overwrite", table.uri, str(tmp_path / "more.jsonl"), "--where", "id >= 3", "--schema-mode", "merge")[0]
        == 0
    )
    (tmp_path / "up.csv").write_text("id,kind,channel,region,score\n1,a,shop,US,0.5\n")
    assert run("upsert", table.uri, str(tmp_path / "up.csv"), "--on", "id", "--schema-mode", "merge")[0] == 0
    assert table.to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "kind": "a", "channel": "shop", "region": "US", "score": 0.5},
        {"id": 2, "kind": "b", "channel": None, "region": None, "score": None},
        {"id": 4, "kind": "d", "channel": "app", "region": "EU", "score": None},
    ]


def test_overwrite_with_schema_mode_merge_takes_new_columns_from_every_file(run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    (tmp_path / "a.jsonl").write_text('{"id": 3}\n')
    (tmp_path / "b.jsonl").write_text('{"id": 4, "channel": "web"}\n')
    files = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert run("overwrite", table.uri, *files, "--schema-mode", "merge")[0] == 0
    assert table.to_arrow().sort_by("id").to_pylist() == [{"id": 3, "channel": None}, {"id": 4, "channel": "web"}]


def test_append_create_with_schema_mode_merge_takes_every_files_columns(run, tmp_path: Path):
    (tmp_path / "a.jsonl").write_text('{"id": 1, "kind": "a"}\n')  # a key missing from JSON is null
    (tmp_path / "b.csv").write_text("id,kind,channel\n2,b,web\n")
    files = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.csv")]
    user_error(run("append", str(tmp_path / "t"), *files, "--create"), "unknown columns ['channel']")
    assert not (tmp_path / "t").exists()
    assert run("append", str(tmp_path / "t"), *files, "--create", "--schema-mode", "merge")[0] == 0
    assert mt.open_table(tmp_path / "t").to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "kind": "a", "channel": None},
        {"id": 2, "kind": "b", "channel": "web"},
    ]


# --- item 9: the CLI's words ------------------------------------------------------------------------
def test_errors_speak_the_command_lines_words(run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("note", pa.string())]))
    table.append(pa.table({"id": [1], "note": ["x"]}))
    err = user_error(run("update", table.uri, "--set", "note=refunded"), "use --value note=refunded")
    assert "values=" not in err
    err = user_error(run("update", table.uri, "--set", "nte=refunded"), "unknown columns ['nte']")  # the name first
    assert "did you mean 'note'" in err and "--value" not in err
    assert run("db", "create", str(tmp_path / "db"))[0] == 0
    err = user_error(run("info", str(tmp_path / "db")), "use manifest-table db COMMAND DB_URI")
    assert "open_database" not in err
    err = user_error(run("count", table.uri, "--where", "id == 1"), "'==' is not SQL: compare with a single '='")


def test_the_filter_language_takes_what_sql_users_type(run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64()), ("country", pa.string())]))
    table.append(
        pa.table({"id": range(-5, 6), "country": ["DE", "de", "Fr", "fr", None, "DE", "NL", "nl", "De", "x", "Ü"]})
    )
    for where, expected in [
        ("country ILIKE 'd%'", 4),
        ("lower(country) = 'de'", 4),
        ("upper(country) IN ('FR', 'Ü')", 3),
        ("id % 2 = -1", 3),
        ("id % 3 = 0", 3),
        ("country NOT ILIKE 'de' AND id % 2 = 0", 3),
    ]:
        assert run("count", table.uri, "--where", where) == (0, f"{expected}\n", ""), where


def test_no_preview_note_after_an_explicit_limit(run, tmp_path: Path):
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": range(50)}))
    assert "showing the first 20 rows" in run("scan", table.uri)[2]
    code, out, err = run("scan", table.uri, "--limit", "5")
    assert code == 0 and err == "" and len(out.splitlines()) == 7
    assert run("scan", table.uri, "--limit", "5", "--output", str(tmp_path / "five.csv"))[2] == ""


def test_a_missing_s3_bucket_is_named_with_how_to_create_it(run, moto_endpoint: str):
    for argv in (["count", "s3://no-such-bucket-30/t"], ["create", "s3://no-such-bucket-30/t", "--schema", "id:int64"]):
        user_error(
            run(*argv),
            "the S3 bucket 'no-such-bucket-30' does not exist",
            "create it first, e.g. aws s3 mb s3://no-such-bucket-30",
        )
    with pytest.raises(StoreError, match="create it first"):
        mt.open_table("s3://no-such-bucket-30/t")
    with pytest.raises(StoreError, match="create it first"):  # GC must not count a delete that failed
        store_for_uri("s3://no-such-bucket-30/t").delete("data/x.parquet")

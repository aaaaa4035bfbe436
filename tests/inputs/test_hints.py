"""Errors that say how to fix the mistake (issue 23 item 5): the nearest column name for a
mistyped one, wherever a column is named, and the single-quote hint for a string written
in double quotes, in Python as on the command line."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError, InvalidFilterError

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("country", pa.string())])


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    table = mt.create_table(tmp_path / "t", SCHEMA)
    table.append([{"id": 1, "cat": "a", "country": "DE"}])
    return table


@pytest.mark.parametrize("call, error, hint", [
    (lambda t: t.scan(where="cta = 'a'").to_arrow(), InvalidFilterError, "did you mean 'cat'?"),
    (lambda t: t.scan(where=mt.col("Country") == "DE").to_arrow(), InvalidFilterError, "did you mean 'country'?"),
    (lambda t: t.scan(columns=["id", "contry"]).to_arrow(), InvalidArgumentError, "did you mean 'country'?"),
    (lambda t: t.delete("idd = 1"), InvalidFilterError, "did you mean 'id'?"),
    (lambda t: t.update({"cat": "ct"}), InvalidFilterError, "did you mean 'cat'?"),
    (lambda t: t.update(values={"contry": "FR"}), InvalidArgumentError, "did you mean 'country'?"),
    (lambda t: t.upsert([{"id": 1, "cat": "b", "country": "FR"}], on=["ids"]), InvalidArgumentError,
     "did you mean 'id'?"),
    (lambda t: t.append([{"id": 2, "cat": "b", "countyr": "FR"}]), mt.errors.SchemaMismatchError,
     "did you mean 'country'?"),
])
def test_a_mistyped_column_names_the_nearest_one(table: mt.Table, call, error, hint):
    version = table.version
    with pytest.raises(error) as raised:
        call(table)
    assert hint in str(raised.value)
    assert table.version == version


def test_a_double_quoted_string_gets_the_single_quote_hint_in_python(table: mt.Table):
    with pytest.raises(InvalidFilterError, match="string literals take single quotes, as in name = 'DE'"):
        table.scan(where='country = "DE"').to_arrow()
    with pytest.raises(InvalidFilterError, match="if 'DE' is a string, write it in single quotes"):
        table.scan(where='"DE" IS NULL').to_arrow()


def test_the_cli_gives_the_hint_once(table: mt.Table, capsys: pytest.CaptureFixture[str]):
    from manifest_table.cli import main

    assert main(["scan", table.uri, "--where", 'country = "DE"']) == 1
    err = capsys.readouterr().err
    assert err.count("single quotes") == 1 and "Traceback" not in err

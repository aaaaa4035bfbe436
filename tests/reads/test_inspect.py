"""``Table.inspect`` and ``manifest-table inspect``: versions, data files and segments as
pyarrow Tables, read from manifests and segments only (issue 23, "metadata as data")."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string()))])


def build(uri: Path, **create) -> mt.Table:
    table = mt.create_table(uri, SCHEMA, **create)
    for start in range(0, 12, 3):
        table.append(
            pa.table(
                {"id": range(start, start + 3), "name": [f"n{start}", None, "z"], "tags": [["a"], [], None]},
                schema=SCHEMA,
            )
        )
    table.delete("id IN (0, 4)")
    return table


@pytest.fixture(params=["v2 with segments", "v1"])
def table(tmp_path: Path, request: pytest.FixtureRequest) -> mt.Table:
    if request.param == "v1":
        return build(tmp_path / "t", format_version=1)
    return build(tmp_path / "t", properties={"tail_limit": 2, "max_small_segments": 100})


def test_history_is_the_commit_log(table: mt.Table):
    history = table.inspect.history()
    commits = table.history()
    assert history.column("version").to_pylist() == [c.version for c in commits] == [5, 4, 3, 2, 1, 0]
    assert history.column("operation").to_pylist() == ["delete", "append", "append", "append", "append", "create"]
    rows = history.to_pylist()
    assert rows[0]["rows_deleted"] == 2 and rows[1]["rows_added"] == 3
    assert json.loads(rows[1]["metrics"]) == commits[1].metrics
    assert rows[0]["timestamp"] == commits[0].timestamp


def test_files_carry_counts_deletes_and_stats(table: mt.Table):
    files = table.inspect.files()
    manifest = table.manifest()
    assert files.column("path").to_pylist() == [f.path for f in manifest.files]
    assert sum(files.column("live_rows").to_pylist()) == table.scan().count() == 10
    assert sorted(files.column("deleted_rows").to_pylist()) == [0, 0, 1, 1]
    with_deletes = [r for r in files.to_pylist() if r["deleted_rows"]]
    assert all(r["deletes"].startswith("tombstones/") for r in with_deletes)
    stats = files.column("stats").to_pylist()
    assert [s["id"]["min"] for s in stats] == [0, 3, 6, 9] and stats[0]["name"]["null_count"] == 1
    assert "tags" not in stats[0]  # a list column keeps no statistics
    assert table.inspect.files(version=1).num_rows == 1
    found = duckdb.sql("SELECT sum(live_rows) AS n FROM files WHERE stats.id.max >= 5").fetchall()
    assert found == [(8,)]  # ids 3-11 but 4


def test_segments_list_every_file_once(table: mt.Table):
    segments = table.inspect.segments()
    kinds = segments.column("kind").to_pylist()
    assert kinds[-1] == "tail" and sum(segments.column("files").to_pylist()) == 4
    assert sum(segments.column("rows").to_pylist()) == 12 and sum(segments.column("deleted_rows").to_pylist()) == 2
    if table.manifest().format_version == 2:
        assert "segment" in kinds and all(p.startswith("segments/") for p in segments.column("path").to_pylist()[:-1])
    else:
        assert kinds == ["tail"]


def test_cli_inspect(table: mt.Table, capsys: pytest.CaptureFixture[str], tmp_path: Path):
    assert main(["inspect", table.uri, "files", "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["stats"]["id"]["max"] for r in lines] == [2, 5, 8, 11]
    assert main(["inspect", table.uri, "files"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "path",
        "rows",
        "deleted_rows",
        "live_rows",
        "size",
        "deletes",
        "cluster_run",
    ]
    assert main(["inspect", table.uri, "history", "--output", str(tmp_path / "h.parquet")]) == 0
    assert pa.parquet.read_table(tmp_path / "h.parquet").num_rows == 6
    assert main(["inspect", table.uri, "segments", "--version", "2", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith('"kind","path","files"')
    assert main(["inspect", table.uri, "history", "--version", "2"]) == 1
    assert "--version applies to files and segments" in capsys.readouterr().err

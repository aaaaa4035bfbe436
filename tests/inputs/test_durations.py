"""Durations and sizes take the CLI's strings in Python too ("7d", "36h", "128MiB"), through
the one parser the CLI uses; the table options are named, typed keyword parameters (issue 23
item 4)."""

from __future__ import annotations

import inspect
from datetime import timedelta
from importlib.resources import files
from pathlib import Path

import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.arguments import format_duration, parse_duration, parse_size
from manifest_table.cli import options
from manifest_table.errors import InvalidArgumentError, VersionExpiredError
from manifest_table.maintenance.job import JobOptions

SCHEMA = pa.schema([("id", pa.int64())])


def test_one_parser_serves_the_cli_and_python():
    assert options.duration is parse_duration and options.size is parse_size
    assert parse_duration("36h") == timedelta(hours=36) and parse_size("128MiB") == 128 << 20


def test_durations_are_written_in_the_largest_unit_that_holds_them_exactly():
    shown = {timedelta(days=1): "24h", timedelta(days=2): "2d", timedelta(weeks=1): "7d", timedelta(minutes=90): "90m",
             timedelta(seconds=2.5): "2.5s", timedelta(0): "0", timedelta(hours=36): "36h"}
    for value, text in shown.items():
        assert format_duration(value) == text and parse_duration(text) == value


def test_table_options_take_sizes_and_durations_as_text(tmp_path: Path):
    table = mt.create_table(tmp_path / "t", SCHEMA, target_file_size="1MiB", row_group_size="64KiB",
                            deadline="30s", recheck_after=timedelta(minutes=2), backoff_cap="1m")
    assert table.write_options.target_file_size == 1 << 20 and table.write_options.row_group_size == 64 << 10
    options = table.commit_options
    assert (options.deadline, options.recheck_after, options.backoff_cap) == (30.0, 120.0, 60.0)
    opened = mt.open_table(tmp_path / "t", deadline=12.5, target_file_size=4096)
    assert opened.commit_options.deadline == 12.5 and opened.write_options.target_file_size == 4096


def test_gc_and_compact_take_text(tmp_path: Path):
    table = mt.create_table(tmp_path / "t", SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    assert table.compact(target_file_size="1MiB").metrics["files_removed"] == 3
    report = table.gc(retain_for="7d", grace="36h", dry_run=True)
    assert report.dry_run and len(report.versions_retained) == 5
    with pytest.raises(InvalidArgumentError, match="shorter than grace"):
        table.gc(retain_for="1h")
    job = JobOptions(retain_for="2w", grace="1d", target_file_size="64MiB")
    assert (job.retain_for, job.grace, job.target_file_size) == (timedelta(weeks=2), timedelta(days=1), 64 << 20)


@pytest.mark.parametrize("call, message", [
    (lambda p: mt.create_table(p, SCHEMA, target_file_size="lots"), "not a positive size: 'lots'"),
    (lambda p: mt.create_table(p, SCHEMA, target_file_size="0MiB"), "not a positive size: '0MiB'"),
    (lambda p: mt.create_table(p, SCHEMA, deadline="soon"), "not a duration: 'soon'"),
    (lambda p: mt.create_table(p, SCHEMA, deadline="0"), "deadline must be above 0"),
    (lambda p: mt.create_table(p, SCHEMA, compresion="zstd"), "did you mean 'compression'"),
    (lambda p: mt.create_table(p, SCHEMA).gc(grace=[3600]), "grace must be a datetime.timedelta .* such as '7d'"),
    (lambda p: mt.create_table(p, SCHEMA).gc(grace=3600, retain_for=60), "shorter than grace"),
])
def test_bad_text_is_refused_before_anything_is_written(tmp_path: Path, call, message):
    with pytest.raises(InvalidArgumentError, match=message):
        call(tmp_path / "t")


def test_the_signatures_name_the_options():
    for function in (mt.open_table, mt.create_table):
        parameters = inspect.signature(function).parameters
        for name in ("target_file_size", "row_group_size", "compression", "deadline", "max_attempts"):
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, (function, name)
    assert files("manifest_table").joinpath("py.typed").is_file()


def test_a_number_is_seconds(tmp_path: Path):
    """Issue 30 item 6: ``gc(retain_for=0)`` raised, though ints were said to be accepted."""
    t = mt.create_table(tmp_path / "t", SCHEMA)
    t.append(pa.table({name: pa.nulls(1, t.schema.field(name).type) for name in t.schema.names}))
    t.gc(retain_versions=1, retain_for=0, grace=0.0, force=True)  # timedelta(0) both
    with pytest.raises(VersionExpiredError):
        t.manifest(0)
    with pytest.raises(InvalidArgumentError, match="shorter than grace"):
        t.gc(retain_for=60, grace=3600)

"""The scheduled maintenance job, gc/maintain.py: run as cron and systemd run it (a
subprocess) for exit codes and reports, and in-process for the cheaper cases."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

from manifest_table import Table, create_table, open_table
from manifest_table.errors import CommitConflictError
from manifest_table.maintenance.job import JobOptions

SCRIPT = Path(__file__).resolve().parents[2] / "gc" / "maintain.py"
SCHEMA = pa.schema([("id", pa.int64())])
AGGRESSIVE = ["--retain-versions", "1", "--retain-for", "0", "--grace", "0", "--force"]


@pytest.fixture(scope="module")
def job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("maintain_job", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def small_table(uri: str) -> Table:
    """Three one-row files and a delete: something to compact and something to collect."""
    t = create_table(uri, SCHEMA)
    for i in range(3):
        t.append(pa.table({"id": [i]}, schema=SCHEMA))
    t.delete("id = 0")
    return t


def ids(uri: str) -> list[int]:
    return sorted(open_table(uri).to_arrow().column("id").to_pylist())


def test_job_processes_every_table_and_reports_the_broken_one(tmp_path: Path) -> None:
    for name in ("a", "nested/b", "broken"):
        small_table(str(tmp_path / name))
    (tmp_path / "broken" / "manifest" / "v00000000000000000004.json").write_text("{not json")
    (tmp_path / "not-a-table").mkdir()

    result = run(str(tmp_path), *AGGRESSIVE, "--log-level", "WARNING")
    assert result.returncode == 1, result.stderr
    out = result.stdout
    for name in ("a", "nested/b"):
        assert f"== {tmp_path / name} ==" in out
        assert ids(str(tmp_path / name)) == [1, 2]
        assert len(open_table(str(tmp_path / name)).manifest().files) == 1
    assert out.count("compaction: version 5: 3 files -> 1") == 2 and out.count("versions 0..4 expired") == 2
    assert "summary: 3 tables, 2 ok, 1 failed" in out
    assert f"FAILED {tmp_path / 'broken'}: CorruptTableError" in out
    assert "Traceback" not in out + result.stderr
    assert "CorruptTableError" in result.stderr  # logged too


def test_an_unexpected_error_on_one_table_does_not_stop_the_others(job: ModuleType, tmp_path: Path) -> None:
    """A compactor (``run_job``'s seam: Spark's job passes its own) failing with an error that is
    no ``ManifestTableError``, as a bug would."""
    for name in ("a", "b", "c"):
        small_table(str(tmp_path / name))

    def compact(table: Table, target: int | None, fraction: float):
        if table.uri.endswith("/b"):
            raise RuntimeError("a bug")
        return table.compact(target, fraction)

    shown: list[str] = []
    options = JobOptions(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert job.run_job(job.find_tables(str(tmp_path)), options, compact, shown.append) == 1
    assert "FAILED: unexpected RuntimeError: a bug" in shown[1]
    assert "summary: 3 tables, 2 ok, 1 failed" in shown[-1]
    assert [open_table(str(tmp_path / n)).history()[0].operation for n in ("a", "c")] == ["compact", "compact"]


def test_job_on_one_healthy_table_exits_zero(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    small_table(uri)
    result = run(uri, "--no-compact")
    assert result.returncode == 0, result.stderr
    assert "summary: 1 table, 1 ok, 0 failed" in result.stdout and "compaction:" not in result.stdout
    assert "versions 0..4 retained" in result.stdout  # a week of retention keeps everything


@pytest.mark.parametrize("args, message", [
    (["--retain-for", "7x"], "not a duration"),
    (["--retain-for", "1h", "--grace", "2h"], "shorter than grace"),
    (["--target-file-size", "big"], "not a positive size"),
    (["--min-deleted-fraction", "0"], "not a fraction"),
    (["--retain-versions", "0", "--force"], "at least 1"),
])
def test_usage_errors_exit_2(job: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             args: list[str], message: str) -> None:
    small_table(str(tmp_path / "t"))
    with pytest.raises(SystemExit) as exit_:
        job.main([str(tmp_path), *args])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("root", ["", "  "])
def test_an_empty_root_is_a_usage_error(job: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], root: str) -> None:
    """An empty root is the working directory: every table under it would be maintained."""
    small_table(str(tmp_path / "t"))
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_:
        job.main([root, *AGGRESSIVE])
    assert exit_.value.code == 2 and "the table location is" in capsys.readouterr().err
    assert sorted(tmp_path.rglob("*")) == before


def test_tables_below_a_root_are_found_in_order(job: ModuleType, tmp_path: Path) -> None:
    for name in ("b", "a", "c/d", "c/a", "a2"):
        small_table(str(tmp_path / name))
    assert job.find_tables(str(tmp_path)) == [str(tmp_path / n) for n in ("a", "a2", "b", "c/a", "c/d")]


def test_a_path_without_tables_is_a_usage_error(tmp_path: Path) -> None:
    result = run(str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "no table at or under" in result.stderr
    assert "Traceback" not in result.stderr


def test_dry_run_changes_nothing(job: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "t")
    small_table(uri)
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    assert job.main([uri, "--dry-run", *AGGRESSIVE]) == 0
    out = capsys.readouterr().out
    assert "would rewrite 3 files into 1" in out and "dry run: nothing was deleted" in out and "would delete" in out
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    assert job.main([uri, "--dry-run", "--target-file-size", "100", *AGGRESSIVE]) == 0
    out = capsys.readouterr().out  # each file is above 100 bytes: only the one with deleted rows qualifies
    assert "compaction (dry run): would rewrite 1 file into 1" in out


def test_a_compaction_conflict_is_skipped_not_failed(job: ModuleType, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    small_table(str(tmp_path / "t"))

    def conflicting(*_: object) -> None:
        raise CommitConflictError("version 5 (compact) removed files this commit replaces")
    monkeypatch.setattr(Table, "compact", conflicting)
    assert job.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "compaction skipped: a concurrent commit conflicted" in out
    assert "1 ok, 0 failed, 1 compaction skipped" in out


def test_two_copies_run_concurrently_with_a_writer(tmp_path: Path) -> None:
    uris = [str(tmp_path / name) for name in ("a", "b")]
    for uri in uris:
        small_table(uri)
    args = [str(tmp_path), "--retain-for", "1h", "--grace", "1h", "--force", "--log-level", "ERROR"]
    copies = [subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    writer = open_table(uris[0])
    for i in range(10, 20):
        writer.append(pa.table({"id": [i]}, schema=SCHEMA))
    outputs = [copy.communicate(timeout=120)[0] for copy in copies]
    assert [copy.returncode for copy in copies] == [0, 0], outputs
    assert ids(uris[0]) == [1, 2, *range(10, 20)] and ids(uris[1]) == [1, 2]


@pytest.mark.parametrize("kind", ["s3", "gcs", "azure"])
def test_tables_under_a_bucket_prefix_are_found_and_maintained(job: ModuleType, kind: str,
                                                               request: pytest.FixtureRequest,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """On S3 (moto), GCS (fake-gcs-server) and Azure (Azurite), whose fixtures point the
    providers' default settings at them: no storage option is needed."""
    root = request.getfixturevalue(f"{kind}_uri").rsplit("/", 1)[0]
    for name in ("x", "deeper/y"):
        small_table(f"{root}/{name}")
    assert job.find_tables(root) == [f"{root}/deeper/y", f"{root}/x"]
    assert job.find_tables(f"{root}/x") == [f"{root}/x"]
    assert job.main([root, *AGGRESSIVE]) == 0
    assert "summary: 2 tables, 2 ok, 0 failed" in capsys.readouterr().out
    assert ids(f"{root}/x") == [1, 2] and open_table(f"{root}/x").history()[0].operation == "compact"


@pytest.mark.parametrize("text, expected", [("0", timedelta(0)), ("90s", timedelta(seconds=90)),
                                            ("1.5h", timedelta(minutes=90)), ("7d", timedelta(days=7)),
                                            ("2W", timedelta(weeks=2))])
def test_durations(job: ModuleType, text: str, expected: timedelta) -> None:
    assert job.duration(text) == expected


@pytest.mark.parametrize("text, expected", [("1000", 1000), ("128MiB", 128 << 20), ("64MB", 64_000_000),
                                            ("1gib", 1 << 30), ("0.5KiB", 512)])
def test_sizes(job: ModuleType, text: str, expected: int) -> None:
    assert job.size(text) == expected

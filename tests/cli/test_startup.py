"""Start-up (issue 30 item 11): the package and the command import only what the call needs.
Timings are measured by tests/benchmarks/startup.py, never asserted here; these tests check
the imports that made every call slow, in fresh processes (a test process has them all)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import manifest_table as mt
from manifest_table.cli import app

HEAVY = ["pandas", "pyarrow.dataset", "pyarrow.parquet", "pyarrow.compute", "pyarrow.acero", "fastavro", "boto3"]


def imported_after(code: str) -> dict[str, bool]:
    """Which of ``HEAVY`` (and pyarrow itself) a fresh interpreter has imported after ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {['pyarrow', *HEAVY]!r}}}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_package_imports_neither_pandas_nor_pyarrow_dataset() -> None:
    found = imported_after("import manifest_table")
    assert not found["pandas"] and not found["pyarrow.dataset"], found
    assert not any(found.values()), found  # nothing heavy at all: names load on first use


def test_counting_a_table_loads_no_reader_writer_or_mirror_code(tmp_path: Path) -> None:
    """A scan's count reads the pointer and one manifest: pyarrow's core loads with the
    scan, nothing else does (pandas alone took 0.2 s per call; point_reads.py brought it back
    through pyarrow.dataset)."""
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    table.delete("id = 2")
    found = imported_after(f"import manifest_table as mt; assert mt.open_table({table.uri!r}).scan().count() == 2")
    assert found["pyarrow"] and not any(found[m] for m in HEAVY), found


def test_the_count_command_imports_no_pyarrow(tmp_path: Path) -> None:
    """``manifest-table count`` answers from the manifest's own counts, its schema left
    encoded (format/stored_schema.py): no pyarrow, numpy or pyroaring, whose import was most
    of the command's time (docs/benchmarks.md, "Start-up"). A table of either format and a
    database's table, at the latest version, at a version and as of a time; the counts are
    checked against the scan's by tests/reads/test_differential.py."""
    v1 = mt.create_table(tmp_path / "v1", pa.schema([("id", pa.int64())]), format_version=1)
    mt.create_database(tmp_path / "db")
    tables = [v1, mt.create_table(tmp_path / "v2", v1.schema), mt.create_table(f"{tmp_path / 'db'}/t", v1.schema)]
    for table in tables:
        table.append(pa.table({"id": [1, 2, 3]}))
        table.delete("id = 2")
        as_of = table.manifest().timestamp.isoformat()
        before = str(table.version - 1)  # (the append's version)
        calls = [
            ["count", table.uri],
            ["count", table.uri, "--version", before],
            ["count", table.uri, "--as-of", as_of],
        ]
        code = "from manifest_table.cli import main\n" + "".join(f"assert main({argv!r}) == 0\n" for argv in calls)
        done = subprocess.run(
            [sys.executable, "-c", f"{code}import sys; print(sorted(sys.modules))"],
            capture_output=True,
            text=True,
            check=True,
        )
        *counts, modules = done.stdout.splitlines()
        assert counts == ["2", "3", "2"], (table.uri, counts)
        loaded = {name.split(".")[0] for name in json.loads(modules.replace("'", '"'))}
        assert not loaded & {"pyarrow", "numpy", "pyroaring", "pandas"}, (table.uri, sorted(loaded))


def test_help_and_version_import_no_library_code() -> None:
    for argv in (["--help"], ["--version"], ["count", "--help"], ["no-such-command"]):
        found = imported_after(f"from manifest_table.cli import main; main({argv!r})")
        assert not any(found.values()) or argv == ["count", "--help"], (argv, found)


def test_the_command_table_names_every_command_its_module_registers() -> None:
    """``app.COMMANDS`` gives ``--help`` the commands without importing their modules: it
    must list exactly what the modules register, with the same summaries and aliases."""
    parser = app._parser(None, every=True)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    registered = {}
    for name, sub in action.choices.items():
        aliases = tuple(a for a, p in action.choices.items() if p is sub and a != name and a not in helps)
        if name in helps:
            registered[name] = (helps[name], aliases)
    assert registered == {name: (summary, aliases) for name, (_, summary, aliases) in app.COMMANDS.items()}
    for name, (module, _, _) in app.COMMANDS.items():  # and each runs in the module named
        sub = app._parser(name)
        chosen = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        assert (
            chosen.get_default("run") is None or chosen.get_default("run").__module__ == f"manifest_table.cli.{module}"
        )


def test_the_version_is_the_package_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "manifest_table", "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"manifest-table {mt.__version__}" and mt.__version__ == version("manifest_table")

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
    """Opening a table and counting its rows reads the pointer and one manifest: pyarrow's
    core decodes the schema, nothing else loads (pandas alone took 0.2 s per call)."""
    table = mt.create_table(tmp_path / "t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    table.delete("id = 2")
    found = imported_after(f"import manifest_table as mt; assert mt.open_table({table.uri!r}).scan().count() == 2")
    assert found["pyarrow"] and not any(found[m] for m in HEAVY), found
    found = imported_after(f"from manifest_table.cli import main; assert main(['count', {table.uri!r}]) == 0")
    assert not any(found[m] for m in HEAVY), found


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
        assert chosen.get_default("run") is None or chosen.get_default("run").__module__ == f"manifest_table.cli.{module}"


def test_the_version_is_the_package_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "manifest_table", "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"manifest-table {mt.__version__}" and mt.__version__ == version("manifest_table")

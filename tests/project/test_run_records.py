"""The run records (tests/run_records.py): a run's line in runs.log, and its failures' reports
in a file of their own, where ``$MT_RUN_RECORDS`` says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = '''
import pytest

def test_passes():
    pass

def test_fails():
    print("what it printed")
    assert 1 == 2

@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")

def test_errors(broken):
    pass
'''


def test_a_run_leaves_its_line_and_its_failures_reports(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    records = tmp_path / "records"
    env = {**os.environ, "MT_RUN_RECORDS": str(records), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.run_records", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = (records / "runs.log").read_text().splitlines()
    (report,) = records.glob("failures-*.txt")
    assert " exit 1 " in line and line.endswith(f": 1 errors in setup, 1 failed, 1 passed -> {report.name}")
    text = report.read_text()
    assert text.startswith(line.split(" -> ")[0]) and "what it printed" in text and "the fixture broke" in text
    assert "test_sample.py::test_fails (call)" in text and "test_sample.py::test_errors (setup)" in text

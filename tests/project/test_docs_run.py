"""Every example in README.md and docs/ runs as written (issue 23, "Docs that cannot drift").

Each page's fenced ``python`` and ``sh`` blocks (``bash`` and ``shell`` count as ``sh``) run
in order, in a fresh temporary directory per page:

- python blocks share one namespace per page, in this process, with that directory as the
  working directory;
- sh blocks run in ``bash -e -o pipefail`` with the venv's ``bin`` first on ``PATH`` (so
  ``manifest-table`` and ``python`` are this checkout's). A block written as a transcript
  (lines starting with ``$ ``) runs its ``$`` lines, and their ``\\`` continuations; the other
  lines are the output shown, not checked;
- a page naming ``s3://`` locations runs against the test S3 server (moto): the ``AWS_*``
  variables point boto3 and pyarrow at it, each bucket the page names is created empty
  before the page runs, and the S3-compatible endpoint the docs show, ``http://localhost:9000``,
  is replaced by the server's;
- a page whose blocks use Spark gets the suite's local SparkSession
  (``SparkSession.builder.getOrCreate()`` in the page returns it).

A block that cannot run here (it installs packages, needs a cloud account, runs for minutes)
is marked on the line just before its fence, with the reason::

    <!-- not-runnable: installs the package; CI's set-up runs the same command -->

A marker with no reason, or not followed by a runnable block, fails the page. A failing block
fails its page with the page, the block's line and the error (python tracebacks show the
page's own line numbers). docs/protocol.md ("Docs that run") describes this for writers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "gc" / "README.md", *(ROOT / "docs").glob("*.md"),
                *(ROOT / "docs" / "design").glob("*.md")])
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>```+)\s*(?P<info>[^`\s]*)[^`]*$")
MARKER = re.compile(r"^\s*<!--\s*not-runnable:(?P<reason>.*?)-->\s*$")
MARKER_START = re.compile(r"<!--\s*not-runnable")
S3_BUCKET = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")
DOCS_S3_ENDPOINT = "http://localhost:9000"
USES_SPARK = re.compile(r"SparkSession|manifest_table\.spark|\bspark\.")
BLOCK_TIMEOUT = 300

pytest_plugins = ["tests.spark.fixtures"]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str  # "python" or "sh"
    code: str
    not_runnable: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"


def shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def blocks_of(page: Path) -> list[Block]:
    """The page's python and sh blocks, in order. Raises ``ValueError`` for a marker without a
    reason or without a runnable block right after it, and for an unclosed fence."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            if MARKER_START.search(lines[i]) and not (i + 1 < len(lines) and _runnable_fence(lines[i + 1])):
                raise ValueError(f"{shown(page)}:{i + 1}: a not-runnable marker must be on the line "
                                 "just before a python or sh fence")
            i += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        if end is None:
            raise ValueError(f"{shown(page)}:{i + 1}: unclosed code fence")
        language = LANGUAGES.get(opening["info"].lower())
        if language is not None:
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
            found.append(Block(page, i + 1, language, "\n".join(body) + "\n", _reason(page, lines, i)))
        i = end + 1
    return found


def _runnable_fence(line: str) -> bool:
    fence = FENCE.match(line)
    return bool(fence) and fence["info"].lower() in LANGUAGES


def _reason(page: Path, lines: list[str], fence: int) -> str | None:
    if fence == 0 or not MARKER_START.search(lines[fence - 1]):
        return None
    marker = MARKER.match(lines[fence - 1])
    if not marker or not marker["reason"].strip():
        raise ValueError(f"{shown(page)}:{fence}: write the marker as <!-- not-runnable: REASON -->")
    return marker["reason"].strip()


def transcript_commands(code: str) -> str:
    """The commands of an sh block: all of it, or, in a transcript, the ``$ `` lines with their
    continuation lines."""
    lines = code.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return code
    commands: list[str] = []
    continued = False
    for line in lines:
        if line.startswith("$ ") or continued:
            commands.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.endswith("\\")
    return "\n".join(commands) + "\n"


def run_python(block: Block, code: str, namespace: dict[str, Any]) -> None:
    """Runs ``code`` compiled under the page's name and line numbers, so a traceback points into
    the page."""
    program = compile("\n" * block.line + code, str(block.page), "exec")
    try:
        exec(program, namespace)
    except Exception as error:
        failure = error
    else:
        return
    shown = traceback.format_exception(type(failure), failure, failure.__traceback__.tb_next)  # from the page on
    pytest.fail(f"{block.where}: python block failed:\n{''.join(shown)}", pytrace=False)


def run_sh(block: Block, code: str, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", transcript_commands(code)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: sh block still running after {BLOCK_TIMEOUT} s", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{block.where}: sh block exited with {done.returncode}\n--- stdout:\n{done.stdout[-3000:]}"
                    f"\n--- stderr:\n{done.stderr[-3000:]}", pytrace=False)


def empty_buckets(names: set[str], endpoint: str) -> None:
    """Each bucket exists and is empty (creating a bucket one owns succeeds in us-east-1)."""
    s3 = boto3.client("s3", endpoint_url=endpoint)
    for name in sorted(names):
        s3.create_bucket(Bucket=name)
        for listing in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in listing.get("Contents", []):
                s3.delete_object(Bucket=name, Key=item["Key"])


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs_as_written(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              request: pytest.FixtureRequest) -> None:
    runnable = [b for b in blocks_of(page) if b.not_runnable is None]
    if not runnable:
        pytest.skip("no runnable python or sh block")
    text = "".join(b.code for b in runnable)
    endpoint = None
    if S3_BUCKET.search(text):
        endpoint = request.getfixturevalue("moto_endpoint")
        empty_buckets(set(S3_BUCKET.findall(text)), endpoint)
    if any(b.language == "python" and USES_SPARK.search(b.code) for b in runnable):
        request.getfixturevalue("spark")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in runnable:
        code = block.code.replace(DOCS_S3_ENDPOINT, endpoint) if endpoint else block.code
        if block.language == "python":
            run_python(block, code, namespace)
        else:
            run_sh(block, code, tmp_path)


def test_markers_are_well_formed_and_reasoned() -> None:
    """Every page parses (closed fences, markers with a reason right before a block), and the
    runner sees blocks: a parser that found nothing would pass every page."""
    assert sum(len(blocks_of(page)) for page in PAGES) > 50


@pytest.mark.parametrize("text, error", [
    ("<!-- not-runnable: -->\n```sh\nfalse\n```\n", "write the marker"),
    ("<!-- not-runnable: why -->\n\n```sh\nfalse\n```\n", "just before"),
    ("<!-- not-runnable: why -->\n```json\n{}\n```\n", "just before"),
    ("```python\nx = 1\n", "unclosed"),
])
def test_a_bad_marker_or_fence_fails_the_page(tmp_path: Path, text: str, error: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(ValueError, match=error):
        blocks_of(page)


def test_blocks_keep_their_line_language_and_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n- item:\n\n  ```bash\n  echo 1\n  ```\n<!-- not-runnable: a cluster -->\n"
                    "```python\nspark.stop()\n```\n```\nplain\n```\n")
    assert [(b.line, b.language, b.code, b.not_runnable) for b in blocks_of(page)] == [
        (5, "sh", "echo 1\n", None), (9, "python", "spark.stop()\n", "a cluster")]


def test_transcript_lines_are_the_commands() -> None:
    code = "$ manifest-table count ./t \\\n    --where \"id > 1\"\n3\n$ echo done\ndone\n"
    assert transcript_commands(code) == "manifest-table count ./t \\\n    --where \"id > 1\"\necho done\n"
    assert transcript_commands("echo a\necho b\n") == "echo a\necho b\n"


def test_ci_runs_the_readme_test_command() -> None:
    """The README's test command, which is marked not-runnable (it is the whole suite), is the
    one CI runs."""
    ci_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_command in (ROOT / "README.md").read_text()
    assert "pytest" in ci_command

"""Start-up: how long ``manifest-table --help``, ``--version``, ``count`` of a local table and
``import manifest_table`` take, as ratios to ``python -c "import deltalake"`` timed in the
same run (issue 30: at most 1.0x, 1.0x, 2.0x and 1.5x). Each pair of processes runs back to
back, in alternating order, and the ratio is taken pair by pair, so that load from elsewhere
on the machine falls on both; the medians are printed.

    python -m tests.benchmarks.startup [--repeat 21] [--peers deltalake]

The package's bytecode is compiled first, as ``pip install`` does (an editable checkout run
with ``PYTHONDONTWRITEBYTECODE`` would compile every module on every start)."""

from __future__ import annotations

import compileall
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

import manifest_table as mt

from ._common import machine, parser, print_table, scratch, seconds

TARGETS = {"--help": 1.0, "--version": 1.0, "count": 2.0, "import": 1.5}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=21, help="pairs of runs per command")
    args = p.parse_args()
    print(f"machine: {machine()}")
    compileall.compile_dir(str(Path(mt.__file__).parent), quiet=1)
    python = sys.executable
    baseline = ["-c", "import deltalake"] if "deltalake" in args.peers and importlib.util.find_spec("deltalake") else []
    name = "import deltalake" if baseline else "python -c pass"
    with scratch(args) as work:
        table = mt.create_table(os.path.join(work, "t"), pa.schema([("id", pa.int64()), ("name", pa.string())]))
        table.append(pa.table({"id": range(1000), "name": [f"n{i}" for i in range(1000)]}))
        table.delete("id < 10")
        command = [python, "-m", "manifest_table"]
        script = Path(python).with_name("manifest-table")
        if script.exists():
            command = [str(script)]
        runs = {
            "--help": [*command, "--help"],
            "--version": [*command, "--version"],
            "count": [*command, "count", table.uri],
            "import": [python, "-c", "import manifest_table"],
            "(import pyarrow)": [python, "-c", "import pyarrow"],
        }
        rows = []
        for label, argv in runs.items():
            ours, theirs, ratios = pairs(argv, [python, *(baseline or ["-c", "pass"])], args.repeat)
            target = TARGETS.get(label)
            verdict = "-" if target is None else ("met" if ratios <= target else "missed")
            rows.append([label, seconds(ours), seconds(theirs), f"{ratios:.2f}x",
                         "-" if target is None else f"<= {target:.1f}x", verdict])
        print_table(f"Start-up: wall time of the whole process, median of {args.repeat} pairs, vs {name}",
                    ["command", "ours", name, "ratio (median of pairs)", "target", ""], rows)


def pairs(ours: list[str], theirs: list[str], repeat: int) -> tuple[float, float, float]:
    """Median wall seconds of each command and median ratio of back-to-back pairs, after one
    warm-up of each (the file cache)."""
    for argv in (ours, theirs):
        run(argv)
    a, b, ratios = [], [], []
    for i in range(repeat):
        first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        x, y = run(first), run(second)
        mine, other = (x, y) if i % 2 == 0 else (y, x)
        a.append(mine)
        b.append(other)
        ratios.append(mine / other)
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def run(argv: list[str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()[-2000:]}")
    return elapsed


if __name__ == "__main__":
    main()

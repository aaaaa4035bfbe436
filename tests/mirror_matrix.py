"""The reader matrix (tests/test_mirror_matrix.py): random histories of the differential test
(tests/differential_history.py) on tables with both mirrors on, over the column types both
mirrors hold, and what every reader must return for each retained version.

A case is a seed: its table (tests/differential_cases.py ``make_case``; a v1 flavour becomes
v2 with tiny limits, since mirrors need format v2; timestamps with a zone are in UTC, the one
zone Iceberg readers accept; no widening, which the Delta mirror refuses), then a history of
``STEPS`` steps (appends, deletes, updates, upserts, overwrites, transactions, races,
compaction, adds, renames, drops, garbage collection). Every reader's rows are compared with
our own ``scan()`` of the same version, canonical (tests/mirror_canonical.py): the
differential test checks ``scan()`` against the model.

A reader's failure is excused only by ``EXCUSES``: a known limitation of that reader, cited
by its upstream issue, matched narrowly (the reader, the kind of read, and the condition
under which the reader is known to fail).

Environment: ``MT_MIRROR_MATRIX_CASES`` (default 2), ``MT_MIRROR_MATRIX_STEPS`` (default 14),
``MT_MIRROR_MATRIX_SPARK`` (versions per case Spark reads, default 2; 0: every one),
``MT_DIFF_SEED`` (the first case's seed, as in tests/test_differential.py)."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

import manifest_table as mt
from manifest_table.mirrors.types import delta_type, iceberg_type
from tests.differential_cases import SEED, make_case
from tests.differential_history import FLAVORS, STEPS, History, run_history
from tests.differential_model import Oracle, State
from tests.differential_types import KINDS, Kind, Shape
from tests.mirror_canonical import of_arrow

CASES = int(os.environ.get("MT_MIRROR_MATRIX_CASES", "2"))
HISTORY = int(os.environ.get("MT_MIRROR_MATRIX_STEPS", "14"))
SPARK_VERSIONS = int(os.environ.get("MT_MIRROR_MATRIX_SPARK", "2"))
MIRRORS = {"iceberg": {}, "delta": {"checkpoint_interval": 4}}
Rows = list[list[str | None]]


def _utc(kind: Kind) -> Kind:
    """``kind`` with UTC as its only zone, and no widening."""
    if kind.label.endswith("+tz"):
        make = kind.make
        kind = replace(kind, make=lambda rng, kinds: _in_utc(make(rng, kinds)))
    return replace(kind, widen=lambda t: [])


def _in_utc(t: pa.DataType) -> pa.DataType:
    return pa.timestamp(t.unit, "UTC") if pa.types.is_timestamp(t) and t.tz else t


def mirrorable(kind: Kind) -> bool:
    sample = kind.make(random.Random(0), KINDS)
    sample = _in_utc(sample)
    return iceberg_type(sample) is not None and delta_type(sample) is not None


SHAPE = Shape([_utc(k) for k in KINDS if mirrorable(k)], collisions=False)


@dataclass
class Case:
    seed: int
    uri: str
    steps: list[str]
    versions: dict[int, Rows]
    """Retained version -> our rows."""
    timestamps: dict[int, str]
    """Retained version -> its commit time, ISO with milliseconds (UTC)."""
    columns: list[str]
    """The latest schema's column names."""
    last_error: str = ""
    """The error of the read being checked (what an excuse matches)."""
    protocols: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Version -> the Delta protocol action in force (filled by the deltalake reads)."""
    error: str | None = None


def build(seed: int, directory: Path) -> Case:
    rng = random.Random(seed)
    case = make_case(seed, rng, SHAPE)
    options = dict(case.options)
    if case.flavor == "v1":
        options.update(FLAVORS["v2-tiny"])
        options.pop("format_version")
    uri = str(directory / f"case{seed}")
    table = mt.create_table(uri, pa.schema([c.field for c in case.columns]), mirrors=MIRRORS, **options)
    oracle = Oracle()
    history = History(uri, table, oracle, [State.empty(case.columns, 2)], SHAPE.kinds)
    error = None
    try:
        # (no repair: it leaves versions that read as corrupt, which the matrix reads)
        run_history(history, rng, HISTORY, [s for s in STEPS if s[0].__name__ not in ("step_upgrade", "step_repair")])
    except Exception as exc:  # the matrix reads what was committed; the differential test owns step failures
        error = f"{type(exc).__name__}: {exc}"
    finally:
        oracle.close()
    assert table.sync_mirrors() == {"iceberg": table.version, "delta": table.version}
    infos = table.history()
    return Case(
        seed,
        uri,
        history.steps,
        {i.version: of_arrow(table.scan(version=i.version).to_arrow()) for i in infos},
        {i.version: i.timestamp.isoformat(timespec="milliseconds") for i in infos},
        table.schema.names,
        error=error,
    )


def build_cases(directory: Path) -> list[Case]:
    return [build(SEED + k, directory) for k in range(CASES)]


def metadata_file(case: Case, version: int) -> str:
    return f"{case.uri}/metadata/v{version}.metadata.json"


# --- what readers found, excused narrowly -------------------------------------------------------
@dataclass(frozen=True)
class Excuse:
    reader: str
    read: str
    """The kind of read (the label's first word after the reader)."""
    applies: Callable[[Case, int, str], bool]
    """(case, version, the label) -> whether the known limitation is what happened."""
    issue: str


def _column_mapping(case: Case, version: int, label: str) -> bool:
    return "columnMapping" in (case.protocols.get(version, {}).get("readerFeatures") or [])


def _date64_as_datetime(case: Case, version: int, label: str) -> bool:
    return "incoming: Datetime('ms') != target: Date" in case.last_error


EXCUSES = [
    Excuse("polars", "scan_delta", _column_mapping, "https://github.com/pola-rs/polars/issues/17244"),
    Excuse("polars", "scan_", _date64_as_datetime,
           "https://github.com/pola-rs/polars/issues/21392 (Polars takes a file's type from its ARROW:schema, "
           "where a date64 column is a date64: it reads a Datetime('ms') and refuses the table's date)"),
    Excuse("duckdb 1.4.4", "iceberg IS NULL", lambda case, version, label: True,
           "https://github.com/duckdb/duckdb-iceberg/issues/782 (files without a column's null count are "
           "pruned: fixed in DuckDB 1.5 by duckdb/duckdb-iceberg#819)"),
]


@dataclass
class Outcome:
    """What one reader returned for every read it made."""

    reader: str
    passed: int = 0
    excused: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def check(self, case: Case, version: int, label: str, got: Any, expected: Any) -> None:
        if got == expected:
            self.passed += 1
            return
        case.last_error = got if isinstance(got, str) else ""
        excuse = next((e for e in EXCUSES if e.reader == self.reader and label.startswith(e.read)
                       and e.applies(case, version, label)), None)
        if excuse is not None:
            self.excused[excuse.issue] = self.excused.get(excuse.issue, 0) + 1
            return
        shown = got if isinstance(got, str) else f"{len(got)} rows, {_first_difference(got, expected)}"
        self.failures.append(f"case {case.seed} version {version}: {self.reader} {label}: {shown}"
                             f"{' (history ended: ' + case.error + ')' if case.error else ''}")

    def summary(self) -> str:
        excused = "; ".join(f"{n} excused by {issue}" for issue, n in self.excused.items())
        return f"{self.reader}: {self.passed} equal, {len(self.failures)} failed" + (f", {excused}" if excused else "")


def _first_difference(got: Rows, expected: Rows) -> str:
    extra = [r for r in got if r not in expected][:2]
    missing = [r for r in expected if r not in got][:2]
    return f"expected {len(expected)}; extra {extra}, missing {missing}"


def null_counts(rows: Rows, columns: list[str]) -> dict[str, int]:
    """How many rows are null in each column (rows canonical: columns in name order)."""
    order = sorted(columns)
    return {name: sum(r[order.index(name)] is None for r in rows) for name in columns}


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

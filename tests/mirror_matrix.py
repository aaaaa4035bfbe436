"""The reader matrix (tests/mirrors/test_mirror_matrix.py): random histories of the differential test
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
``MT_MIRROR_MATRIX_SPARK`` (versions Spark reads in all, default 2; 0: every version of every
case),
``MT_DIFF_SEED`` (the first case's seed, as in tests/reads/test_differential.py)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import fastavro
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
    exact_without_file_cache: set[tuple[str, int, str]] = field(default_factory=set)
    """(reader, version, label) of DuckDB reads that were wrong and are exact when read again
    with DuckDB's external file cache off (filled by the DuckDB test)."""
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


def spark_sample(cases: list[Case], rng: random.Random) -> list[tuple[Case, int]]:
    """The versions Spark reads: ``SPARK_VERSIONS`` in all, the first case's newest and older
    ones drawn from every case (an older version is where time travel by timestamp can
    resolve wrong); every version of every case if it is 0. Spark's cost is mostly its start
    and first reads, so the sample is bounded however many cases run."""
    if SPARK_VERSIONS == 0:
        return [(case, version) for case in cases for version in sorted(case.versions)]
    older = [(case, version) for case in cases for version in sorted(case.versions)[:-1]]
    return [(cases[0], max(cases[0].versions))] + rng.sample(older, min(len(older), SPARK_VERSIONS - 1))


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


def deletion_vectors(metadata: str) -> dict[str, tuple[str, int]]:
    """Data file -> (Puffin file, blob offset) of each deletion vector the current snapshot of
    ``metadata`` (a local metadata file) reads."""
    meta = json.loads(Path(metadata).read_text())
    current = [s for s in meta.get("snapshots", []) if s["snapshot-id"] == meta.get("current-snapshot-id")]
    out = {}
    for listed in _avro(current[0]["manifest-list"]) if current else []:
        if listed["content"] == 1:
            for entry in _avro(listed["manifest_path"]):
                f = entry["data_file"]
                if entry["status"] != 2 and f["file_format"].upper() == "PUFFIN":
                    out[f["referenced_data_file"]] = (f["file_path"], f["content_offset"])
    return out


def _avro(location: str) -> list[dict[str, Any]]:
    with open(location.removeprefix("file://"), "rb") as f:
        return list(fastavro.reader(f))  # type: ignore[arg-type]


def _file_cache_misreads_vector(case: Case, version: int, label: str) -> bool:
    return (("duckdb 1.5.5", version, label) in case.exact_without_file_cache
            and any(offset > len(b"PFA1") for _, offset in deletion_vectors(metadata_file(case, version)).values()))


EXCUSES = [
    Excuse("polars", "scan_delta", _column_mapping, "https://github.com/pola-rs/polars/issues/17244"),
    Excuse("polars", "scan_", _date64_as_datetime,
           "https://github.com/pola-rs/polars/issues/21392 (Polars takes a file's type from its ARROW:schema, "
           "where a date64 column is a date64: it reads a Datetime('ms') and refuses the table's date)"),
    Excuse("duckdb 1.4.4", "iceberg IS NULL", lambda case, version, label: True,
           "https://github.com/duckdb/duckdb-iceberg/issues/782 (files without a column's null count are "
           "pruned: fixed in DuckDB 1.5 by duckdb/duckdb-iceberg#819)"),
    Excuse("duckdb 1.5.5", "iceberg", _file_cache_misreads_vector,
           "https://github.com/duckdb/duckdb-iceberg/pull/1182 (a deletion vector past the first blob of a "
           "Puffin file is parsed from the start of the cached file range holding it, another file's vector; "
           "fixed after 1.5.5. Excused where the read is exact with the external file cache off)"),
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

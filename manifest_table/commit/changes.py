"""What one commit does to the table, independent of which version it lands on.

A commit is staged against a snapshot but may land on a later version (after rebasing,
see conflicts.py). Keeping the change as data (files added, files removed, new deleted
positions per file) rather than as a finished file list is what makes that possible."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyroaring import BitMap

from ..expressions import Expr, Or
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile, DeletionVector
from ..format.properties import Properties
from ..format.replaced import NewRows, ReplacedRows, Replacement


@dataclass(frozen=True)
class SchemaChange:
    """Where a commit moves the table's schema."""

    fields: FieldIds
    last_field_id: int
    steps: tuple[str, ...]
    """Each change, as ``history()`` shows it (``parameters["schema_changes"]``)."""


@dataclass(frozen=True)
class RewriteSource:
    """One input of a compaction rewrite, with the deletes it had when it was read."""

    path: str
    rows: int
    deletes: DeletionVector | None

    @property
    def live_rows(self) -> int:
        return self.rows - (self.deletes.cardinality if self.deletes else 0)


@dataclass(frozen=True)
class RewriteOutput:
    """One file a compaction rewrite wrote, holding the next ``rows`` rows of the rewrite."""

    path: str
    rows: int


@dataclass(frozen=True)
class Rewrite:
    """A compaction rewrite: its sources' live rows concatenated in order, then cut, in that
    order, into ``outputs`` (none when no source row was live; several when the rows exceed
    the target size, or a writer splits them). That order is what lets a concurrent delete's
    positions be remapped arithmetically (``conflicts.remap``). A clustering rewrite first
    orders the concatenated rows along the curve over the columns ``order`` (field ids):
    a pure function of their values, which a remap recomputes (data/placement.py)."""

    outputs: tuple[RewriteOutput, ...]
    sources: tuple[RewriteSource, ...]
    order: tuple[int, ...] = ()
    curve: str = ""
    """The name of the order (``CURVE`` for this release's, data/curve.py); a remap onto an
    order this release does not know is a conflict."""


CURVE = "hilbert"


@dataclass(frozen=True)
class StagedReplacement:
    """Rows an update or upsert replaced, and the files holding their new versions: the new
    rows, in order (the first ``rows`` of each output), replace the sources' positions in
    order, each file's ascending. The builder records it as ``parameters.replaced``
    (format/replaced.py), from which the change feed pairs old and new rows."""

    sources: tuple[tuple[str, BitMap], ...]
    outputs: tuple[tuple[str, int], ...]


@dataclass
class Changes:
    operation: str
    added: list[DataFile] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)
    """Paths of snapshot files this commit drops whole (overwrite, compaction sources)."""
    deletes: dict[str, BitMap] = field(default_factory=dict)
    """Newly deleted row positions, per data file (snapshot files or files added here)."""
    read_files: set[str] = field(default_factory=set)
    """Snapshot files whose rows this commit read to decide what to change."""
    kept_rows: dict[str, BitMap] = field(default_factory=dict)
    """Rows read that decided this commit without being deleted by it (an upsert's matched
    rows under ``when_matched="ignore"``: their existence kept a source row out), per file."""
    serializable: bool = False
    """True when any change by another commit to what we read must fail us (overwrite)."""
    predicate: Expr | None = None
    """For serializable commits: rows matching it were read; new files that may hold such
    rows are a conflict. None with serializable=True means every row was read. Bound to the
    table schema, so that its literals compare with file stats as the columns' types."""
    rewrites: list[Rewrite] = field(default_factory=list)
    replaced: list[StagedReplacement] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    app_transaction: tuple[str, int] | None = None
    """(application id, its monotonically increasing batch id): commit each batch once."""
    upgrade: Properties | None = None
    """Set by ``Table.upgrade()``: move a v1 table to format v2 with these properties."""
    schema: SchemaChange | None = None
    """A schema change (operations/schema_change.py), applied before the files this commit adds."""
    mirrors: dict[str, dict[str, Any]] | None = None
    """Set by ``Table.set_mirrors``: the mirrors to keep on, with the options of any newly
    enabled one (format/mirrors.py). None leaves the setting as it is."""
    properties: dict[str, Any] | None = None
    """Set by ``Table.set_properties``: property name -> value (None: back to the default),
    applied to the properties of the version the commit lands on (format/properties.py)."""
    dropped_segments: set[str] = field(default_factory=set)
    """Set by ``Table.repair``: segments that are gone, dropped with every entry they held."""

    def is_empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or any(self.deletes.values())
            or self.app_transaction
            or self.upgrade
            or self.schema
            or self.mirrors is not None
            or bool(self.properties)
            or bool(self.dropped_segments)
        )

    def delete_rows(self, path: str, positions: BitMap) -> None:
        if positions:
            self.deletes.setdefault(path, BitMap()).update(positions)

    def serialize_against(self, predicate: Expr | None) -> None:
        """Record that rows matching ``predicate`` (bound; None: every row) were read to
        decide this commit: a concurrent commit adding rows that may match, or deleting rows
        this one read, makes it fail (overwrite with a condition, update, upsert)."""
        if predicate is None:
            self.predicate = None
        elif not (self.serializable and self.predicate is None):
            self.predicate = predicate if self.predicate is None else Or(self.predicate, predicate)
        self.serializable = True

    def replaced_positions(self) -> dict[str, BitMap]:
        """The replaced positions ``parameters.replaced`` must carry, keyed ``"<i>/<j>"``
        (replacement i, source j): those of a file that another operation of this commit also
        deleted from. The others are all the positions the commit deletes in their file."""
        sources = [path for r in self.replaced for path, _ in r.sources]
        return {
            f"{i}/{j}": positions
            for i, r in enumerate(self.replaced)
            for j, (path, positions) in enumerate(r.sources)
            if sources.count(path) > 1 or positions != self.deletes.get(path)
        }

    def added_paths(self) -> set[str]:
        return {f.path for f in self.added}

    def copy(self) -> Changes:
        """An independent copy (bitmaps, lists and dicts too): what a transaction restores
        when an operation fails halfway."""
        return replace(
            self,
            added=list(self.added),
            removed=set(self.removed),
            dropped_segments=set(self.dropped_segments),
            deletes={path: BitMap(bitmap) for path, bitmap in self.deletes.items()},
            read_files=set(self.read_files),
            rewrites=list(self.rewrites),
            replaced=list(self.replaced),
            kept_rows={path: BitMap(bitmap) for path, bitmap in self.kept_rows.items()},
            parameters=copy.deepcopy(self.parameters),
            metrics=copy.deepcopy(self.metrics),
        )


def replacements_of(changes: Changes, positions: Mapping[str, DeletionVector]) -> list[Replacement]:
    """``changes.replaced`` as recorded, with ``positions``: where the tombstone object of the
    commit holds ``replaced_positions``."""
    return [
        Replacement(
            tuple(ReplacedRows(path, len(bm), positions.get(f"{i}/{j}")) for j, (path, bm) in enumerate(r.sources)),
            tuple(NewRows(path, rows) for path, rows in r.outputs),
        )
        for i, r in enumerate(changes.replaced)
    ]


def rewrites_to_json(rewrites: list[Rewrite]) -> list[dict[str, Any]]:
    """The ``parameters.rewrites`` record (docs/format.md). A rewrite with at most one output
    keeps the shape of 0.1.0 and 0.2.0 (``output``: a path or null), which those releases
    read and rebase onto; several outputs take ``outputs``, which they refuse as corrupt
    rather than remap a delete wrongly."""
    return [
        {
            **(
                {"output": rw.outputs[0].path if rw.outputs else None}
                if len(rw.outputs) <= 1 and not rw.order
                else {"outputs": [{"path": out.path, "rows": out.rows} for out in rw.outputs]}
            ),
            "sources": [
                {"path": s.path, "rows": s.rows, "deletes": vars(s.deletes) if s.deletes else None} for s in rw.sources
            ],
            **({"order": {"curve": rw.curve or CURVE, "field_ids": list(rw.order)}} if rw.order else {}),
        }
        for rw in rewrites
    ]


def rewrites_from_json(doc: list[dict[str, Any]]) -> list[Rewrite]:
    """Decode ``parameters.rewrites`` (validated by ``Manifest.from_json``), either shape."""
    rewrites = []
    for rw in doc:
        sources = tuple(
            RewriteSource(s["path"], s["rows"], DeletionVector(**s["deletes"]) if s["deletes"] else None)
            for s in rw["sources"]
        )
        if "outputs" in rw:
            outputs = tuple(RewriteOutput(out["path"], out["rows"]) for out in rw["outputs"])
        elif rw["output"] is not None:  # one output holding every live row of the sources
            outputs = (RewriteOutput(rw["output"], sum(s.live_rows for s in sources)),)
        else:
            outputs = ()
        order = rw.get("order")
        rewrites.append(Rewrite(outputs, sources, *((tuple(order["field_ids"]), order["curve"]) if order else ())))
    return rewrites

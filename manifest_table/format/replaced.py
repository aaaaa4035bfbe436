"""A commit's record of the rows it replaced with new versions (``parameters.replaced``,
docs/format.md "Replaced rows"): an update or upsert deletes rows and appends their new
versions in the same commit, and this record says which new row replaces which old one, so
the change feed (docs/changes.md) pairs them as ``update_preimage`` / ``update_postimage``
without a key. Written since 0.4.0; a commit without it reads as deletes and inserts.

The new rows of a replacement, concatenated in order (each output contributes its first
``rows`` rows), are the new versions of its sources' rows concatenated in order: each
source's rows in ascending position, either ``positions`` (a bitmap of the commit's
tombstone object) or, when absent, every position the commit newly deleted in that file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .entries import ROW_POSITIONS, DeletionVector
from .json_fields import MISSING, corrupt, integer, of_type
from .keys import DATA_PREFIX, stored_key


@dataclass(frozen=True)
class ReplacedRows:
    """Rows of one data file that a replacement deleted, in ascending position."""

    path: str
    rows: int
    positions: DeletionVector | None = None
    """Where the positions are; None: every position the commit newly deleted in ``path``."""


@dataclass(frozen=True)
class NewRows:
    """The first ``rows`` rows of a data file the commit added."""

    path: str
    rows: int


@dataclass(frozen=True)
class Replacement:
    sources: tuple[ReplacedRows, ...]
    outputs: tuple[NewRows, ...]


def replacements_to_json(replacements: list[Replacement]) -> list[dict[str, Any]]:
    return [
        {
            "sources": [
                {"path": s.path, "rows": s.rows, **({"positions": vars(s.positions)} if s.positions else {})}
                for s in r.sources
            ],
            "outputs": [{"path": o.path, "rows": o.rows} for o in r.outputs],
        }
        for r in replacements
    ]


def replacements_from_json(doc: list[dict[str, Any]]) -> list[Replacement]:
    """Decode ``parameters.replaced`` (validated by ``check_replaced`` when the manifest was read)."""
    return [
        Replacement(
            tuple(
                ReplacedRows(s["path"], s["rows"], DeletionVector(**s["positions"]) if s.get("positions") else None)
                for s in r["sources"]
            ),
            tuple(NewRows(o["path"], o["rows"]) for o in r["outputs"]),
        )
        for r in doc
    ]


def check_replaced(replaced: Any, key: str, decode_deletes: Callable[[Any, int, str], DeletionVector]) -> None:
    """``parameters.replaced`` of manifest ``key``: keys under ``data/``, row counts in range,
    positions (``decode_deletes(raw, rows, at)``, manifest.py's checked decoder) holding
    exactly ``rows`` positions, and as many new rows as replaced ones."""
    if type(replaced) is not list:
        raise corrupt(key, "parameters.replaced", replaced, "a JSON array")
    for i, replacement in enumerate(replaced):
        at = f"parameters.replaced[{i}]"
        if type(replacement) is not dict:
            raise corrupt(key, at, replacement, "a JSON object")
        counts = {}
        for part in ("sources", "outputs"):
            counts[part] = 0
            for j, entry in enumerate(of_type(replacement, part, key, list, at)):
                where = f"{at}.{part}[{j}]"
                if type(entry) is not dict:
                    raise corrupt(key, where, entry, "a JSON object")
                stored_key(entry.get("path", MISSING), DATA_PREFIX, key, f"{where}.path")
                rows = integer(entry, "rows", key, 1, ROW_POSITIONS, where)
                positions = entry.get("positions")
                if part == "sources" and positions is not None:
                    if decode_deletes(positions, rows, f"{where}.positions").cardinality != rows:
                        raise corrupt(key, f"{where}.positions.cardinality", positions.get("cardinality"), str(rows))
                counts[part] += rows
        if counts["sources"] != counts["outputs"]:
            raise corrupt(
                key, f"{at}.outputs", replacement["outputs"], f"new rows adding up to the {counts['sources']} replaced"
            )

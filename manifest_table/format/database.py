"""A database's objects (docs/design/003-databases.md): the write-once version document that
is each commit's point, the names of its tables, and its tables' roots.

- ``manifest/v<20 digits>.json`` (a ``DatabaseVersion``): ``"kind": "database"``, the commit
  fields of a table manifest, ``tables`` (name -> table id and the key of its root), and
  what the commit did: ``changed`` (table id -> operation, metrics, parameters), ``created``,
  ``dropped``, ``renamed``; and the database's ``properties`` (format version 2, once any is
  set: properties.py).
- ``tables/<id>/roots/<32 hex>.json``: a table's state, a format-v2 manifest without its
  commit fields (version, timestamp, commit id, operation, metrics, parameters). The table's
  manifest at database version v is its root plus version v's commit fields, so a root
  written for one attempt stays valid when the commit lands at a later version.
Decoding validates every field, and every key goes through the one key check (keys.py)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from ..errors import CorruptTableError, DatabaseNotFoundError, InvalidArgumentError
from .json_fields import (
    MAX_INT64,
    MISSING,
    corrupt,
    format_version,
    integer,
    load_object,
    of_type,
    parent_version,
    show,
)
from .keys import ROOT_PREFIX, TABLES_PREFIX, WRITER_SHAPES
from .manifest import MAX_TIMESTAMP_MS, Manifest, check_parameters
from .properties import DATABASE, GC_GRACE, Properties

DATABASE_FORMAT_VERSION = 2
"""The newest database format this library reads and writes: 2 adds ``properties``, which
release 0.3.0 does not know (format/properties.py); a database without any stays at 1."""
KIND = "database"
COMMIT_FIELDS = ("version", "parent_version", "timestamp_ms", "commit_id", "operation", "parameters", "metrics")
"""The fields of a table manifest that a database's table root leaves to the database version."""
MAX_NAME_BYTES = 255
_NAME_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f/\\\ud800-\udfff]")
_TABLE_ID = re.compile(r"[0-9a-f]{32}")


def check_table_name(name: object) -> str:
    """A table name a caller passed: ``InvalidArgumentError`` unless it is a non-empty string
    without ``/``, backslashes or control characters, not ``.`` or ``..``, at most
    ``MAX_NAME_BYTES`` bytes of UTF-8. Names never become keys (tables live under their id);
    the rules keep ``<database uri>/<name>`` unambiguous."""
    if type(name) is not str:
        raise InvalidArgumentError(f"a table name must be a string, not {type(name).__name__}")
    bad = _NAME_FORBIDDEN.search(name)
    problem = (
        "is empty"
        if not name
        else "is '.' or '..'"
        if name in (".", "..")
        else f"holds {bad.group()!r} ('/', backslashes and control characters are not allowed)"
        if bad
        else f"is longer than {MAX_NAME_BYTES} bytes"
        if len(name.encode()) > MAX_NAME_BYTES
        else None
    )
    if problem is not None:
        raise InvalidArgumentError(f"table name {show(name)} {problem}")
    return name


def new_table_id() -> str:
    return uuid.uuid4().hex


def table_prefix(table_id: str) -> str:
    """Where a table's objects live under the database's location."""
    return f"{TABLES_PREFIX}{table_id}/"


def new_root_key(table_id: str) -> str:
    """A fresh root key of table ``table_id``, relative to the database's location."""
    return f"{table_prefix(table_id)}{ROOT_PREFIX}{uuid.uuid4().hex}.json"


@dataclass(frozen=True)
class TableRef:
    id: str
    root: str
    """The key of the table's root, relative to the database's location."""


@dataclass(frozen=True)
class TableChange:
    """What one commit did to one table, as the table's ``history()`` shows it."""

    operation: str
    metrics: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DatabaseVersion:
    version: int
    parent_version: int | None
    timestamp_ms: int
    commit_id: str
    operation: str
    tables: Mapping[str, TableRef]
    changed: Mapping[str, TableChange] = field(default_factory=dict)
    """Table id -> what this commit did to it (created tables included)."""
    created: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    renamed: Mapping[str, str] = field(default_factory=dict)
    """Old name -> new name."""
    properties: Properties = field(default_factory=Properties)
    format_version: int = 1

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)

    @property
    def gc_grace(self) -> float:
        """Seconds GC leaves an unreferenced object of the database (property ``gc_grace``)."""
        return self.properties[GC_GRACE].total_seconds()

    @cached_property
    def names(self) -> dict[str, str]:
        """Table id -> its name at this version."""
        return {ref.id: name for name, ref in self.tables.items()}

    def to_json(self) -> bytes:
        doc = {
            "kind": KIND,
            "format_version": self.format_version,
            "version": self.version,
            "parent_version": self.parent_version,
            "timestamp_ms": self.timestamp_ms,
            "commit_id": self.commit_id,
            "operation": self.operation,
            "tables": {name: {"id": ref.id, "root": ref.root} for name, ref in self.tables.items()},
            "changed": {tid: vars(change) for tid, change in self.changed.items()},
            "created": list(self.created),
            "dropped": list(self.dropped),
            "renamed": dict(self.renamed),
        }
        if self.properties.values or self.properties.unknown:
            doc["format_version"] = max(self.format_version, 2)
            doc["properties"] = self.properties.to_json()
        return json.dumps(doc, separators=(",", ":"), default=str).encode()

    @classmethod
    def from_json(cls, data: bytes, key: str) -> DatabaseVersion:
        doc = load_object(data, key)
        if doc.get("kind") != KIND:
            if "schema" in doc:
                raise DatabaseNotFoundError(
                    f"{key} is a table's manifest, not a database version: open it with open_table"
                )
            raise corrupt(key, "kind", doc.get("kind", MISSING), repr(KIND))
        fmt = format_version(doc, key, DATABASE_FORMAT_VERSION)
        version = integer(doc, "version", key, 0, MAX_INT64)
        parent = parent_version(doc, key, version)
        tables = {
            name: _table_ref(raw, key, f"tables[{name!r}]", name)
            for name, raw in of_type(doc, "tables", key, dict).items()
        }
        if len({ref.id for ref in tables.values()}) != len(tables):
            raise corrupt(key, "tables", sorted(r.id for r in tables.values()), "one name per table id")
        return cls(
            version=version,
            parent_version=parent,
            timestamp_ms=integer(doc, "timestamp_ms", key, 0, MAX_TIMESTAMP_MS),
            commit_id=of_type(doc, "commit_id", key, str),
            operation=of_type(doc, "operation", key, str),
            tables=tables,
            changed=_changes(of_type(doc, "changed", key, dict), key),
            created=_names(doc, "created", key),
            dropped=_names(doc, "dropped", key),
            renamed=_renames(of_type(doc, "renamed", key, dict), key),
            properties=Properties.from_json(doc["properties"], key, frozenset({DATABASE}))
            if "properties" in doc
            else Properties(),
            format_version=fmt,
        )


def _table_ref(raw: Any, key: str, at: str, name: str) -> TableRef:
    try:
        check_table_name(name)
    except InvalidArgumentError as exc:
        raise CorruptTableError(f"{key}: field tables: {exc}") from None
    if type(raw) is not dict:
        raise corrupt(key, at, raw, "a JSON object")
    table_id = of_type(raw, "id", key, str, at)
    if not _TABLE_ID.fullmatch(table_id):
        raise corrupt(key, f"{at}.id", table_id, "32 lowercase hex digits")
    root = of_type(raw, "root", key, str, at)
    prefix = table_prefix(table_id)
    if not (root.startswith(prefix) and WRITER_SHAPES[ROOT_PREFIX].fullmatch(root[len(prefix) :])):
        raise corrupt(key, f"{at}.root", root, f"a key {prefix}{ROOT_PREFIX}<32 hex digits>.json")
    return TableRef(table_id, root)


def _changes(raw: dict[str, Any], key: str) -> dict[str, TableChange]:
    out = {}
    for table_id, change in raw.items():
        at = f"changed[{table_id!r}]"
        if not _TABLE_ID.fullmatch(table_id) or type(change) is not dict:
            raise corrupt(key, at, change, "a table id mapped to a JSON object")
        out[table_id] = TableChange(
            of_type(change, "operation", key, str, at),
            of_type(change, "metrics", key, dict, at),
            check_parameters(of_type(change, "parameters", key, dict, at), key),
        )
    return out


def _names(doc: dict[str, Any], name: str, key: str) -> tuple[str, ...]:
    names = of_type(doc, name, key, list)
    if not all(type(n) is str for n in names):
        raise corrupt(key, name, names, "an array of table names")
    return tuple(names)


def _renames(raw: dict[str, Any], key: str) -> dict[str, str]:
    if not all(type(v) is str for v in raw.values()):
        raise corrupt(key, "renamed", raw, "old table names mapped to new ones")
    return raw


def encode_root(state: Manifest) -> bytes:
    """A table's root: its manifest without the commit fields."""
    doc = json.loads(state.to_json())
    for name in COMMIT_FIELDS:
        del doc[name]
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_root(data: bytes, key: str) -> Manifest:
    """A table's state from its root, as a version-0 manifest whose commit fields
    ``at_version`` fills in. Every field is validated as a manifest's is."""
    doc = load_object(data, key)
    present = [name for name in COMMIT_FIELDS if name in doc]
    if present or doc.get("format_version") == 1:
        raise corrupt(
            key,
            present[0] if present else "format_version",
            doc.get(present[0]) if present else 1,
            "a format-v2 table root without commit fields",
        )
    doc.update(version=0, parent_version=None, timestamp_ms=0, commit_id="", operation="")
    return Manifest.from_doc(doc, key)


def at_version(state: Manifest, db: DatabaseVersion, table_id: str) -> Manifest:
    """The table of ``state`` as its manifest at database version ``db``: the database
    version's commit fields, and what it did to this table (nothing: empty metrics)."""
    change = db.changed.get(table_id) or TableChange(db.operation)
    return Manifest(
        **{
            **{f.name: getattr(state, f.name) for f in fields(Manifest)},
            "version": db.version,
            "parent_version": db.parent_version,
            "timestamp_ms": db.timestamp_ms,
            "commit_id": db.commit_id,
            "operation": change.operation,
            "metrics": change.metrics,
            "parameters": change.parameters,
        }
    )

"""A second reader of manifest_table tables and databases, written from docs/format.md alone.

It imports pyarrow, pyroaring and the standard library only (tests/conformance/test_reader.py
checks that by AST), never manifest_table: if the format can be read by following the spec,
this module does it, and wherever it needed something the spec did not say, the spec was
corrected (the report of issue 35 lists each correction).

    read(root, version=None, table=None) -> pyarrow.Table   # the live rows of one version
    latest(root) -> int                                     # the version the pointer names
    tables(root, version) -> list[str]                      # a database's table names

``root`` is a local directory holding the objects. Every check the spec lists for readers
("Reader requirements") raises ``Corrupt`` naming the object and what is wrong."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

TABLE_FORMATS = (1, 2, 3)
DATABASE_FORMATS = (1, 2)
POINTER_FORMATS = (1,)
FIELD_ID = b"PARQUET:field_id"
MAGIC = b"MTTOMB01"
ROWS_LIMIT = 2**32
_BAD_SEGMENT = re.compile(r"(^|/)\.{1,2}(/|$)|//|[\\:\x00-\x1f\x7f-\x9f]")


class Corrupt(Exception):
    """An object breaks the format: the table cannot be read as written."""


@dataclass(frozen=True)
class Vector:
    """A file's deletion vector: where its bitmap lies in a tombstone object."""

    path: str
    offset: int
    length: int
    cardinality: int


@dataclass(frozen=True)
class Entry:
    """One data file of a version."""

    path: str
    rows: int
    size: int
    deletes: Vector | None


@dataclass(frozen=True)
class State:
    """What a version holds: its schema, how files map onto it, and its files in order."""

    schema: pa.Schema
    ids: tuple[int, ...] | None
    """Each column's field id (None: format 1, whose files are read by column name)."""
    name_mapping: dict[str, int] | None
    entries: tuple[Entry, ...]


# --- objects --------------------------------------------------------------------------------
def _get(root: Path, key: str) -> bytes:
    try:
        return (root / key).read_bytes()
    except FileNotFoundError:
        raise Corrupt(f"{key} is missing") from None


def _json(root: Path, key: str) -> dict[str, Any]:
    try:
        doc = json.loads(_get(root, key))
    except ValueError as exc:
        raise Corrupt(f"{key} is not JSON: {exc}") from None
    if type(doc) is not dict:
        raise Corrupt(f"{key} is not a JSON object")
    return doc


def _int(doc: dict[str, Any], name: str, where: str, lo: int = 0, hi: int = 2**63) -> int:
    value = doc.get(name)
    if type(value) is not int or not lo <= value < hi:  # (a JSON true is no integer)
        raise Corrupt(f"{where}: {name} is {value!r}, not an integer in [{lo}, {hi})")
    return value


def _of(doc: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = doc.get(name)
    if type(value) is not kind:
        raise Corrupt(f"{where}: {name} is {value!r}, not a JSON {kind.__name__}")
    return value


def _key(value: Any, prefix: str, where: str) -> str:
    """A key a stored object names: canonical, under ``prefix``, never leaving the root."""
    if (
        type(value) is not str
        or not value.startswith(prefix)
        or value.endswith("/")
        or _BAD_SEGMENT.search(value)
        or len(value.encode("utf-8", "surrogatepass")) > 1024
        or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    ):
        raise Corrupt(f"{where}: {value!r} is not a key under {prefix}")
    return value


def _format(doc: dict[str, Any], where: str, known: tuple[int, ...]) -> int:
    found = _int(doc, "format_version", where, 1)
    if found not in known:
        raise Corrupt(f"{where} has format version {found}; this reader reads {known}")
    return found


# --- versions -------------------------------------------------------------------------------
def latest(root: str | Path) -> int:
    """The version ``_latest_manifest`` names (it may lag the newest manifest: a hint)."""
    doc = _json(Path(root), "_latest_manifest")
    _format(doc, "_latest_manifest", POINTER_FORMATS)
    return _int(doc, "version", "_latest_manifest")


def _version(root: Path, version: int) -> dict[str, Any]:
    """The version document ``manifest/v<N>.json`` (a table's manifest or a database's version)."""
    key = f"manifest/v{version:020d}.json"
    doc = _json(root, key)
    known = DATABASE_FORMATS if doc.get("kind") == "database" else TABLE_FORMATS
    _format(doc, key, known)
    if _int(doc, "version", key) != version:
        raise Corrupt(f"{key}: version is {doc['version']}, not the {version} of its name")
    if doc.get("parent_version", "missing") != (version - 1 if version else None):
        raise Corrupt(f"{key}: parent_version is {doc.get('parent_version')!r}")
    _int(doc, "timestamp_ms", key, 0, 253402300800000)
    _of(doc, "commit_id", str, key)
    _of(doc, "operation", str, key)
    return doc


def tables(root: str | Path, version: int | None = None) -> list[str]:
    root = Path(root)
    doc = _version(root, latest(root) if version is None else version)
    if doc.get("kind") != "database":
        raise Corrupt("not a database: its version has no 'kind': 'database'")
    return sorted(_of(doc, "tables", dict, "database version"))


def read(root: str | Path, version: int | None = None, table: str | None = None) -> pa.Table:
    """The live rows of ``version`` (default: the pointer's) of the table at ``root``, or of
    table ``table`` of the database at ``root``."""
    root = Path(root)
    version = latest(root) if version is None else version
    doc = _version(root, version)
    where = f"manifest/v{version:020d}.json"
    if doc.get("kind") == "database":
        if table is None:
            raise ValueError("a database: name the table to read")
        root, doc, where = _table_root(root, doc, table, where)
    elif table is not None:
        raise ValueError(f"{root} is a table, not a database")
    state = _state(root, doc, where)
    return _rows(root, state)


def _table_root(root: Path, db: dict[str, Any], name: str, where: str) -> tuple[Path, dict[str, Any], str]:
    """A database's table: its folder (its keys are relative to it) and its root document."""
    refs = _of(db, "tables", dict, where)
    if name not in refs:
        raise KeyError(f"no table {name!r} at this database version")
    table_id = _of(_of(refs, name, dict, f"{where}: tables"), "id", str, where)
    if not re.fullmatch(r"[0-9a-f]{32}", table_id):
        raise Corrupt(f"{where}: table id {table_id!r}")
    folder = f"tables/{table_id}/"
    key = _key(refs[name].get("root"), f"{folder}roots/", f"{where}: tables[{name!r}].root")
    doc = _json(root, key)
    if doc.get("kind") is not None or "version" in doc or "commit_id" in doc:
        raise Corrupt(f"{key} is not a table root (it holds commit fields)")
    _format(doc, key, TABLE_FORMATS[1:])
    return root / folder, doc, key


# --- a table's state --------------------------------------------------------------------------
def _state(root: Path, doc: dict[str, Any], where: str) -> State:
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(_of(doc, "schema", str, where))))
    except (ValueError, pa.ArrowException) as exc:
        raise Corrupt(f"{where}: the schema does not decode: {exc}") from None
    if doc["format_version"] == 1:
        entries = tuple(_entry(e, f"{where}: files[{i}]") for i, e in enumerate(_of(doc, "files", list, where)))
        _listed_once([e.path for e in entries], where)
        return State(schema, None, None, entries)
    ids, fields = [], []
    for f in schema:
        metadata = dict(f.metadata or {})
        raw = metadata.pop(FIELD_ID, b"")
        if not raw.isdigit() or not 0 < int(raw) < 2**31:
            raise Corrupt(f"{where}: column {f.name!r} has no field id")
        ids.append(int(raw))
        fields.append(f.with_metadata(metadata or None))
    if len(set(ids)) != len(ids):
        raise Corrupt(f"{where}: field ids {ids} are not distinct")
    _int(doc, "last_field_id", where, max(ids, default=0))
    mapping = doc.get("name_mapping")
    if mapping is not None and (type(mapping) is not dict or len(set(mapping.values())) != len(mapping)):
        raise Corrupt(f"{where}: name_mapping is not one name per field id")
    overrides = {
        _key(path, "data/", f"{where}: deletes"): _vector(ref, f"{where}: deletes[{path!r}]")
        for path, ref in _of(doc, "deletes", dict, where).items()
    }
    entries: list[Entry] = []
    for i, summary in enumerate(_of(doc, "segments", list, where)):
        path = summary.get("path") if type(summary) is dict else None
        entries += _segment(root, _key(path, "segments/", f"{where}: segments[{i}]"), overrides)
    entries += [_entry(e, f"{where}: tail[{i}]") for i, e in enumerate(_of(doc, "tail", list, where))]
    for e in entries:  # an override names a file of a segment; its cardinality is checked here
        if e.deletes is not None and e.deletes.cardinality > e.rows:
            raise Corrupt(f"{where}: {e.path} has {e.deletes.cardinality} deleted rows of {e.rows}")
    _listed_once([e.path for e in entries], where)
    totals = _of(doc, "totals", dict, where)
    sums = {"files": len(entries), "rows": sum(e.rows for e in entries), "bytes": sum(e.size for e in entries)}
    for name, value in sums.items():
        if _int(totals, name, f"{where}: totals") != value:
            raise Corrupt(f"{where}: totals.{name} is {totals[name]}, its files sum to {value}")
    return State(pa.schema(fields, metadata=schema.metadata), tuple(ids), mapping, tuple(entries))


def _entry(doc: Any, where: str) -> Entry:
    if type(doc) is not dict:
        raise Corrupt(f"{where} is not a JSON object")
    rows = _int(doc, "rows", where, 0, ROWS_LIMIT)
    deletes = None if doc.get("deletes") is None else _vector(doc["deletes"], f"{where}.deletes")
    if deletes is not None and deletes.cardinality > rows:
        raise Corrupt(f"{where}: {deletes.cardinality} deleted rows of {rows}")
    return Entry(_key(doc.get("path"), "data/", f"{where}.path"), rows, _int(doc, "size", where), deletes)


def _vector(doc: Any, where: str) -> Vector:
    if type(doc) is not dict:
        raise Corrupt(f"{where} is not a JSON object")
    return Vector(
        _key(doc.get("path"), "tombstones/", f"{where}.path"),
        _int(doc, "offset", where, len(MAGIC)),
        _int(doc, "length", where),
        _int(doc, "cardinality", where, 1),
    )


def _segment(root: Path, key: str, overrides: dict[str, Vector]) -> list[Entry]:
    """A segment's entries, in order, each with the root's override of its vector if any."""
    try:
        table = pq.read_table(pa.BufferReader(_get(root, key)), columns=_SEGMENT_COLUMNS)
    except (pa.ArrowException, OSError) as exc:
        raise Corrupt(f"{key} is not a readable segment: {exc}") from None
    entries = []
    for i, row in enumerate(table.to_pylist()):
        where = f"{key}: entry {i}"
        if None in (row["path"], row["rows"], row["size"]) or not 0 <= row["rows"] < ROWS_LIMIT:
            raise Corrupt(f"{where}: path, rows and size must be set")
        dv = [row[c] for c in _SEGMENT_COLUMNS[3:]]
        if any(v is None for v in dv) and any(v is not None for v in dv):
            raise Corrupt(f"{where}: the dv_ columns are neither all set nor all null")
        path = _key(row["path"], "data/", f"{where}.path")
        stored = None if dv[0] is None else _vector(dict(zip(("path", "offset", "length", "cardinality"), dv)), where)
        entries.append(Entry(path, row["rows"], row["size"], overrides.get(path, stored)))
    return entries


_SEGMENT_COLUMNS = ["path", "rows", "size", "dv_path", "dv_offset", "dv_length", "dv_cardinality"]


def _listed_once(paths: list[str], where: str) -> None:
    if len(set(paths)) != len(paths):
        twice = sorted({p for p in paths if paths.count(p) > 1})
        raise Corrupt(f"{where} lists {twice[0]} more than once")


# --- rows ---------------------------------------------------------------------------------------
def _rows(root: Path, state: State) -> pa.Table:
    """The live rows of every file, in table order, as the version's schema."""
    pieces = [_file_rows(root, state, e) for e in state.entries]
    return pa.concat_tables(pieces) if pieces else state.schema.empty_table()


def _file_rows(root: Path, state: State, entry: Entry) -> pa.Table:
    data = _get(root, entry.path)
    if len(data) != entry.size:
        raise Corrupt(f"{entry.path} has {len(data)} bytes; its entry says {entry.size}")
    try:
        read = pq.ParquetFile(pa.BufferReader(data)).read()  # every column: see _sources
    except (pa.ArrowException, OSError) as exc:
        raise Corrupt(f"{entry.path} is not readable Parquet: {exc}") from None
    if read.num_rows != entry.rows:
        raise Corrupt(f"{entry.path} holds {read.num_rows} rows; its entry says {entry.rows}")
    sources = _sources(state, read.schema)
    columns = []
    for i, f in enumerate(state.schema):
        if i not in sources:  # added after the file was written
            columns.append(pa.nulls(read.num_rows, f.type))
            continue
        column = read.column(sources[i])
        columns.append(column.cast(f.type) if column.type != f.type else column)  # widened, Parquet's forms
    table = pa.Table.from_arrays(columns, schema=state.schema)
    deleted = _deleted(root, entry)
    if not deleted:
        return table
    return table.filter(pa.array([p not in deleted for p in range(entry.rows)]))


def _sources(state: State, file_schema: pa.Schema) -> dict[int, int]:
    """The version's column i -> the index of the file's top-level column holding it, found by
    position never by dotted path (a column 'a.b' and the field b of a struct 'a' share one)."""
    if state.ids is None:  # format 1: by name
        names = {f.name: i for i, f in enumerate(state.schema)}
        return {names[f.name]: j for j, f in enumerate(file_schema) if f.name in names}
    position = {fid: i for i, fid in enumerate(state.ids)}
    raw = [(f.metadata or {}).get(FIELD_ID) for f in file_schema]
    if all(r is not None for r in raw):  # every column has its field id
        by_id = {int(r): j for j, r in enumerate(raw) if r is not None}
    else:  # written before field ids: by the name files were written with
        names = state.name_mapping if state.name_mapping is not None else dict(zip(state.schema.names, state.ids))
        by_id = {names[f.name]: j for j, f in enumerate(file_schema) if f.name in names}
    return {position[fid]: j for fid, j in by_id.items() if fid in position}


def _deleted(root: Path, entry: Entry) -> BitMap:
    ref = entry.deletes
    if ref is None:
        return BitMap()
    blob = _get(root, ref.path)
    where = f"{ref.path} (offset {ref.offset}, length {ref.length})"
    if not blob.startswith(MAGIC):
        raise Corrupt(f"{ref.path} does not start with {MAGIC!r}")
    if ref.offset + ref.length > len(blob):
        raise Corrupt(f"{where}: past the object's {len(blob)} bytes")
    try:
        bitmap = BitMap.deserialize(blob[ref.offset : ref.offset + ref.length])
    except (ValueError, IndexError) as exc:
        raise Corrupt(f"{where}: not a roaring bitmap: {exc}") from None
    if len(bitmap) != ref.cardinality:
        raise Corrupt(f"{where}: {len(bitmap)} positions; the entry says {ref.cardinality}")
    if bitmap.max() >= entry.rows:
        raise Corrupt(f"{where}: position {bitmap.max()} is past the {entry.rows} rows of {entry.path}")
    return bitmap

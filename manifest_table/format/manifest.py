"""The immutable manifest of one table version, in either format.

Format v1 lists every live data file (``tail``). A format-v2 root lists its newest entries
(``tail``) and the others through write-once segments (root.py, segment.py), so its size does
not grow with the table. A manifest is a value: reading its segments is the version log's
(log/version.py). Decoding is the trust boundary for everything a manifest holds:
every field is checked for its JSON type and range, every key it names goes through
``keys.stored_key``; the schema and the column stats are decoded and checked when first used
(``StoredSchema``, ``_CheckedStats``), so that what reads only counts (``manifest-table
count``, history, the pointer) never imports pyarrow (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import CorruptTableError, InvalidArgumentError, TableNotFoundError
from ..lazy import lazy
from .entries import ROW_POSITIONS, DataFile, DeletionVector
from .field_ids import FieldIds, plain
from .json_fields import MAX_INT64, MISSING, corrupt, format_version, integer, load_object, of_type, parent_version
from .keys import DATA_PREFIX, MANIFEST_PREFIX, TOMBSTONE_PREFIX, WRITER_SHAPES, caller_key, stored_key
from .mirrors import decode_mirrors
from .properties import GC_GRACE, Properties
from .replaced import check_replaced
from .root import FileIndex, Totals, decode_index, encode_index
from .stats import ColumnStats, StoredStats, encode_stats
from .stored_schema import MAX_FIELD_ID, StoredSchema, names_to_ids

if TYPE_CHECKING:
    import decimal

    import pyarrow as pa
    import pyarrow.types as pat

    from .listed_once import ListedPaths
else:
    decimal = lazy("decimal")  # (with the stats that hold decimals: not for a count)
    pa = lazy("pyarrow")
    pat = lazy("pyarrow.types")

FORMAT_VERSION = 3
"""The newest manifest format this library reads and writes: 3 is a v2 root holding properties
that release 0.3.0 does not know (format/properties.py)."""
NEW_TABLE_FORMAT_VERSION = 2
"""What a new table gets unless its properties need 3 (``Properties.format_version``): then
0.3.0 and 0.2.0 read and write it."""
MAX_TIMESTAMP_MS = 253402300800000  # exclusive: year 10000, past what datetime can hold
_DATA_SHAPE = WRITER_SHAPES[DATA_PREFIX].fullmatch
_TOMBSTONE_SHAPE = WRITER_SHAPES[TOMBSTONE_PREFIX].fullmatch

DATABASE_HINT = "open it with open_database, and its tables as <database uri>/<table name>"


def manifest_key(version: int) -> str:
    return f"{MANIFEST_PREFIX}v{version:020d}.json"


def version_of_key(key: str) -> int | None:
    """The version a manifest key names, or None for any other key."""
    if WRITER_SHAPES[MANIFEST_PREFIX].fullmatch(key):
        return int(key[len(MANIFEST_PREFIX) + 1 : -len(".json")])
    return None


@dataclass(frozen=True)
class Manifest:
    """One version. Format v1 lists every file in ``tail``; a v2 root lists its newest
    entries there and the rest in segments, described by ``index`` (format/root.py)."""

    version: int
    parent_version: int | None
    timestamp_ms: int
    commit_id: str
    operation: str
    stored_schema: StoredSchema
    """The schema and, in format v2, its field ids (decoded when first used: ``schema``)."""
    tail: tuple[DataFile, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    # Idempotency markers of external writers (streaming query id -> last committed batch id).
    app_transactions: dict[str, int] = field(default_factory=dict)
    format_version: int = 1
    index: FileIndex | None = None
    mirrors: dict[str, Any] = field(default_factory=dict)
    """Format v2: the other formats this table is mirrored to, with their options
    (format/mirrors.py, docs/mirrors.md)."""

    def __post_init__(self) -> None:
        if (self.index is None) == self.stored_schema.has_field_ids:
            raise ValueError("a format-v2 version's schema has field ids, a v1 version's has none")

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)

    @property
    def schema(self) -> pa.Schema:
        return self.stored_schema.schema

    def check_listed_once(self, segments: Sequence[ListedPaths]) -> None:
        """``CorruptTableError`` if a file is listed in two of ``segments`` (``Segment.listed``
        of this version's segments), or in one of them and the tail: its rows would be read twice."""
        from .listed_once import ListedPaths, check_listed_once

        if not any(len(s.paths) for s in segments):
            return  # nothing to check the tail against (its fingerprints cost a point read 60 us)
        tail = ListedPaths.of("the root's tail", [f.path for f in self.tail])
        check_listed_once(manifest_key(self.version), [*segments, tail])

    @property
    def fields(self) -> FieldIds:
        """How this version's data files map onto its schema (format/field_ids.py)."""
        field_ids = self.stored_schema.field_ids
        if self.index is None or field_ids is None:  # (both or neither: __post_init__)
            return plain(self.schema)
        return FieldIds(self.schema, field_ids, self.index.name_mapping)

    def with_fields(self, fields: FieldIds, last_field_id: int) -> Manifest:
        """This v2 version under another schema (what a schema change commits on top of).
        Stored stats are keyed by field id, so encoding under the old schema and decoding
        under the new one carries each column's stats to its new name and type, and drops
        those of dropped columns."""
        if self.index is None:
            raise ValueError("a format-v1 version has no field ids")
        doc = json.loads(self.to_json())
        doc["schema"] = StoredSchema.of(fields.schema, fields.ids).text()
        doc["last_field_id"] = last_field_id
        doc["name_mapping"] = dict(fields.name_mapping or {})
        moved = Manifest.from_json(json.dumps(doc).encode(), manifest_key(self.version))
        for summary in moved.index.segments if moved.index else ():
            summary.stored.clear()  # (stats as stored under the old schema: the new one encodes its own)
        return moved

    @property
    def properties(self) -> Properties:
        """The table's properties (a format-v1 table sets none: every one is its default)."""
        return self.index.properties if self.index is not None else Properties()

    @property
    def gc_grace(self) -> float:
        """Seconds GC leaves an unreferenced object of the table (property ``gc_grace``)."""
        return self.properties[GC_GRACE].total_seconds()

    @property
    def totals(self) -> Totals:
        if self.index is not None:
            return self.index.totals
        return Totals(
            len(self.tail),
            sum(f.rows for f in self.tail),
            sum(f.deleted_rows for f in self.tail),
            sum(f.size for f in self.tail),
        )

    @property
    def live_rows(self) -> int:
        totals = self.totals
        return totals.rows - totals.deleted

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "format_version": self.format_version,
            "version": self.version,
            "parent_version": self.parent_version,
            "timestamp_ms": self.timestamp_ms,
            "commit_id": self.commit_id,
            "operation": self.operation,
            "parameters": self.parameters,
            "metrics": self.metrics,
            "app_transactions": self.app_transactions,
        }
        doc["schema"] = self.stored_schema.text()
        field_ids = self.stored_schema.field_ids
        if self.index is None or field_ids is None:  # (both or neither: __post_init__)
            doc["files"] = [_encode_file(f, self.schema) for f in self.tail]
        else:
            doc.update(encode_index(self.index, self.stored_schema))
            doc["tail"] = [_encode_file(f, self.schema, field_ids) for f in self.tail]
            if self.mirrors:
                doc["mirrors"] = self.mirrors
        return json.dumps(doc, separators=(",", ":"), default=str).encode()

    @classmethod
    def from_json(cls, data: bytes, key: str = "manifest") -> Manifest:
        """Decode and validate a stored manifest; ``CorruptTableError`` names ``key`` and the
        first field found wrong."""
        return cls.from_doc(load_object(data, key), key)

    @classmethod
    def from_doc(cls, doc: dict[str, Any], key: str = "manifest") -> Manifest:
        """``from_json`` of a decoded JSON object (a database's table root, format/database.py)."""
        if doc.get("kind") == "database":
            raise TableNotFoundError(f"{key} is a version of a database, not of a table: {DATABASE_HINT}")
        fmt = format_version(doc, key, FORMAT_VERSION)
        version = integer(doc, "version", key, 0, MAX_INT64)
        parent = parent_version(doc, key, version)
        text = of_type(doc, "schema", key, str)
        parameters = check_parameters(of_type(doc, "parameters", key, dict, default={}), key)
        index, mirrors = None, {}
        if fmt == 1:
            schema = StoredSchema(text, key, None)
            files = _decode_files(of_type(doc, "files", key, list), schema, key, "files")
        else:
            last = integer(doc, "last_field_id", key, 0, MAX_FIELD_ID)
            schema = StoredSchema(text, key, last)
            index = decode_index(
                doc,
                key,
                last,
                text,
                lambda raw, rows, at: _CheckedStats(schema.by_name(raw), schema, rows, key, at),
                lambda raw, rows, at: _decode_deletes(raw, rows, key, at),
            )
            files = _decode_files(of_type(doc, "tail", key, list), schema, key, "tail")
            _check_totals(index, files, key)
            mirrors = decode_mirrors(doc, key)
        return cls(
            version=version,
            parent_version=parent,
            timestamp_ms=integer(doc, "timestamp_ms", key, 0, MAX_TIMESTAMP_MS),
            commit_id=of_type(doc, "commit_id", key, str),
            operation=of_type(doc, "operation", key, str),
            stored_schema=schema,
            tail=files,
            parameters=parameters,
            metrics=of_type(doc, "metrics", key, dict, default={}),
            app_transactions=_decode_app_transactions(doc, key),
            format_version=fmt,
            index=index,
            mirrors=mirrors,
        )


def check_parameters(parameters: dict[str, Any], key: str) -> dict[str, Any]:
    """A commit's ``parameters``, with what rebasing and GC decode from them checked."""
    if "rewrites" in parameters:
        _check_rewrites(parameters["rewrites"], key)
    if "replaced" in parameters:
        check_replaced(parameters["replaced"], key, lambda raw, rows, at: _decode_deletes(raw, rows, key, at))
    return parameters


def check_new_file(f: object) -> None:
    """A data file a caller asks to add to the table (``Transaction.add_files``): a
    ``DataFile`` with a valid key under ``data/``, counts in range, and no deletes of its own.
    Raises ``InvalidArgumentError``."""
    if not isinstance(f, DataFile):
        raise InvalidArgumentError(f"add_files takes DataFile objects, not {type(f).__name__}")
    caller_key(f.path, DATA_PREFIX, "add_files")
    if type(f.rows) is not int or not 0 <= f.rows < ROW_POSITIONS:
        raise InvalidArgumentError(
            f"add_files: {f.path} has rows={f.rows!r}; expected an integer in [0, {ROW_POSITIONS})"
        )
    if type(f.size) is not int or not 0 <= f.size < MAX_INT64:
        raise InvalidArgumentError(f"add_files: {f.path} has size={f.size!r}; expected an integer >= 0")
    if f.deletes is not None:
        raise InvalidArgumentError(
            f"add_files: {f.path} has deletes; a new data file has none "
            "(delete its rows with delete_positions once it is added)"
        )


def _encode_file(f: DataFile, schema: pa.Schema, field_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """An entry of v1's ``files``, or of a v2 root's ``tail`` (stats keyed by ``field_ids``)."""
    stats = f.encoded_stats if f.encoded_stats is not None else encode_stats(f.stats, schema)
    doc: dict[str, Any] = {
        "path": f.path,
        "rows": f.rows,
        "size": f.size,
        "stats": (stats if type(stats) is dict else dict(stats))
        if field_ids is None
        else names_to_ids(stats, schema, field_ids),
    }
    if f.deletes is not None:
        d = f.deletes
        doc["deletes"] = {"path": d.path, "offset": d.offset, "length": d.length, "cardinality": d.cardinality}
    if f.cluster_run is not None:
        doc["cluster_run"] = f.cluster_run
    return doc


def _decode_files(docs: list[Any], schema: StoredSchema, key: str, name: str) -> tuple[DataFile, ...]:
    """The entries of field ``name`` (v1 ``files``, v2 ``tail``)."""
    files = tuple(_decode_file(doc, schema, key, f"{name}[{i}]") for i, doc in enumerate(docs))
    if len({f.path for f in files}) != len(files):
        seen: set[str] = set()
        twice = next(f.path for f in files if f.path in seen or seen.add(f.path))  # type: ignore[func-returns-value]
        raise CorruptTableError(f"{key}: field {name} lists {twice} more than once")
    return files


def _decode_file(doc: Any, schema: StoredSchema, key: str, at: str) -> DataFile:
    if type(doc) is not dict:
        raise corrupt(key, at, doc, "a JSON object")
    try:
        path, rows, size, stats = doc["path"], doc["rows"], doc["size"], doc["stats"]
    except KeyError:
        path = None  # the checks below name what is missing
    if not (
        type(path) is str
        and _DATA_SHAPE(path)
        and type(rows) is int
        and 0 <= rows < ROW_POSITIONS
        and type(size) is int
        and 0 <= size < MAX_INT64
        and type(stats) is dict
    ):
        # Not the shape our writers produce: check each field, naming the one that is wrong.
        path = stored_key(doc.get("path", MISSING), DATA_PREFIX, key, f"{at}.path")
        rows = integer(doc, "rows", key, 0, ROW_POSITIONS, at)
        size = integer(doc, "size", key, 0, MAX_INT64, at)
        stats = of_type(doc, "stats", key, dict, at, default={})
    deletes = doc.get("deletes")
    if deletes is not None:
        deletes = _written_deletes(deletes, rows) or _decode_deletes(deletes, rows, key, f"{at}.deletes")
    stats = schema.by_name(stats)
    return DataFile(
        path=path,
        rows=rows,
        size=size,
        stats=_CheckedStats(stats, schema, rows, key, f"{at}.stats"),
        encoded_stats=stats,
        deletes=deletes,
        cluster_run=None if "cluster_run" not in doc else integer(doc, "cluster_run", key, 0, MAX_INT64, at),
    )


def _written_deletes(doc: Any, rows: int) -> DeletionVector | None:
    """The reference if it is exactly what our writers produce (the fast path), else None."""
    try:
        path, offset, length, cardinality = doc["path"], doc["offset"], doc["length"], doc["cardinality"]
    except (KeyError, TypeError):  # (TypeError: not an object)
        return None
    if (
        type(path) is str
        and _TOMBSTONE_SHAPE(path)
        and type(offset) is int
        and type(length) is int
        and type(cardinality) is int
        and 0 <= offset < MAX_INT64
        and 0 <= length < MAX_INT64
        and 0 < cardinality <= rows
    ):
        return DeletionVector(path, offset, length, cardinality)
    return None


def _decode_deletes(doc: Any, rows: int, key: str, at: str) -> DeletionVector:
    """A deletion-vector reference of a file with ``rows`` rows. Whether the offset and length
    fit the tombstone object is checked when it is read (data/tombstones.py)."""
    if type(doc) is not dict:
        raise corrupt(key, at, doc, "a JSON object or null")
    return DeletionVector(
        path=stored_key(doc.get("path", MISSING), TOMBSTONE_PREFIX, key, f"{at}.path"),
        offset=integer(doc, "offset", key, 0, MAX_INT64, at),
        length=integer(doc, "length", key, 0, MAX_INT64, at),
        cardinality=integer(
            doc, "cardinality", key, 1, rows + 1, at, expected=f"an integer from 1 to the file's {rows} rows"
        ),
    )


def _check_totals(index: FileIndex, tail: Sequence[DataFile], key: str) -> None:
    """The root's totals are its segments' plus its tail's: ``count()`` answers from them
    alone, so a root listing a file in two places that its totals count once would count
    other rows than a scan reads. (``deleted`` is left out: the ``deletes`` map changes it
    without rewriting the segments whose summaries count it.)"""
    for name, of_tail in (
        ("files", len(tail)),
        ("rows", sum(f.rows for f in tail)),
        ("bytes", sum(f.size for f in tail)),
    ):
        listed = of_tail + sum(getattr(s, name) for s in index.segments)
        if getattr(index.totals, name) != listed:
            raise corrupt(
                key, f"totals.{name}", getattr(index.totals, name), f"{listed}, the sum over its segments and tail"
            )


def _check_rewrites(rewrites: Any, key: str) -> None:
    """``parameters.rewrites`` of a compaction, which rebasing and GC decode later: ``output``
    (0.1.0 and later) or ``outputs`` (0.3.0 and later, several files) whose rows are exactly
    the sources' live rows, since rebasing remaps positions by those counts."""
    if type(rewrites) is not list:
        raise corrupt(key, "parameters.rewrites", rewrites, "a JSON array")
    for i, rewrite in enumerate(rewrites):
        at = f"parameters.rewrites[{i}]"
        if type(rewrite) is not dict:
            raise corrupt(key, at, rewrite, "a JSON object")
        live = 0
        for j, source in enumerate(of_type(rewrite, "sources", key, list, at)):
            where = f"{at}.sources[{j}]"
            rows = _rows_of_file(source, key, where)
            deletes = source.get("deletes", MISSING)
            live += rows - (
                _decode_deletes(deletes, rows, key, f"{where}.deletes").cardinality if deletes is not None else 0
            )
        if "order" in rewrite:
            _check_order(rewrite["order"], key, f"{at}.order")
        if "outputs" not in rewrite:
            output = rewrite.get("output", MISSING)
            if output is not None:
                stored_key(output, DATA_PREFIX, key, f"{at}.output")
        elif live != sum(
            _rows_of_file(output, key, f"{at}.outputs[{j}]")
            for j, output in enumerate(of_type(rewrite, "outputs", key, list, at))
        ):
            raise corrupt(
                key, f"{at}.outputs", rewrite["outputs"], f"outputs whose rows add up to the sources' {live} live rows"
            )


def _check_order(order: Any, key: str, at: str) -> None:
    """A clustering rewrite's ``order``: the curve's name and 1 to 4 field ids."""
    if type(order) is not dict or type(order.get("curve")) is not str:
        raise corrupt(key, at, order, 'an object {"curve": <name>, "field_ids": [...]}')
    ids = of_type(order, "field_ids", key, list, at)
    if not 1 <= len(ids) <= 4 or any(type(i) is not int or not 0 < i < MAX_INT64 for i in ids):
        raise corrupt(key, f"{at}.field_ids", ids, "1 to 4 field ids")


def _rows_of_file(doc: Any, key: str, at: str) -> int:
    """The ``rows`` of a rewrite's source or output ``{"path": <data key>, "rows": ...}``."""
    if type(doc) is not dict:
        raise corrupt(key, at, doc, "a JSON object")
    stored_key(doc.get("path", MISSING), DATA_PREFIX, key, f"{at}.path")
    return integer(doc, "rows", key, 0, ROW_POSITIONS, at)


def _decode_app_transactions(doc: dict[str, Any], key: str) -> dict[str, int]:
    apps = of_type(doc, "app_transactions", key, dict, default={})
    for app_id in apps:
        integer(apps, app_id, key, -MAX_INT64, MAX_INT64, "app_transactions")
    return apps


@functools.cache
def _json_kinds(dtype: pa.DataType) -> tuple[type, ...]:
    """The JSON types a stored min/max of a column of ``dtype`` may have (stats.py encodes)."""
    if pat.is_boolean(dtype):
        return (bool,)
    if pat.is_integer(dtype) or pat.is_timestamp(dtype) or pat.is_date(dtype):
        return (int,)
    if pat.is_floating(dtype):
        return (int, float)
    if pat.is_string(dtype) or pat.is_large_string(dtype) or pat.is_decimal(dtype):
        return (str,)
    return (str, int, float, bool)


class _CheckedStats(StoredStats):
    """A file's stored stats, each column's entry checked for its JSON types when first
    decoded: checking every entry of a big manifest up front would cost as much as decoding
    it, and most entries are never looked at."""

    __slots__ = ("_key", "_at")

    def __init__(self, raw: Mapping[str, Any], schema: StoredSchema, rows: int, key: str, at: str) -> None:
        super().__init__(raw, schema, rows)
        self._key, self._at = key, at

    def __getitem__(self, name: str) -> ColumnStats:
        if name not in self._decoded and name in self._raw and name in self._schema.types:
            self._check(name)
            try:
                found = super().__getitem__(name)
            except (ValueError, OverflowError, ArithmeticError, pa.ArrowException) as exc:
                raise CorruptTableError(
                    f"{self._key}: field {self._at}.{name} does not decode as {self._schema.types[name]}: {exc}"
                ) from None
            for value in (found.min, found.max):
                if isinstance(value, decimal.Decimal) and not value.is_finite():
                    del self._decoded[name]  # every later use must fail the same way
                    raise corrupt(self._key, f"{self._at}.{name}", value, "a finite decimal")
            return found
        return super().__getitem__(name)

    def _check(self, name: str) -> None:
        entry, where = self._raw[name], f"{self._at}.{name}"
        if type(entry) is not dict:
            raise corrupt(self._key, where, entry, "a JSON object")
        if entry.get("null_count") is not None:
            integer(entry, "null_count", self._key, 0, self._rows + 1, where)
        kinds = _json_kinds(self._schema.types[name])
        for bound in ("min", "max"):
            value = entry.get(bound, None)
            if value is not None and type(value) not in kinds:
                raise corrupt(
                    self._key,
                    f"{where}.{bound}",
                    value,
                    f"a JSON {' or '.join(k.__name__ for k in kinds)} for a {self._schema.types[name]} column",
                )

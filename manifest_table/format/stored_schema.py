"""The ``schema`` field of a manifest (and of a database's table root): the table's Arrow
schema as Arrow IPC in base64, each column's field id in its metadata in format v2
(``PARQUET:field_id``, as Parquet writers take it); and stats keyed by field id, as v2 stores
them, read by column name.

A decoded manifest keeps the field as stored and decodes it at first use (``StoredSchema``):
counting rows, following the pointer and listing versions read the manifest's JSON alone,
and decoding Arrow IPC is what imports pyarrow, most of what ``manifest-table count`` took
(docs/benchmarks.md, "Start-up"). The checks are those decoding the manifest made, made
later: a schema that does not decode, or v2 field ids missing, repeated or above
``last_field_id``, is a ``CorruptTableError`` naming the manifest and the field, at every
use (the column stats were already checked this way, ``manifest._CheckedStats``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import CorruptTableError
from ..lazy import lazy
from .field_ids import FIELD_ID
from .json_fields import corrupt

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy("pyarrow")

MAX_FIELD_ID = 2**31
"""Field ids are positive 32-bit integers, as Parquet and Iceberg keep them."""


class _Decoded(NamedTuple):
    schema: pa.Schema
    field_ids: tuple[int, ...] | None
    types: dict[str, pa.DataType]
    names: dict[str, str]
    """str(field id) -> column name (format v2)."""


class StoredSchema:
    """A version's schema and (format v2) its columns' field ids, decoded on first use."""

    __slots__ = ("_text", "_key", "_last_field_id", "_with_ids", "_decoded")

    def __init__(self, text: str, key: str, last_field_id: int | None) -> None:
        """Field ``schema`` of object ``key`` holding ``text``. ``last_field_id``: the v2
        root's, which no column's field id exceeds; None in format v1 (no field ids)."""
        self._text: str | None = text
        self._key, self._last_field_id = key, last_field_id
        self._with_ids = last_field_id is not None
        self._decoded: _Decoded | None = None

    @classmethod
    def of(cls, schema: pa.Schema, field_ids: Sequence[int] | None = None) -> StoredSchema:
        """A schema in hand (a new table, an upgrade to v2): ``field_ids`` in format v2."""
        made = cls.__new__(cls)
        made._text, made._key, made._last_field_id = None, "", None
        made._with_ids = field_ids is not None
        made._decoded = _decoded(schema, None if field_ids is None else tuple(field_ids))
        return made

    @property
    def schema(self) -> pa.Schema:
        return self._decode().schema

    @property
    def field_ids(self) -> tuple[int, ...] | None:
        """Each column's field id in format v2; None in format v1, whose files are read by name."""
        return self._decode().field_ids

    @property
    def has_field_ids(self) -> bool:
        """Whether the columns have field ids (format v2), known without decoding."""
        return self._with_ids

    @property
    def types(self) -> dict[str, pa.DataType]:
        """Column name -> type."""
        return self._decode().types

    def text(self) -> str:
        """The field as stored: a decoded one's text unchanged, so no commit re-encodes it."""
        if self._text is None:
            from .schema import encode_schema

            decoded = self._decode()
            ids = decoded.field_ids
            self._text = encode_schema(decoded.schema if ids is None else with_field_ids(decoded.schema, ids))
        return self._text

    def by_name(self, stats: dict[str, Any]) -> Mapping[str, Any]:
        """One file's (or segment's) stored stats keyed by column name. v1 stores them so; v2
        keys them by field id, translated at first use (``ids_to_names``)."""
        return _ByName(stats, self) if self._with_ids else stats

    def _decode(self) -> _Decoded:
        decoded = self._decoded
        if decoded is None:  # (two threads may both decode: the same value, assigned once each)
            assert self._text is not None
            decoded = self._decoded = _decode(self._text, self._key, self._last_field_id)
        return decoded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredSchema):
            return NotImplemented
        if self._text is not None and self._text == other._text:
            return True
        return self.field_ids == other.field_ids and self.schema == other.schema

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = "not decoded" if self._decoded is None else str(self._decoded.schema).replace("\n", ", ")
        return f"StoredSchema({shown})"


def _decode(text: str, key: str, last_field_id: int | None) -> _Decoded:
    from .schema import decode_schema

    try:
        schema = decode_schema(text)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{key}: field schema: {exc}") from None
    if last_field_id is None:
        return _decoded(schema, None)
    schema, field_ids = split_field_ids(schema, key)
    if field_ids and max(field_ids) > last_field_id:
        raise corrupt(key, "last_field_id", last_field_id, f"an integer in [{max(field_ids)}, {MAX_FIELD_ID})")
    return _decoded(schema, field_ids)


def _decoded(schema: pa.Schema, field_ids: tuple[int, ...] | None) -> _Decoded:
    names = {} if field_ids is None else {str(fid): f.name for f, fid in zip(schema, field_ids)}
    return _Decoded(schema, field_ids, {f.name: f.type for f in schema}, names)


class _ByName(Mapping[str, Any]):
    """v2 stats keyed by field id, read by column name; translated once, at first use. Ids
    of no current column are left out: schema evolution keeps a dropped column's id out of
    use."""

    __slots__ = ("_stored", "_schema", "_named")

    def __init__(self, stored: dict[str, Any], schema: StoredSchema) -> None:
        self._stored, self._schema = stored, schema
        self._named: dict[str, Any] | None = None

    def _resolved(self) -> dict[str, Any]:
        if self._named is None:
            names = self._schema._decode().names
            self._named = {names[fid]: entry for fid, entry in self._stored.items() if fid in names}
        return self._named

    def __getitem__(self, name: str) -> Any:
        return self._resolved()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._resolved())

    def __len__(self) -> int:
        return len(self._resolved())


def with_field_ids(schema: pa.Schema, field_ids: Sequence[int]) -> pa.Schema:
    """``schema`` with each column's field id in its metadata, as Parquet writers read it."""
    return pa.schema(
        [f.with_metadata({**(f.metadata or {}), FIELD_ID: str(fid).encode()}) for f, fid in zip(schema, field_ids)],
        metadata=schema.metadata,
    )


def split_field_ids(schema: pa.Schema, key: str) -> tuple[pa.Schema, tuple[int, ...]]:
    """A stored schema -> (the schema without field ids, the ids)."""
    ids, plain = [], []
    for f in schema:
        metadata = dict(f.metadata or {})
        raw = metadata.pop(FIELD_ID, None)
        try:
            fid = int(raw) if raw is not None else None
        except ValueError:
            fid = None
        if fid is None or not 0 < fid < MAX_FIELD_ID:
            raise corrupt(key, f"schema field {f.name!r} {FIELD_ID.decode()}", raw, "a positive integer")
        ids.append(fid)
        plain.append(f.with_metadata(metadata or None))
    if len(set(ids)) != len(ids):
        raise corrupt(key, "schema field ids", ids, "distinct ids")
    return pa.schema(plain, metadata=schema.metadata), tuple(ids)


def names_to_ids(stats: Mapping[str, Any], schema: pa.Schema, field_ids: Sequence[int]) -> dict[str, Any]:
    """Stats keyed by column name -> keyed by field id, as v2 stores them."""
    ids = {f.name: str(fid) for f, fid in zip(schema, field_ids)}
    return {ids[name]: entry for name, entry in stats.items() if name in ids}

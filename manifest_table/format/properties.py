"""Table and database properties (docs/format.md, "Properties"): one registry of the names
this release knows, each with its parser, its default, the format version whose writers keep
it and where it applies. ``create_table(properties=)``, ``set_properties``, the CLI, decoding
and the writer requirement all read the registry, so adding a property is one
``register(Property(...))`` entry below.

A value is parsed from what a caller passes (``timedelta(hours=6)`` or ``"6h"``) and from its
stored JSON by the same parser, and stored as ``to_json`` of it (``"6h"``): decoding checks
that the stored form is that canonical form, so a property reads back exactly as it was set
(lists stay lists).

**The writer requirement** (format version 3 on): a writer refuses to commit to a table or
database whose latest version holds a property it does not know (``check_writable``): writing
the next version it would silently drop it. Readers ignore unknown properties. Release 0.3.0
predates the rule, so the first property it does not know raises a table's format version to
3 (a database's to 2), which 0.3.0 refuses altogether; later properties need no new format
version."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from ..arguments import check_duration, check_int, did_you_mean, format_duration
from ..errors import CorruptTableError, InvalidArgumentError, UnsupportedTableError
from .json_fields import show

T = TypeVar("T")

TABLE = "table"
"""A standalone table."""
DATABASE_TABLE = "database table"
"""A table of a database."""
DATABASE = "database"
TABLES = frozenset({TABLE, DATABASE_TABLE})


@dataclass(frozen=True, eq=False)
class Property(Generic[T]):
    name: str
    doc: str
    default: T
    parse: Callable[[str, Any], T]
    """``(name, value)`` -> the value, from a caller's value or the stored JSON;
    ``InvalidArgumentError`` naming the property."""
    to_json: Callable[[T], Any] = lambda value: value
    format_version: int = 3
    """The table format version a version holding this property is written with (a
    database's: 2 for any property): the first one whose writers keep it."""
    scopes: frozenset[str] = TABLES
    always_stored: bool = False
    """Stored in every root, set or not (the layout limits, which 0.2.0 and 0.3.0 read)."""


REGISTRY: dict[str, Property[Any]] = {}


def register(prop: Property[T]) -> Property[T]:
    REGISTRY[prop.name] = prop
    return prop


def _positive_int(name: str, value: Any) -> int:
    number = check_int(name, value, minimum=1)
    if number >= 2**63:
        raise InvalidArgumentError(f"{name} must be below 2**63, not {number}")
    return number


def _grace(name: str, value: Any) -> timedelta:
    grace = check_duration(name, value)
    if not grace:
        raise InvalidArgumentError(f"{name} must be a positive duration such as '24h', not {value!r}")
    return grace


def _layout(name: str, default: int, doc: str) -> Property[int]:
    return register(Property(name, doc, default, _positive_int, format_version=2, always_stored=True))


TAIL_LIMIT = _layout("tail_limit", 32, "file entries kept inline in the root before they are flushed into a segment")
DELETES_LIMIT = _layout(
    "deletes_limit", 64, "segment files whose new deletion vectors the root carries before their segments are rewritten"
)
SEGMENT_TARGET_FILES = _layout("segment_target_files", 32_768, "entries a segment grows to by merging")
MAX_SMALL_SEGMENTS = _layout("max_small_segments", 8, "small segments allowed before a commit merges two")
GC_GRACE = register(
    Property(
        "gc_grace",
        "how long garbage collection leaves an unreferenced object; commits give up before "
        "their staged objects are this old (docs/protocol.md, 'Time')",
        timedelta(hours=24),
        _grace,
        format_duration,
        scopes=frozenset({TABLE, DATABASE}),
    )
)


def _column_list(most: int | None) -> Callable[[str, Any], tuple[str, ...]]:
    """A parser of a list of distinct column names, at least one, at most ``most`` (a string:
    names separated by commas, as the CLI passes ``cluster_by=user_id,country``)."""

    def parse(name: str, value: Any) -> tuple[str, ...]:
        names = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
        if not (
            isinstance(names, list | tuple)
            and 1 <= len(names) <= (most or len(names))
            and all(isinstance(n, str) and n for n in names)
            and len(set(names)) == len(names)
        ):
            count = f"1 to {most}" if most else "one or more"
            raise InvalidArgumentError(f"{name} must be a list of {count} distinct column names, not {value!r}")
        return tuple(names)

    return parse


CLUSTER_BY = register(
    Property[tuple[str, ...]](
        "cluster_by",
        "columns compaction orders rows by, along a Hilbert curve, so that files hold narrow "
        "ranges of them (docs/operations.md, 'Clustering')",
        (),
        _column_list(4),
        list,
    )
)
SORT_BY = register(
    Property[tuple[str, ...]](
        "sort_by", "columns every appended batch is sorted by before it is written", (), _column_list(None), list
    )
)
BLOOM_FILTER_COLUMNS = register(
    Property[tuple[str, ...]](
        "bloom_filter_columns",
        "columns every data file keeps a bloom filter of, per row group, so that a lookup by "
        "value skips the row groups without it (docs/operations.md, 'Bloom filters')",
        (),
        _column_list(None),
        list,
    )
)
LAYOUT: tuple[Property[tuple[str, ...]], ...] = (CLUSTER_BY, SORT_BY, BLOOM_FILTER_COLUMNS)
"""The properties that name columns (format/layout.py checks them against the schema)."""


@dataclass(frozen=True)
class Properties:
    """The properties of one version: those set (and the layout limits of a table), by name,
    as values; ``unknown``: stored names this release does not know, as stored."""

    values: Mapping[str, Any] = field(default_factory=dict)
    unknown: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, prop: Property[T]) -> T:
        value: T = self.values.get(prop.name, prop.default)
        return value

    @classmethod
    def of(cls, given: Mapping[str, Any] | None, scope: str) -> Properties:
        """A new table's (or database's) properties from a caller's dict."""
        layout = {name: REGISTRY[name].default for name in _layout_names(frozenset({scope}))}
        return cls(layout).updated(parse_updates(given or {}, scope))

    def updated(self, updates: Mapping[str, Any]) -> Properties:
        """These properties with ``updates`` (``parse_updates``) applied: None resets one."""
        values = dict(self.values)
        for name, value in updates.items():
            if value is None and not REGISTRY[name].always_stored:
                values.pop(name, None)
            else:
                values[name] = REGISTRY[name].default if value is None else value
        return Properties(values, self.unknown)

    @property
    def format_version(self) -> int:
        """The lowest table format version that keeps every property set here."""
        return max((REGISTRY[name].format_version for name in self.values), default=2)

    def to_json(self) -> dict[str, Any]:
        return {**self.unknown, **{name: REGISTRY[name].to_json(v) for name, v in self.values.items()}}

    @classmethod
    def from_json(cls, raw: Any, key: str, scopes: frozenset[str]) -> Properties:
        """The stored ``properties`` of ``key``, an object of ``scopes`` (``TABLES``, or a
        database): every known name's value in its canonical form, else
        ``CorruptTableError`` naming the field."""
        if type(raw) is not dict:
            raise CorruptTableError(f"{key}: field properties is {show(raw)}; expected a JSON object")
        values, unknown = {}, {}
        for name in _layout_names(scopes):
            if name not in raw:
                raise CorruptTableError(f"{key}: field properties.{name} is missing")
        for name, stored in raw.items():
            prop = REGISTRY.get(name)
            if prop is None or not prop.scopes & scopes:
                unknown[name] = stored
                continue
            try:
                value = prop.parse(name, stored)
                if prop.to_json(value) != stored or type(prop.to_json(value)) is not type(stored):
                    raise InvalidArgumentError(f"it is not in its canonical form {prop.to_json(value)!r}")
            except InvalidArgumentError as exc:
                raise CorruptTableError(f"{key}: field properties.{name} is {show(stored)}: {exc}") from None
            values[name] = value
        return cls(values, unknown)

    def shown(self, scope: str) -> dict[str, Any]:
        """Every property of ``scope``, set or default, as stored (what ``properties`` shows),
        then any unknown ones."""
        known = {
            name: prop.to_json(self.values.get(name, prop.default))
            for name, prop in sorted(REGISTRY.items())
            if scope in prop.scopes
        }
        return {**known, **self.unknown}

    def check_writable(self, where: str) -> None:
        """``UnsupportedTableError`` if a newer release set a property this one does not know."""
        if self.unknown:
            raise UnsupportedTableError(
                f"{where} has properties this release of manifest_table does not know "
                f"({sorted(self.unknown)}), set by a newer release: upgrade manifest_table to "
                "write to it (reading works); nothing was committed"
            )


def parse_updates(given: Any, scope: str) -> dict[str, Any]:
    """A caller's ``{name: value}`` checked against the registry and ``scope`` (None resets a
    property to its default): ``InvalidArgumentError`` naming a wrong name or value."""
    if not isinstance(given, Mapping):
        raise InvalidArgumentError(f"properties must be a dict of name -> value, not {type(given).__name__}")
    known = sorted(name for name, prop in REGISTRY.items() if scope in prop.scopes)
    unknown = [name for name in given if name not in known]
    if unknown:
        elsewhere = [name for name in unknown if name in REGISTRY]
        if elsewhere:
            prop = REGISTRY[elsewhere[0]]
            raise InvalidArgumentError(f"property {prop.name!r} does not apply to a {scope}; {_where(prop, scope)}")
        raise InvalidArgumentError(
            f"unknown {scope} properties {sorted(map(str, unknown))}{did_you_mean(unknown, known)}; known: {known}"
        )
    return {name: None if value is None else REGISTRY[name].parse(name, value) for name, value in given.items()}


def _where(prop: Property[Any], scope: str) -> str:
    if scope == DATABASE_TABLE and DATABASE in prop.scopes:
        return "a database's tables take it from the database (Database.set_properties)"
    kinds = ["tables" if TABLES <= prop.scopes else "standalone tables" if TABLE in prop.scopes else ""]
    kinds += ["a database's tables" if DATABASE_TABLE in prop.scopes and not TABLES <= prop.scopes else ""]
    kinds += ["databases" if DATABASE in prop.scopes else ""]
    return "it applies to " + " and ".join(kind for kind in kinds if kind)


def _layout_names(scopes: frozenset[str]) -> list[str]:
    return [name for name, prop in REGISTRY.items() if prop.always_stored and prop.scopes & scopes]

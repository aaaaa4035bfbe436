"""Reading the fields of a decoded JSON object (a manifest, the pointer) with their types and
ranges checked. A damaged or hostile object then fails where it is read, with a
``CorruptTableError`` naming the object and the field, instead of as an ``IndexError``,
a ``TypeError`` or a wrong answer (a negative row count) somewhere downstream.

Types are compared with ``type(x) is int``: JSON ``true`` decodes to a ``bool``, which
``isinstance`` would take for an int."""

from __future__ import annotations

import json
from typing import Any

from ..errors import CorruptTableError

MAX_INT64 = 2**63
MISSING: Any = object()
_SHOWN_CHARS = 60


def corrupt(obj: str, field: str, value: Any, expected: str) -> CorruptTableError:
    """The error for ``field`` of object ``obj`` holding ``value`` where ``expected`` belongs."""
    return CorruptTableError(f"{obj}: field {field} is {show(value)}; expected {expected}")


def load_object(data: bytes, obj: str) -> dict[str, Any]:
    """The JSON object stored in ``obj``."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # (RecursionError: absurdly deep nesting)
        raise CorruptTableError(f"{obj} is not valid JSON: {str(exc)[:200]}") from None
    if type(doc) is not dict:
        raise CorruptTableError(f"{obj} is not a JSON object but {show(doc)}")
    return doc


def integer(
    doc: dict[str, Any], name: str, obj: str, lo: int, hi: int, at: str = "", expected: str | None = None
) -> int:
    """``doc[name]``, an integer in ``[lo, hi)``. ``at`` locates ``doc`` inside ``obj``."""
    value = doc.get(name, MISSING)
    if type(value) is int and lo <= value < hi:
        return value
    raise corrupt(obj, _path(at, name), value, expected or f"an integer in [{lo}, {hi})")


def parent_version(doc: dict[str, Any], obj: str, version: int) -> int | None:
    """A version's ``parent_version``: null for version 0, else ``version - 1``."""
    parent = doc.get("parent_version", MISSING)
    if parent != (None if version == 0 else version - 1) or type(parent) not in (int, type(None)):
        raise corrupt(
            obj, "parent_version", parent, "null for version 0" if version == 0 else f"{version - 1} (version - 1)"
        )
    return parent


def format_version(doc: dict[str, Any], obj: str, newest: int, note: str = "") -> int:
    """The object's ``format_version``; one newer than this library knows is refused with the
    one remedy there is."""
    fmt = integer(doc, "format_version", obj, 1, MAX_INT64)
    if fmt > newest:
        raise CorruptTableError(
            f"{obj} has format version {fmt}; this library reads up to {newest}{note}: upgrade manifest_table"
        )
    return fmt


def of_type(doc: dict[str, Any], name: str, obj: str, kind: type, at: str = "", default: Any = MISSING) -> Any:
    """``doc[name]`` of exactly ``kind`` (``default`` when absent, if one is given)."""
    value = doc.get(name, default)
    if type(value) is kind or (value is default and default is not MISSING):
        return value
    raise corrupt(obj, _path(at, name), value, f"a JSON {_JSON_NAMES.get(kind, kind.__name__)}")


_JSON_NAMES = {dict: "object", list: "array", str: "string", int: "integer", bool: "boolean"}


def _path(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


def show(value: Any) -> str:
    """``value`` for an error message: its repr, cut short."""
    if value is MISSING:
        return "missing"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."

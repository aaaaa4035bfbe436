"""The root's ``mirrors`` setting: which other table formats describe this table's versions
(docs/mirrors.md), with the options each mirror keeps for its whole life.

A format-v2 root may carry ``"mirrors": {"iceberg": {"table_uuid": "..."}, "delta":
{"table_id": "...", "checkpoint_interval": 100}}``. Absent means no mirror. Every commit
copies it from the version it builds on; ``Table.set_mirrors`` changes it in one commit,
keeping the options of a mirror that stays on (an Iceberg table's uuid must never change).
A mirror name this release does not know (written by a newer one) is kept as it is and not
acted on."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError
from .json_fields import corrupt, integer

ICEBERG = "iceberg"
DELTA = "delta"
MIRRORS = (ICEBERG, DELTA)
DEFAULT_CHECKPOINT_INTERVAL = 100
"""Delta versions between checkpoints. A checkpoint lists every file (its cost follows the
table's size), so it is written once per this many commits; a reader replays at most this many
small JSON commits after it. (Delta's own default is 10 for Spark, 100 for delta-rs.)"""
_UUID_OPTION = {ICEBERG: "table_uuid", DELTA: "table_id"}


def new_options(name: str, checkpoint_interval: int | None = None) -> dict[str, Any]:
    """The options of a mirror being turned on: a fresh table identity, and for Delta its
    checkpoint interval."""
    options: dict[str, Any] = {_UUID_OPTION[name]: str(uuid.uuid4())}
    if name == DELTA:
        options["checkpoint_interval"] = checkpoint_interval or DEFAULT_CHECKPOINT_INTERVAL
    return options


def requested(mirrors: Any) -> dict[str, dict[str, Any]]:
    """What a caller asks for (``["iceberg", "delta"]``, or ``{"delta": {"checkpoint_interval":
    10}}``) as name -> options for a newly enabled mirror; ``InvalidArgumentError`` names
    what is wrong."""
    if (
        isinstance(mirrors, str)
        or not isinstance(mirrors, (list, tuple, dict))
        or not all(isinstance(name, str) for name in mirrors)
    ):
        raise InvalidArgumentError(f"mirrors must be a list of names from {list(MIRRORS)}, not {mirrors!r}")
    given = mirrors if isinstance(mirrors, dict) else {name: {} for name in mirrors}
    return {name: _options(name, options) for name, options in given.items()}


def _options(name: Any, options: Any) -> dict[str, Any]:
    if name not in MIRRORS:
        raise InvalidArgumentError(f"unknown mirror {name!r}; known: {list(MIRRORS)}")
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise InvalidArgumentError(f"the options of mirror {name!r} must be a dict, not {options!r}")
    unknown = sorted(set(options) - ({"checkpoint_interval"} if name == DELTA else set()), key=str)
    if unknown:
        raise InvalidArgumentError(f"mirror {name!r}: unknown options {unknown}")
    interval = options.get("checkpoint_interval")
    if interval is not None and (type(interval) is not int or interval < 1):
        raise InvalidArgumentError(f"checkpoint_interval must be an integer >= 1, not {interval!r}")
    return new_options(name, interval)


def merged(current: Mapping[str, Any], wanted: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The setting after turning on exactly the mirrors of ``wanted`` (fresh options), on a
    version whose setting is ``current``: a mirror already on keeps its options, and one of a
    newer release (not ours to turn off) stays."""
    kept = {name: options for name, options in current.items() if name not in MIRRORS}
    return {**kept, **{name: dict(current.get(name) or options) for name, options in wanted.items()}}


def decode_mirrors(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """The ``mirrors`` field of root ``key``, checked (``CorruptTableError`` names the field)."""
    raw = doc.get("mirrors", {})
    if type(raw) is not dict:
        raise corrupt(key, "mirrors", raw, "a JSON object")
    for name in MIRRORS:
        options = raw.get(name)
        if options is None:
            continue
        at = f"mirrors.{name}"
        if type(options) is not dict:
            raise corrupt(key, at, options, "a JSON object")
        identity = options.get(_UUID_OPTION[name])
        try:
            uuid.UUID(identity)
        except (TypeError, ValueError, AttributeError):
            raise corrupt(key, f"{at}.{_UUID_OPTION[name]}", identity, "a UUID string") from None
        if name == DELTA:
            integer(options, "checkpoint_interval", key, 1, 2**31, at)
    return raw

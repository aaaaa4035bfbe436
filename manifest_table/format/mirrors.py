"""The root's ``mirrors`` setting: which other table formats describe this table's versions
(docs/mirrors.md), with the options each mirror keeps for its whole life.

A format-v2 root may carry ``"mirrors": {"iceberg": {"table_uuid": "...", "max_snapshots":
10}, "delta": {"table_id": "...", "checkpoint_interval": 100}}`` (an Iceberg setting without
``max_snapshots``, written by 0.3, means ``DEFAULT_MAX_SNAPSHOTS``). Absent means no mirror. Every commit
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
DEFAULT_MAX_SNAPSHOTS = 10
"""Snapshots an Iceberg metadata file lists: its own version's and those of the retained
versions before it, newest first. Iceberg time travel by snapshot id reaches only these (any
other retained version is read through its own ``v<N>.metadata.json``); each costs about
0.5 KB in every metadata file written, so a commit's mirror objects stay small however long
the history."""
_UUID_OPTION = {ICEBERG: "table_uuid", DELTA: "table_id"}
_SETTINGS = {
    ICEBERG: ("max_snapshots", DEFAULT_MAX_SNAPSHOTS),
    DELTA: ("checkpoint_interval", DEFAULT_CHECKPOINT_INTERVAL),
}
"""Each mirror's one setting and its default."""


def new_options(name: str, setting: int | None = None) -> dict[str, Any]:
    """The options of a mirror being turned on: a fresh table identity, and its setting
    (Iceberg: ``max_snapshots``; Delta: ``checkpoint_interval``)."""
    key, default = _SETTINGS[name]
    return {_UUID_OPTION[name]: str(uuid.uuid4()), key: setting or default}


def setting(options: Mapping[str, Any], name: str) -> int:
    """A mirror's setting (its default where a 0.3 root has none)."""
    key, default = _SETTINGS[name]
    return int(options.get(key, default))


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
    key = _SETTINGS[name][0]
    unknown = sorted(set(options) - {key}, key=str)
    if unknown:
        raise InvalidArgumentError(f"mirror {name!r}: unknown options {unknown}; known: [{key!r}]")
    value = options.get(key)
    if value is not None and (type(value) is not int or value < 1):
        raise InvalidArgumentError(f"{key} must be an integer >= 1, not {value!r}")
    return new_options(name, value)


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
        if name == DELTA or "max_snapshots" in options:
            integer(options, _SETTINGS[name][0], key, 1, 2**31, at)
    return raw

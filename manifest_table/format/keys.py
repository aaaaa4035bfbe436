"""What a key of a table may be: the one place that decides it (docs/format.md, "Keys").

1. A key is a canonical relative name under one of the table's prefixes (``data/``,
   ``tombstones/``, ``manifest/``). ``..``, ``.``, empty segments, absolute paths,
   backslashes, colons (URL schemes, drive letters), control characters and lone surrogates
   are refused, never normalised: a name that could mean two objects, or an object outside
   the root, is not a key.
2. A key read from storage that breaks the rule makes the object holding it corrupt
   (``CorruptTableError``); one passed by a caller is a bad argument (``InvalidArgumentError``).
3. Of the valid keys, only those of exactly the shapes this library's writers produce are
   ever deleted by garbage collection or cleanup (``is_writer_key``): an unreferenced
   ``data/notes.txt`` or another table nested under ``data/`` is not ours to remove.
"""

from __future__ import annotations

import re

from ..errors import CorruptTableError, InvalidArgumentError
from .json_fields import show

DATA_PREFIX = "data/"
TOMBSTONE_PREFIX = "tombstones/"
MANIFEST_PREFIX = "manifest/"
SEGMENT_PREFIX = "segments/"
ROOT_PREFIX = "roots/"
TABLES_PREFIX = "tables/"
METADATA_PREFIX = "metadata/"
DELTA_LOG_PREFIX = "_delta_log/"

# Prefix -> the exact shape of the names our writers create under it. A format version that
# adds a kind of object (v2's ``segments/``) adds one line here.
WRITER_SHAPES: dict[str, re.Pattern[str]] = {
    # Data files, and the staging tree of a Spark job (``spark/native_write.py``), which a
    # driver that died mid-job leaves behind: GC removes it after the grace period.
    DATA_PREFIX: re.compile(
        r"data/(?:[0-9a-f]{32}\.parquet"
        r"|_spark-[0-9a-f]{32}(?:/(?!\.\.?(?:/|$))[A-Za-z0-9_=.+-]+)+)"
    ),
    # Tombstones, and the Iceberg and Delta files mirroring each (mirrors/puffin.py, delta_dv.py).
    TOMBSTONE_PREFIX: re.compile(
        r"tombstones/(?:[0-9a-f]{32}\.(?:roaring|puffin)|deletion_vector_"
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.bin)"
    ),
    MANIFEST_PREFIX: re.compile(r"manifest/v[0-9]{20}\.json"),
    SEGMENT_PREFIX: re.compile(r"segments/[0-9a-f]{32}\.parquet"),
    # The write-once roots of a database's table (format/database.py), named by uuid.
    ROOT_PREFIX: re.compile(r"roots/[0-9a-f]{32}\.json"),
    # The Iceberg mirror (mirrors/iceberg.py): metadata files, manifest lists, manifests, the hint.
    METADATA_PREFIX: re.compile(
        r"metadata/(?:v[0-9]+\.metadata\.json|version-hint\.text|snap-[0-9]+-[0-9a-f]{32}\.avro"
        r"|(?:[0-9a-f]{32}-(?:d|x[0-9]+)|t-d|t-x)-[0-9a-f]{32}\.avro)"
    ),
    # The Delta mirror (mirrors/delta.py): commits, checkpoints, the last-checkpoint pointer.
    DELTA_LOG_PREFIX: re.compile(r"_delta_log/(?:[0-9]{20}\.(?:json|checkpoint\.parquet)|_last_checkpoint)"),
}
PREFIXES = tuple(WRITER_SHAPES)

MAX_KEY_BYTES = 1024  # S3's limit; a longer name cannot be stored anywhere we write
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\\:\ud800-\udfff]")


def key_problem(key: object, prefix: str | None = None) -> str | None:
    """Why ``key`` is not a valid key (under ``prefix``, or any known prefix), or None."""
    if type(key) is not str:
        return f"is not a string but a {type(key).__name__}"
    prefixes = PREFIXES if prefix is None else (prefix,)
    if not key.startswith(prefixes):
        return f"is not under {' or '.join(prefixes)}"
    if WRITER_SHAPES[key[: key.index("/") + 1]].fullmatch(key):
        return None  # the common case, decided by one match
    bad = _FORBIDDEN.search(key)
    if bad is not None:
        return f"holds {_describe(bad.group())}"
    segments = key.split("/")
    if "" in segments:
        return "has an empty path segment"
    if "." in segments or ".." in segments:
        return "has a '.' or '..' path segment"
    if len(key.encode()) > MAX_KEY_BYTES:
        return f"is longer than {MAX_KEY_BYTES} bytes"
    return None


def is_writer_key(key: str) -> bool:
    """True for keys of exactly the shapes this library's writers create (what GC may delete)."""
    shape = WRITER_SHAPES.get(key[: key.find("/") + 1])
    return shape is not None and shape.fullmatch(key) is not None


def is_database_writer_key(key: str) -> bool:
    """True for the keys a database's writers create under its location (what its GC may
    delete): its versions, and its tables' objects under ``tables/<table id>/``."""
    if key.startswith(TABLES_PREFIX):
        table_id, _, rest = key[len(TABLES_PREFIX) :].partition("/")
        return (
            _TABLE_ID.fullmatch(table_id) is not None
            and rest.startswith(_DATABASE_TABLE_PREFIXES)
            and is_writer_key(rest)
        )
    return WRITER_SHAPES[MANIFEST_PREFIX].fullmatch(key) is not None


_TABLE_ID = re.compile(r"[0-9a-f]{32}")
_DATABASE_TABLE_PREFIXES = (DATA_PREFIX, TOMBSTONE_PREFIX, SEGMENT_PREFIX, ROOT_PREFIX, METADATA_PREFIX)
"""What a database's table writes (no manifests or pointer of its own; an Iceberg mirror)."""


def _describe(char: str) -> str:
    if char == "\\":
        return "a backslash"
    if char == ":":
        return "a colon (URL schemes and drive letters are not keys)"
    if "\ud800" <= char <= "\udfff":
        return "a lone surrogate (not encodable as UTF-8)"
    return f"the control character {char!r}"


def stored_key(key: object, prefix: str, obj: str, field: str) -> str:
    """``key`` read from ``field`` of the stored object ``obj``, or ``CorruptTableError``."""
    problem = key_problem(key, prefix)
    if problem is not None:
        raise CorruptTableError(f"{obj}: field {field} holds key {show(key)}, which {problem}")
    return key  # type: ignore[return-value]  # key_problem checked it is a str


def caller_key(key: object, prefix: str, what: str) -> str:
    """``key`` passed by a caller as ``what``, or ``InvalidArgumentError``."""
    problem = key_problem(key, prefix)
    if problem is not None:
        raise InvalidArgumentError(
            f"{what}: key {show(key)} {problem}; keys look like '{prefix}<name>', relative to the table root"
        )
    return key  # type: ignore[return-value]

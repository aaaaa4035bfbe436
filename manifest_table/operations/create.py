"""Creating a table: version 0, an empty manifest, created create-only, then the pointer.

1. Check everything a caller passed (schema, format version, properties, mirrors) before
   any object is written (``first_version``).
2. A pointer already there means a table is there (once GC has expired version 0 of a table,
   only the pointer shows it): ``TableExistsError``.
3. Create ``manifest/v0`` create-only. A failed create may have landed (a lost response): it
   is read back, ours if it holds our commit id; retried when nothing landed, as the commit
   loop does. Someone else's version 0 is ``TableExistsError``.
4. Create the pointer; one that exists already (a reader repaired it first) or that fails
   (the next reader repairs it) is fine. Then write the mirrors, if any, best effort."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, ManifestTableError, PreconditionFailed, StoreError, TableExistsError
from ..format.database import DatabaseVersion
from ..format.field_ids import plain
from ..format.layout import check_layout
from ..format.manifest import FORMAT_VERSION, Manifest, manifest_key
from ..format.mirrors import merged, requested
from ..format.pointer import POINTER_KEY, encode_pointer
from ..format.properties import TABLE, Properties
from ..format.root import FileIndex, Totals
from ..format.schema import check_schema
from ..format.stored_schema import StoredSchema
from ..handle import TableHandle
from ..log.version import Version
from ..log.version_log import PointerLog
from ..mirrors.types import check_mirrored
from ..storage.retry import RetryingStore


def first_version(
    schema: pa.Schema,
    format_version: int,
    properties: dict[str, Any] | None,
    mirrors: Sequence[str] | None,
    scope: str = TABLE,
) -> Manifest:
    """The empty version 0 of a new table (of ``scope``: a database's table takes fewer
    properties); ``InvalidArgumentError`` for anything wrong. The format version is raised
    to what its properties need (format/properties.py)."""
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    check_schema(schema)
    if type(format_version) is not int or not 1 <= format_version <= FORMAT_VERSION:
        raise InvalidArgumentError(f"format_version must be 1 to {FORMAT_VERSION}, not {format_version!r}")
    if format_version == 1 and properties is not None:
        raise InvalidArgumentError("properties apply to format version 2 tables only")
    props = Properties.of(properties, scope)
    check_layout(props, schema)
    wanted = requested(mirrors) if mirrors is not None else {}
    if wanted and format_version == 1:
        raise InvalidArgumentError("mirrors apply to format version 2 tables only")
    ids = tuple(range(1, len(schema) + 1))
    check_mirrored(plain(schema), wanted)
    index = FileIndex(len(ids), props, Totals(0, 0, 0, 0)) if format_version > 1 else None
    return Manifest(
        version=0,
        parent_version=None,
        timestamp_ms=int(time.time() * 1000),
        commit_id=uuid.uuid4().hex,
        operation="create",
        stored_schema=StoredSchema.of(schema, ids if index is not None else None),
        tail=(),
        format_version=max(format_version, props.format_version) if index is not None else 1,
        index=index,
        mirrors=merged({}, wanted),
    )


def create(handle: TableHandle, empty: Manifest) -> None:
    """Steps 2-4 for ``empty`` (``first_version``) at ``handle``'s location."""
    create_log(handle.store, handle.log, empty, TableExistsError(f"a table already exists at {handle.uri}"))
    if empty.mirrors:
        from ..mirrors.sync import after_commit

        after_commit(handle.log, Version.of(empty, handle.log.segments))


def create_log(
    store: RetryingStore, log: PointerLog[Any], first: Manifest | DatabaseVersion, exists: ManifestTableError
) -> None:
    """Steps 2-4 (but mirrors) for the first version of any log: a table's, a database's."""
    if store.head(POINTER_KEY) is not None:
        raise exists
    _create_first_version(store, log, first, exists)
    try:
        store.put_if_absent(POINTER_KEY, encode_pointer(0))
    except (PreconditionFailed, StoreError):
        pass  # it exists (a reader repaired it first) or will be repaired by the next reader


def _create_first_version(
    store: RetryingStore, log: PointerLog[Any], first: Manifest | DatabaseVersion, exists: ManifestTableError
) -> None:
    """Step 3."""
    policy = store.policy
    for attempt in range(policy.attempts):
        try:
            store.put_if_absent(manifest_key(0), first.to_json())
            return
        except PreconditionFailed:
            raise exists from None
        except StoreError:
            found = log.find(0)
            if found is not None:
                if found.commit_id != first.commit_id:
                    raise exists from None
                return
            if attempt + 1 == policy.attempts:
                raise
            policy.wait(attempt)

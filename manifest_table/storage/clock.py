"""The store's clock: what garbage collection measures object ages on (docs/protocol.md,
"Time"). An object's ``last_modified`` is stamped by the store, so its age is only meaningful
against the store's own "now"; this host's clock may be minutes off."""

from __future__ import annotations

import uuid
from datetime import datetime

from ..errors import StoreError
from .base import ObjectStore

CLOCK_PROBE_PREFIX = "_clock-probe-"
"""Probe objects live at the root, outside every prefix a table or database lists."""


def store_now(store: ObjectStore) -> datetime:
    """The store's time now: the ``last_modified`` the store gives a probe object created for
    the purpose (then deleted). It is a moment before this call returns, never after, which
    is the safe side for GC: its cutoff can only be earlier than the true one."""
    key = f"{CLOCK_PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        store.put_if_absent(key, b"")
    except StoreError:
        if store.head(key) is None:  # a create that failed may still have landed
            raise
    try:
        info = store.head(key)
        if info is None:
            raise StoreError(f"the store lost {key} right after creating it")
        return info.last_modified
    finally:
        store.delete_unreferenced([key])

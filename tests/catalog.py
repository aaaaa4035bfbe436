"""The bad-input catalog's one assertion: a user mistake raises a typed error from
``manifest_table.errors`` and leaves every byte of the table as it was.

Catalog tests live in ``tests/inputs/test_bad_input_*.py``; each case is one call of
``assert_rejected``. "Every byte" means every object the store lists with its content and,
for a local directory, every file under the root including hidden temp files, so a failed
operation that leaves a half-written temp file behind is caught too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from manifest_table.errors import ManifestTableError
from manifest_table.storage import LocalStore, ObjectStore

_LOCK_FILE = ".cas.lock"  # LocalStore's flock target: created once, never holds data


def object_listing(store: ObjectStore) -> dict[str, bytes]:
    """Every object of the table with its bytes."""
    if isinstance(store, LocalStore):
        found: dict[str, bytes] = {}
        for dirpath, _, filenames in os.walk(store.root):
            for name in filenames:
                if name == _LOCK_FILE:
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, store.root).replace(os.sep, "/")] = f.read()
        return found
    return {info.key: store.get(info.key) for info in store.list()}


def assert_rejected(store: ObjectStore, error: type[ManifestTableError], call: Callable[[], Any],
                    match: str | None = None) -> pytest.ExceptionInfo:
    """``call()`` raises ``error`` (a typed error of ours, message matching ``match``) and the
    table's objects are byte-identical before and after."""
    assert issubclass(error, ManifestTableError), f"{error} is not a manifest_table error"
    before = object_listing(store)
    with pytest.raises(error, match=match) as caught:
        call()
    after = object_listing(store)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert not (added or removed or changed), f"objects added {added}, removed {removed}, changed {changed}"
    return caught

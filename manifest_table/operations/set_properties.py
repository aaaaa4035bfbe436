"""Setting table properties (docs/format.md, "Properties"): one commit whose change is the
properties it sets, applied to the properties of whatever version it lands on, so it rebases
onto every concurrent commit (the last of two commits setting one property wins). The first
property release 0.3.0 does not know raises the table to format version 3 (commit/builder.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import Changes
from ..errors import UpgradeRequiredError
from ..format.layout import check_layout
from ..format.properties import REGISTRY, parse_updates
from ..handle import TableHandle


def set_properties(handle: TableHandle, properties: Mapping[str, Any]) -> CommitInfo:
    """See ``Table.set_properties``."""
    updates = parse_updates(properties, handle.property_scope)
    started = Stamp.now()
    base, pointer = handle.log.latest()
    if base.index is None:
        raise UpgradeRequiredError(
            f"table properties need format version 2: run upgrade first (Table.upgrade(), "
            f"CLI: manifest-table upgrade {handle.uri}); nothing was committed"
        )
    check_layout(base.properties.updated(updates), base.schema)
    if not updates:
        return CommitInfo(base.version, "set_properties", base.timestamp, None, {}, committed=False)
    shown = {name: None if value is None else REGISTRY[name].to_json(value) for name, value in updates.items()}
    changes = Changes(operation="set_properties", properties=updates, parameters={"properties": shown})
    return commit(handle.log, base, pointer, changes, handle.commit_options, started)

"""Upgrade: move a format-v1 table to format v2 (docs/format.md) in one commit that lists the
same files, written into segments (commit/builder.py); versions before it stay readable. A v2
table is left as it is, and an upgrade that loses to another one commits nothing
(commit/conflicts.py, ``check_for_upgrade_already_made``)."""

from __future__ import annotations

from typing import Any

from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import Changes
from ..format.layout import check_layout
from ..format.properties import TABLE, Properties
from ..handle import TableHandle


def upgrade(handle: TableHandle, properties: dict[str, Any] | None = None) -> CommitInfo:
    """See ``Table.upgrade``."""
    props = Properties.of(properties, TABLE)
    started = Stamp.now()
    base, pointer = handle.log.latest()
    if base.index is not None:
        return CommitInfo(base.version, "upgrade", base.timestamp, None, {}, committed=False)
    check_layout(props, base.schema)
    changes = Changes(operation="upgrade", upgrade=props, parameters={"format_version": max(2, props.format_version)})
    return commit(handle.log, base, pointer, changes, handle.commit_options, started)

"""Setting which formats a table is mirrored to (docs/mirrors.md): one commit that records the
setting, after which the commit itself writes the mirrors of its version (commit/
table_commit.py). A setting the table already has commits nothing and only brings the
mirrors up to date (mirrors/sync.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..clock import Stamp
from ..commit import CommitInfo, commit
from ..commit.changes import Changes
from ..errors import UpgradeRequiredError
from ..format.mirrors import ICEBERG, merged, requested
from ..handle import TableHandle
from ..mirrors.types import check_mirrored


def set_mirrors(handle: TableHandle, mirrors: Sequence[str] | Mapping[str, Mapping[str, Any]]) -> CommitInfo:
    """See ``Table.set_mirrors``."""
    wanted = requested(mirrors)
    started = Stamp.now()
    base, pointer = handle.log.latest()
    if base.index is None:
        raise UpgradeRequiredError("mirrors need format version 2 (field ids): run table.upgrade() first")
    check_mirrored(base.fields, wanted)
    if ICEBERG in wanted and ICEBERG not in base.mirrors:
        from ..mirrors.dropped import check_dropped_columns

        check_dropped_columns(base, handle.io)
    if merged(base.mirrors, wanted) == base.mirrors:
        from ..mirrors.sync import sync  # (fastavro and the mirror writers load on use)

        sync(handle.log, handle.log.manifest(handle.log.read_pointer().version))
        return CommitInfo(base.version, "set_mirrors", base.timestamp, None, {}, committed=False)
    changes = Changes(operation="set_mirrors", mirrors=wanted, parameters={"mirrors": sorted(wanted)})
    return commit(handle.log, base, pointer, changes, handle.commit_options, started)

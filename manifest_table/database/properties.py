"""Setting a database's properties (``gc_grace``: docs/databases.md): one database commit
that writes no table, applied to the properties of whatever version it lands on. The first
property raises the database to format version 2, which release 0.3.0 refuses (it would drop
it when committing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clock import Stamp
from ..commit import CommitInfo
from ..commit.loop import commit as commit_loop
from ..format.properties import DATABASE, parse_updates
from .commit import DatabaseProposal
from .handle import DatabaseHandle
from .transaction import database_commit_info


def set_database_properties(db: DatabaseHandle, properties: Mapping[str, Any]) -> CommitInfo:
    """See ``Database.set_properties``."""
    updates = parse_updates(properties, DATABASE)
    started = Stamp.now()
    base, pointer = db.log.latest()
    if not updates:
        return CommitInfo(base.version, "set_properties", base.timestamp, None, committed=False)
    proposal = DatabaseProposal(db.log, [], properties=updates)
    return database_commit_info(commit_loop(db.log, proposal, base, pointer, db.commit_options, started))

"""A database commit as the commit loop's proposal (commit/loop.py drives a database's log
exactly as a table's), docs/design/003-databases.md:

1. Each table the commit writes is a ``TablePart``: the table's own proposal (its changes,
   built and rebased by the single-table code), and the root it built.
2. ``build``: write the root of each part whose base root changed since its last build (a
   root built on the same base is reused: a race lost to commits on other tables costs no
   re-plan and no new root), then the next database version naming every table's root.
3. ``rebase`` onto a winner, table by table: a table the winner did not touch rebases
   trivially; one it wrote to rebases by the single-table conflict matrix; the catalog
   conflicts (names created, dropped or renamed by both) raise ``CommitConflictError``.
4. ``discard``: nothing landed: remove every object staged for the commit."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..commit.table_commit import TableProposal
from ..errors import CommitConflictError
from ..format.database import DatabaseVersion, TableChange, TableRef, at_version, encode_root, new_root_key
from ..format.manifest import Manifest
from ..log.segments import SegmentReader
from ..log.version import Version
from .log import DatabaseLog


class TableOfDatabase(Protocol):
    """What a part needs of its table's log (``table_log.DatabaseTableLog``, which builds parts)."""

    name: str
    table_id: str
    database: DatabaseLog
    segments: SegmentReader

    def at(self, db: DatabaseVersion) -> Version | None: ...


class TablePart:
    """One table a database commit writes or creates (``created``: its first state)."""

    def __init__(self, log: TableOfDatabase, proposal: TableProposal | None, created: Manifest | None = None) -> None:
        self.log, self.proposal, self.created = log, proposal, created
        self.name, self.table_id = log.name, log.table_id
        self.root: str | None = None
        self.built_on: str | None = None
        self.change = TableChange("create_table")
        self.written: list[str] = []

    def _base(self, prev: DatabaseVersion) -> tuple[str | None, Version]:
        """The key of the root this part builds on (None for a new table), and its version."""
        ref = prev.tables.get(self.name)
        if self.created is not None:
            if ref is not None:
                raise CommitConflictError(
                    f"table {self.name!r} was created by a concurrent commit "
                    f"(version {prev.version}); nothing was committed"
                )
            return None, Version.of(at_version(self.created, prev, self.table_id), self.log.segments)
        found = self.log.at(prev) if ref is not None and ref.id == self.table_id else None
        if ref is None or found is None:
            raise CommitConflictError(
                f"table {self.name!r} was dropped or renamed by a concurrent commit "
                f"(version {prev.version} no longer has it); nothing was committed"
            )
        return ref.root, found

    def build(self, prev: DatabaseVersion, commit_id: str) -> TableRef:
        built_on, table = self._base(prev)
        if self.root is None or self.built_on != built_on:
            state: Manifest = table if self.proposal is None else self.proposal.build(table, commit_id)
            key = new_root_key(self.table_id)
            self.log.database.store.put_if_absent(key, encode_root(state))
            self.log.database.remember_root(key, state)
            self.root, self.built_on = key, built_on
            self.written.append(key)
            operation = "create_table" if self.created is not None else state.operation
            self.change = TableChange(operation, state.metrics, state.parameters)
        return TableRef(self.table_id, self.root)

    def rebase(self, prev: DatabaseVersion, winner: DatabaseVersion) -> None:
        built_on, table = self._base(prev)
        winner_root, _ = self._base(winner)
        if winner_root == built_on:
            return  # the winner did not touch this table
        if self.proposal is not None:
            successor = self.log.at(winner)
            assert successor is not None  # _base checked it
            self.proposal.rebase(table, successor)
        self.invalidate()

    def invalidate(self) -> None:
        """The last root built can never land: remove it and what only it references."""
        if self.root is not None:
            if self.proposal is not None:
                self.proposal.lost()
            self.log.database.store.delete_unreferenced([self.root])
            self.written.remove(self.root)
            self.root = None

    def discard(self) -> None:
        if self.proposal is not None:
            self.proposal.discard()
        self.log.database.store.delete_unreferenced(self.written)


class DatabaseProposal:
    """A database commit: the tables it writes or creates, the ones it drops (name -> id)
    and renames (old name -> (id, new name)), and the database properties it sets."""

    def __init__(
        self,
        log: DatabaseLog,
        parts: Sequence[TablePart],
        drops: Mapping[str, str] | None = None,
        renames: Mapping[str, tuple[str, str]] | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        self._log, self.parts = log, list(parts)
        self.drops, self.renames = dict(drops or {}), dict(renames or {})
        self.properties = dict(properties or {})

    def operation(self) -> str:
        actions = (
            [p.change.operation for p in self.parts]
            + ["drop_table"] * len(self.drops)
            + ["rename_table"] * len(self.renames)
            + ["set_properties"] * bool(self.properties)
        )
        return actions[0] if len(actions) == 1 else "transaction"

    def build(self, prev: DatabaseVersion, commit_id: str) -> DatabaseVersion:
        prev.properties.check_writable(f"database {self._log.location}")
        tables = dict(prev.tables)
        for name, table_id in self.drops.items():
            _check_catalog(prev, name, table_id)
            del tables[name]
        for old, (table_id, new) in self.renames.items():
            _check_catalog(prev, old, table_id, new)
            tables[new] = tables.pop(old)
        changed = {}
        for part in self.parts:
            tables[part.name] = part.build(prev, commit_id)
            changed[part.table_id] = part.change
        return DatabaseVersion(
            version=prev.version + 1,
            parent_version=prev.version,
            timestamp_ms=max(int(time.time() * 1000), prev.timestamp_ms + 1),  # monotonic for as_of
            commit_id=commit_id,
            operation=self.operation(),
            tables=tables,
            changed=changed,
            created=tuple(p.name for p in self.parts if p.created is not None),
            dropped=tuple(self.drops),
            renamed={old: new for old, (_, new) in self.renames.items()},
            properties=prev.properties.updated(self.properties),
            format_version=prev.format_version,
        )

    def rebase(self, prev: DatabaseVersion, winner: DatabaseVersion) -> None:
        for name, table_id in self.drops.items():
            _check_catalog(winner, name, table_id)
            if table_id in winner.changed:
                raise CommitConflictError(
                    f"table {name!r}, which this commit drops, was written by a concurrent "
                    f"commit (version {winner.version}); nothing was committed"
                )
        for old, (table_id, new) in self.renames.items():
            _check_catalog(winner, old, table_id, new)
        for part in self.parts:
            part.rebase(prev, winner)

    def lost(self) -> None:
        """Nothing to remove: each part's root stays valid until a winner writes its table
        (``TablePart.rebase``)."""

    def discard(self) -> None:
        for part in self.parts:
            part.discard()


def _check_catalog(db: DatabaseVersion, name: str, table_id: str, new_name: str | None = None) -> None:
    """``name`` still names table ``table_id`` at ``db`` (and ``new_name`` is free)."""
    ref = db.tables.get(name)
    if ref is None or ref.id != table_id:
        raise CommitConflictError(
            f"table {name!r} was dropped or renamed by a concurrent commit "
            f"(version {db.version}); nothing was committed"
        )
    if new_name is not None and new_name in db.tables:
        raise CommitConflictError(
            f"table {new_name!r} was created by a concurrent commit (version {db.version}); nothing was committed"
        )

"""A database commit as the commit loop's proposal (commit/loop.py drives a database's log
exactly as a table's), docs/design/003-databases.md:

1. Each table the commit writes is a ``TablePart``: the table's own proposal (its changes,
   built and rebased by the single-table code), and the root it built.
2. ``build``: write the root of each part whose base root changed since its last build (a
   root built on the same base is reused: a race lost to commits on other tables costs no
   re-plan and no new root), then the next database version naming every table's root.
   The catalog change (catalog.py) is applied to the previous version's names first, and a
   name claimed twice or taken meanwhile is refused, never overwritten: the last check before
   the write.
3. ``rebase`` onto a winner, table by table: a table the winner did not touch rebases
   trivially; one it wrote to rebases by the single-table conflict matrix; the catalog
   conflicts (names created, dropped or renamed by both) raise ``CommitConflictError``.
4. ``discard``: nothing landed: remove every object staged for the commit."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..commit.table_commit import TableProposal
from ..errors import CommitConflictError, TableExistsError
from ..format.database import DatabaseVersion, TableChange, TableRef, at_version, encode_root, new_root_key
from ..format.manifest import Manifest
from ..log.segments import SegmentReader
from ..log.version import Version
from ..log.version_log import VersionLog
from .catalog import CatalogChange
from .log import DatabaseLog


class TableOfDatabase(Protocol):
    """What a part needs of its table's log (``table_log.DatabaseTableLog``, which builds parts)."""

    name: str
    table_id: str
    database: DatabaseLog
    segments: SegmentReader

    def at(self, db: DatabaseVersion) -> Version | None: ...


class TablePart:
    """One table a database commit writes or creates (``created``: its first state).
    ``base_name``: its name at the version the commit was staged on (None if created)."""

    def __init__(
        self,
        log: TableOfDatabase,
        proposal: TableProposal | None,
        created: Manifest | None = None,
        base_name: str | None = None,
    ) -> None:
        self.log, self.proposal, self.created = log, proposal, created
        self.table_id, self.base_name = log.table_id, base_name
        self.root: str | None = None
        self.built_on: str | None = None
        self.change = TableChange("create_table")
        self.written: list[str] = []

    def _base(self, prev: DatabaseVersion) -> tuple[str | None, Version]:
        """The key of the root this part builds on (None for a new table), and its version."""
        if self.created is not None:
            return None, Version.of(at_version(self.created, prev, self.table_id), self.log.segments)
        name = prev.names.get(self.table_id)
        found = self.log.at(prev)
        if name is None or name != self.base_name or found is None:
            raise CommitConflictError(_moved(self.base_name, name, prev))
        return prev.tables[name].root, found

    def build(self, prev: DatabaseVersion, commit_id: str) -> TableRef:
        built_on, table = self._base(prev)
        if self.root is None or self.built_on != built_on:
            state: Manifest = table if self.proposal is None else self.proposal.build(table, commit_id)
            key = new_root_key(self.table_id)
            self.log.database.store.put_new(key, encode_root(state))
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
    """A database commit: the tables it writes or creates (one part per table id), its net
    change to the catalog (tables dropped, renamed and created, by id), and the database
    properties it sets."""

    def __init__(
        self,
        log: DatabaseLog,
        parts: Sequence[TablePart],
        catalog: CatalogChange | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        self._log, self.parts = log, list(parts)
        self.catalog = catalog or CatalogChange(-1)
        self.properties = dict(properties or {})

    def operation(self) -> str:
        actions = (
            [p.change.operation for p in self.parts]
            + ["drop_table"] * len(self.catalog.dropped)
            + ["rename_table"] * len(self.catalog.renamed)
            + ["set_properties"] * bool(self.properties)
        )
        return actions[0] if len(actions) == 1 else "transaction"

    def build(self, prev: DatabaseVersion, commit_id: str) -> DatabaseVersion:
        prev.properties.check_writable(f"database {self._log.location}")
        tables = self._catalog_at(prev)
        changed = {}
        for part in self.parts:
            tables[self._name_of(part, prev)] = part.build(prev, commit_id)
            changed[part.table_id] = part.change
        catalog = self.catalog
        return DatabaseVersion(
            version=prev.version + 1,
            parent_version=prev.version,
            timestamp_ms=max(int(time.time() * 1000), prev.timestamp_ms + 1),  # monotonic for as_of
            commit_id=commit_id,
            operation=self.operation(),
            tables=tables,
            changed=changed,
            created=tuple(catalog.created.values()),
            dropped=tuple(catalog.dropped.values()),
            renamed=dict(catalog.renamed.values()),
            properties=prev.properties.updated(self.properties),
            format_version=prev.format_version,
        )

    def _catalog_at(self, db: DatabaseVersion) -> dict[str, TableRef]:
        """``db``'s tables with this commit's catalog change applied (a created table's entry
        is its part's to add). ``CommitConflictError`` when a concurrent commit dropped or
        renamed a table it drops or renames, or took a name it claims; ``TableExistsError``
        when it claims a name twice or one its own base holds (its transaction refuses both
        when staged: this is the check just before the write)."""
        catalog, tables = self.catalog, dict(db.tables)
        leaving = {**catalog.dropped, **{tid: old for tid, (old, _) in catalog.renamed.items()}}
        for table_id, name in leaving.items():
            ref = db.tables.get(name)
            if ref is None or ref.id != table_id:
                raise CommitConflictError(_moved(name, db.names.get(table_id), db))
            del tables[name]
        claims: list[tuple[str, TableRef | None]] = [(new, db.tables[old]) for old, new in catalog.renamed.values()]
        claims += [(name, None) for name in catalog.created.values()]
        claimed: set[str] = set()
        for name, ref in claims:
            if name in claimed or (name in tables and db.version == catalog.base_version):
                raise TableExistsError(f"this commit names two tables {name!r}; nothing was committed")
            if name in tables:
                raise CommitConflictError(
                    f"the name {name!r} was taken by a concurrent commit (version {db.version} has a "
                    "table of that name); nothing was committed"
                )
            claimed.add(name)
            if ref is not None:
                tables[name] = ref
        return tables

    def _name_of(self, part: TablePart, db: DatabaseVersion) -> str:
        """The name a table this commit writes has once it lands (``db``: the version it
        builds on, where ``_catalog_at`` and the part checked its name)."""
        catalog, table_id = self.catalog, part.table_id
        if table_id in catalog.dropped:
            raise TableExistsError(f"this commit writes table {part.base_name!r} and drops it; nothing was committed")
        if table_id in catalog.created:
            return catalog.created[table_id]
        if table_id in catalog.renamed:
            return catalog.renamed[table_id][1]
        return db.names[table_id]

    def rebase(self, prev: DatabaseVersion, winner: DatabaseVersion) -> None:
        self._catalog_at(winner)
        for table_id, name in self.catalog.dropped.items():
            if table_id in winner.changed:
                raise CommitConflictError(
                    f"table {name!r}, which this commit drops, was written by a concurrent "
                    f"commit (version {winner.version}); nothing was committed"
                )
        for part in self.parts:
            part.rebase(prev, winner)

    def lost(self) -> None:
        """Nothing to remove: each part's root stays valid until a winner writes its table
        (``TablePart.rebase``)."""

    def write_mirrors(self, committed: DatabaseVersion) -> None:
        """After the commit point: the mirrors of each table this commit wrote, best effort,
        by the hook a table's own commit calls (mirrors/sync.py)."""
        for part in self.parts:
            table = part.log.at(committed)
            if table is not None and table.mirrors:
                assert isinstance(part.log, VersionLog)  # (a DatabaseTableLog)
                from ..mirrors.sync import after_commit  # (fastavro and the writers load on use)

                after_commit(part.log, table)

    def discard(self) -> None:
        for part in self.parts:
            part.discard()


def _moved(name: str | None, now: str | None, db: DatabaseVersion) -> str:
    """Table ``name`` is gone from ``db`` (``now``: the name it has there instead)."""
    what = "dropped" if now is None else f"renamed to {now!r}"
    return f"table {name!r} was {what} by a concurrent commit (version {db.version}); nothing was committed"

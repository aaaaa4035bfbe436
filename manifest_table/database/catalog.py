"""The catalog a database transaction stages (docs/databases.md): the names of the version it
reads, with its creates, drops and renames applied in the order they were made.

Every catalog change is checked when it is staged against the catalog as the transaction
leaves it, so ``rename a -> c`` then ``rename b -> c`` is refused at the second call, and a
swap (``a -> tmp``, ``b -> a``, ``tmp -> b``) or a drop and re-create of one name is one
commit. What the commit writes is the net change per table id (``CatalogChange``), which the
database commit applies to each version it builds on and checks once more just before the
write (database/commit.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import TableExistsError, TableNotFoundError
from ..format.database import check_table_name, new_table_id


@dataclass(frozen=True)
class CatalogChange:
    """A commit's net change to the catalog of version ``base_version``, by table id."""

    base_version: int
    dropped: Mapping[str, str] = field(default_factory=dict)
    """Table id -> its name at the base version."""
    renamed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Table id -> (its name at the base version, its new name)."""
    created: Mapping[str, str] = field(default_factory=dict)
    """Table id -> its name."""

    def is_empty(self) -> bool:
        return not (self.dropped or self.renamed or self.created)


class StagedCatalog:
    """Name -> table id as a transaction leaves the catalog: the one place a transaction asks
    whether a name is taken and which table it names. ``where`` names the database and the
    version staged on, for messages."""

    def __init__(self, base_version: int, names: Mapping[str, str], where: str) -> None:
        self._base_version, self._where = base_version, where
        self._at_base = {table_id: name for name, table_id in names.items()}
        self._names = dict(names)
        self._created: set[str] = set()
        self._why: dict[str, str] = {}
        """What this transaction did to a name (for messages)."""

    def id_of(self, name: str) -> str:
        """The id of the table ``name`` names now; ``TableNotFoundError`` if none."""
        check_table_name(name)
        found = self._names.get(name)
        if found is None:
            raise TableNotFoundError(f"no table {name!r} in {self._where}{self._reason(name)}")
        return found

    def base_name(self, table_id: str) -> str | None:
        """The name of table ``table_id`` at the base version (None: created here)."""
        return self._at_base.get(table_id)

    def create(self, name: str) -> str:
        """Stage creating table ``name``; returns its new id."""
        self._free(name)
        table_id = self._names[name] = new_table_id()
        self._created.add(table_id)
        self._why[name] = "this transaction created it"
        return table_id

    def drop(self, name: str) -> str:
        """Stage dropping table ``name``; returns its id."""
        table_id = self.id_of(name)
        del self._names[name]
        self._created.discard(table_id)
        self._why[name] = "this transaction dropped it"
        return table_id

    def rename(self, old: str, new: str) -> str:
        """Stage renaming table ``old`` to ``new``; returns its id."""
        table_id = self.id_of(old)
        self._free(new)
        self._names[new] = self._names.pop(old)
        self._why[old] = f"this transaction renamed it to {new!r}"
        self._why[new] = f"this transaction renamed {old!r} to it"
        return table_id

    def _free(self, name: str) -> None:
        check_table_name(name)
        if name in self._names:
            raise TableExistsError(f"a table {name!r} already exists in {self._where}{self._reason(name)}")

    def _reason(self, name: str) -> str:
        why = self._why.get(name)
        return f" ({why})" if why else ""

    def change(self) -> CatalogChange:
        """The net change: what happened to each table of the base, and what was created."""
        now = {table_id: name for name, table_id in self._names.items()}
        return CatalogChange(
            self._base_version,
            dropped={tid: name for tid, name in self._at_base.items() if tid not in now},
            renamed={tid: (name, now[tid]) for tid, name in self._at_base.items() if now.get(tid, name) != name},
            created={tid: now[tid] for tid in self._created},
        )

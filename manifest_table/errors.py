"""Typed errors. Every user-facing failure is one of these, so callers (and the CLI) can tell
a bad request from a lost race from a broken store."""


class ManifestTableError(Exception):
    """Base class of every error this library raises on purpose."""


# --- storage ---------------------------------------------------------------------------
class StoreError(ManifestTableError):
    """The object store failed in a way that is not a precondition or a missing key."""


class NotFound(StoreError):
    """The key does not exist."""


class PreconditionFailed(StoreError):
    """A conditional write lost: the key exists (put_if_absent) or its etag moved (put_if_match)."""


class RateLimited(StoreError):
    """The store refused a write, unapplied, because that object is written too often (GCS
    answers 429 to more than about one write per second to one object name): the same write
    may succeed a moment later."""


class SyncFailedError(StoreError):
    """A local object could not be written or made durable (a full disk, a failed
    ``fsync``): it was removed, the write that would have named it (or made it visible) was
    not made, and repeating that write cannot help."""


# --- tables ----------------------------------------------------------------------------
class TableExistsError(ManifestTableError):
    """create_table found a table already at the location."""


class TableNotFoundError(ManifestTableError):
    """open_table found no table at the location."""


class TableRenamedError(TableNotFoundError):
    """A write through a handle on a database's table that was renamed since the handle was
    opened: the message names the table's new name (open it by that name to write). Reads
    through the handle keep following the table (docs/databases.md)."""


# --- databases (docs/databases.md) ----------------------------------------------------
class DatabaseExistsError(ManifestTableError):
    """create_database found a database, or a table, already at the location."""


class DatabaseNotFoundError(ManifestTableError):
    """open_database found no database at the location (nothing, or a table)."""


class CorruptTableError(ManifestTableError):
    """An object of the table does not parse or breaks an invariant of the format."""


class UnsupportedTableError(ManifestTableError):
    """The table (or database) uses something this release cannot write, set by a newer
    release: upgrade manifest_table. Nothing was written."""


class VersionNotFoundError(ManifestTableError):
    """The requested version (or timestamp) is not in the table's history."""


class VersionExpiredError(VersionNotFoundError):
    """The requested version existed but garbage collection has removed it."""


class ChangeCommitError(ManifestTableError):
    """A streaming read of appended rows met a commit that deleted or updated rows (the
    ``skipChangeCommits`` option skips such commits instead: docs/spark.md)."""


class SchemaMismatchError(ManifestTableError):
    """Data written to a table does not match the table's schema."""


class InvalidFilterError(ManifestTableError, ValueError):
    """A filter expression does not parse, names an unknown column or compares with a wrong type."""


class CommitConflictError(ManifestTableError):
    """A concurrent commit changed what this commit read, so it cannot be rebased."""


class CommitFailedError(ManifestTableError):
    """A commit gave up: its message says whether nothing was committed (retry budget
    exhausted, store failing before the commit point), the outcome is unknown, or it landed
    and only the pointer could not be advanced (then it names the commit id and version)."""


class InputFileError(ManifestTableError):
    """A file given to the CLI (``append``, ``create --like``) does not parse: the user's data, not a bug."""


class InvalidArgumentError(ManifestTableError, ValueError):
    """An argument has a value that makes no sense (negative size, retention below grace, ...)."""


class NotSupportedError(InvalidArgumentError):
    """An option that this engine does not implement (Spark's upsert with ``columns``); the
    message names it and what to use instead. Nothing was written."""


class DuplicateKeyError(InvalidArgumentError):
    """An upsert's source holds the same key more than once: which row would win is undefined."""


class SchemaEvolutionError(ManifestTableError, ValueError):
    """A schema change that cannot be made (a rename onto an existing name, a narrowing, ...);
    nothing was committed."""


class UpgradeRequiredError(SchemaEvolutionError):
    """The change (a schema change, mirrors, properties) needs format version 2: run
    ``Table.upgrade()`` first."""


class MirrorTypeError(InvalidArgumentError, SchemaEvolutionError):
    """A column (or a schema change) that a mirror's format cannot represent while that
    mirror is on (docs/mirrors.md, "Types"); the message names the column and the mirror.
    Nothing was committed."""

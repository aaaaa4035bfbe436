"""The options of the Spark data source, parsed once on the driver into a picklable value.

Spark hands every option over as a string in a case-insensitive map whose keys arrive lower
case; the table URI arrives as ``path`` (``load(uri)`` / ``save(uri)`` / ``start(uri)``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime

from ..arguments import check_location, check_time, parse_size
from ..data.write import WriteOptions
from ..database import DatabaseTable
from ..database.database import database_above
from ..entry_points import open_table
from ..errors import InvalidArgumentError, TableNotFoundError
from ..expressions import Expr, to_expr
from ..format.database import table_prefix
from ..handle import retrying
from ..storage import ObjectStore, store_for_uri
from ..table import Table

STORAGE_KEYS = (
    "endpoint_url",
    "region",
    "access_key_id",
    "secret_access_key",
    "session_token",  # S3
    "project",
    "token",  # GCS (and endpoint_url)
    "account_name",
    "account_key",
    "connection_string",
)  # Azure (and endpoint_url)
"""Storage options passed to ``open_table(uri, storage_options=...)`` (docs/python-api.md);
unset ones come from the provider's standard chain of whichever process (driver or executor)
opens the store."""

STREAM_OPTIONS = (
    "startingVersion",
    "startingTimestamp",
    "maxFilesPerTrigger",
    "maxBytesPerTrigger",
    "skipChangeCommits",
    "readChangeFeed",
)
"""Options of streaming reads (spark.readStream), named as Delta's are."""

KNOWN_OPTIONS = frozenset(
    {
        "path",
        "version",
        "as_of",
        "pushdown",
        "min_partitions",
        "max_partition_bytes",
        "target_file_size",
        "row_group_size",
        "compression",
        "where",
        "requirematch",
        "app_id",
        "checkpointlocation",
        *STORAGE_KEYS,
        *(name.lower() for name in STREAM_OPTIONS),
    }
)
"""Every option the data source understands, in the lower case Spark hands them over in."""

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""Like ``spark.sql.files.maxPartitionBytes``: the most Parquet bytes one read task gets."""


@dataclass(frozen=True)
class TableLocation:
    """Where a table lives and how to reach it: all a driver or an executor needs to open it."""

    uri: str
    storage_options: dict[str, str] | None = None
    objects: str | None = None
    """Where the table's objects are when not at ``uri``: a database's table, opened as
    ``<database>/<name>``, keeps them under ``<database>/tables/<id>`` (docs/databases.md)."""

    def __post_init__(self) -> None:
        if self.objects is None:  # a database's table was found by opening it
            check_location(self.uri)  # before Spark plans or runs anything

    @classmethod
    def of(cls, uri: str, storage_options: dict[str, str] | None = None) -> TableLocation:
        """The location of the table at ``uri``, resolved on the driver: a database's table
        gets the folder of its objects, which executors read and write (one open of the table)."""
        try:
            table = open_table(uri, storage_options=storage_options)
        except TableNotFoundError:
            _check_not_in_database(uri, storage_options)
            return cls(uri, storage_options)  # a write creates it; a read fails with this error when it opens it
        if isinstance(table, DatabaseTable):
            return cls(uri, storage_options, f"{table.database.uri.rstrip('/')}/{table_prefix(table.table_id)}")
        return cls(uri, storage_options)

    @property
    def objects_uri(self) -> str:
        return self.objects.rstrip("/") if self.objects else self.uri

    def store(self) -> ObjectStore:
        """The store of the table's objects, with safe calls retried as a table handle's are
        (this is what executors write data files and read footers through)."""
        return retrying(store_for_uri(self.objects_uri, self.storage_options))

    def open(self, write_options: WriteOptions | None = None) -> Table:
        """The table; raises ``TableNotFoundError`` when there is none."""
        extra = asdict(write_options) if write_options is not None else {}
        return open_table(self.uri, storage_options=self.storage_options, **extra)


def _check_not_in_database(uri: str, storage_options: dict[str, str] | None) -> None:
    """A Spark write creates a missing standalone table; a missing table of a database is
    created through the database (its id names the folder executors write to)."""
    found = database_above(uri, storage_options, {})
    if found is not None:
        db, name = found
        raise TableNotFoundError(
            f"no table {name!r} in database {db.uri}: create it first "
            "(Database.create_table, or manifest-table create DB_URI/TABLE)"
        )


@dataclass(frozen=True)
class StreamOptions:
    """Where a streaming read starts, how much each micro-batch reads, and what it does with
    commits that delete or update rows (docs/spark.md, "Streaming source")."""

    starting_version: int | str | None = None
    """A version, ``"latest"``, or None: the latest version's rows first."""
    starting_timestamp: datetime | None = None
    max_files: int | None = None
    max_bytes: int | None = None
    skip_change_commits: bool = False
    read_change_feed: bool = False
    """Stream the change rows of each commit (``Table.changes``) instead of appended rows."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        given = options.get("startingversion")
        timestamp = options.get("startingtimestamp")
        if given is not None and timestamp is not None:
            raise InvalidArgumentError("give startingVersion or startingTimestamp, not both")
        version: int | str | None = given
        if given is not None:
            latest = str(given).strip().lower() == "latest"
            version = "latest" if latest else _int(options, "startingversion", 0, name="startingVersion")
        when = check_time(timestamp, "option startingTimestamp") if timestamp is not None else None
        max_bytes = options.get("maxbytespertrigger")
        parsed = cls(
            starting_version=version,
            starting_timestamp=when,
            max_files=_int(options, "maxfilespertrigger", 0, minimum=1, name="maxFilesPerTrigger") or None,
            max_bytes=parse_size(str(max_bytes)) if max_bytes is not None else None,
            skip_change_commits=_bool(options, "skipchangecommits", name="skipChangeCommits"),
            read_change_feed=_bool(options, "readchangefeed", name="readChangeFeed"),
        )
        if parsed.read_change_feed and parsed.skip_change_commits:
            raise InvalidArgumentError("skipChangeCommits applies to the append stream, not with readChangeFeed")
        if parsed.read_change_feed and version is None and when is None:
            raise InvalidArgumentError(
                "readChangeFeed streams the changes of commits from startingVersion (a version, or latest) "
                "or startingTimestamp: give one (to begin with the table's rows, read version V and stream "
                "the changes from startingVersion V + 1)"
            )
        return parsed

    def given(self) -> list[str]:
        """The streaming options set (a batch read refuses them)."""
        values = (
            self.starting_version,
            self.starting_timestamp,
            self.max_files,
            self.max_bytes,
            self.skip_change_commits or None,
            self.read_change_feed or None,
        )
        return [name for name, value in zip(STREAM_OPTIONS, values) if value is not None]


@dataclass(frozen=True)
class SourceOptions:
    location: TableLocation
    version: int | None = None
    as_of: str | None = None
    write: WriteOptions = WriteOptions()
    pushdown: bool = False
    """Accept Spark's pushed filters (see docs/spark.md for why this is off by default)."""
    min_partitions: int | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    app_id: str | None = None
    """Streaming: the id a query's batch ids are recorded under (default: from the checkpoint)."""
    checkpoint_location: str | None = None
    where: Expr | None = None
    """Overwrite: replace only the rows matching this filter (docs/expressions.md)."""
    require_match: bool = True
    """Overwrite with ``where``: every written row must satisfy it (option ``requireMatch``)."""
    stream: StreamOptions = StreamOptions()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        unknown = sorted(set(options) - KNOWN_OPTIONS)
        if unknown:
            raise InvalidArgumentError(
                f"unknown manifest_table option(s) {unknown}; known options: {sorted(KNOWN_OPTIONS)}"
            )
        uri = options.get("path")
        if not uri:
            raise InvalidArgumentError("no table URI: use .load(uri), .save(uri) or .start(uri)")
        storage = {key: options[key] for key in STORAGE_KEYS if options.get(key)}
        defaults = WriteOptions()
        write = WriteOptions(
            target_file_size=_int(options, "target_file_size", defaults.target_file_size, minimum=1),
            row_group_size=_int(options, "row_group_size", defaults.row_group_size, minimum=1),
            compression=options.get("compression", defaults.compression),
        )
        version = options.get("version")
        return cls(
            location=TableLocation.of(str(uri), storage or None),
            version=_int(options, "version", 0) if version is not None else None,
            as_of=options.get("as_of"),
            write=write,
            pushdown=_bool(options, "pushdown"),
            min_partitions=_int(options, "min_partitions", 0) or None,
            max_partition_bytes=_int(options, "max_partition_bytes", DEFAULT_MAX_PARTITION_BYTES, minimum=1),
            app_id=options.get("app_id"),
            checkpoint_location=options.get("checkpointlocation"),
            where=to_expr(options["where"]) if options.get("where") else None,
            require_match=_bool(options, "requirematch", default=True, name="requireMatch"),
            stream=StreamOptions.parse(options),
        )

    @property
    def parallelism(self) -> int:
        """How many read tasks to aim for at least (default: the planning machine's cores,
        which in local mode are the executor's)."""
        return self.min_partitions or os.cpu_count() or 1


def _int(options: Mapping[str, str], key: str, default: int, minimum: int = 0, name: str | None = None) -> int:
    """The integer option ``key`` (lower case, as Spark hands it over), named ``name`` in errors."""
    text = options.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"option {name or key} must be an integer, not {text!r}") from None
    if value < minimum:
        raise InvalidArgumentError(f"option {name or key} must be at least {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool = False, name: str | None = None) -> bool:
    """The boolean option ``key`` (lower case, as Spark hands it over), named ``name`` in errors."""
    text = str(options.get(key, str(default))).strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"option {name or key} must be true or false, not {options[key]!r}")
    return text == "true"

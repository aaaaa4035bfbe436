"""A table as a DuckDB view that DuckDB reads with its own Parquet reader.

1. Plan on our side: the snapshot's live data files and, for those with deletes, their
   deleted row positions.
2. Load the deleted positions into a small temporary DuckDB table
   ``(filename, file_row_number)``.
3. Create a temporary view selecting exactly the table's columns: ``read_parquet`` of the
   files without deletes, ``UNION ALL`` ``read_parquet([files with deletes], filename=true,
   file_row_number=true)`` anti-joined with that table on both columns. DuckDB then pushes
   projections and filters into its own scans, which is how its Delta and Iceberg
   extensions apply deletion vectors; rows of files without deletes never meet the join.

Every ``read_parquet`` names its options rather than inherit DuckDB's defaults and settings,
which would change the rows: no hive partitioning (a table under ``.../region=EU/t`` would
read the directory's ``EU`` instead of the column), ``can_have_nan`` (without it DuckDB
trusts footer min/max, which exclude NaN, and drops NaN rows from ``x > 5``: duckdb/duckdb
#25521), ``binary_as_string=false`` (a connection's ``SET binary_as_string`` would read
binary columns as text). A location with glob characters (``*?[``) is read through Arrow:
DuckDB expands them, so a copy of the table in a matching directory would add its rows.

Once the table's schema has changed, files differ from it: each file's footer is read and the
files are grouped by the ``SELECT`` list that maps their columns by field id (renamed columns
aliased, widened ones cast, added ones NULL), one ``read_parquet`` per group.

A location DuckDB cannot read by path (an in-memory or custom store, S3 without the httpfs
extension or without credentials DuckDB accepts) is registered as an Arrow table instead:
the same rows, read by us and held in memory. Either way the view carries a comment marking
it as ours: only such a view is replaced by a later call; a table or view of the user's of
that name is refused. See docs/interop.md.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..arguments import check_string
from ..data.parquet_plan import by_column_plan, deleted_rows, file_location
from ..data.scan import Scan, Snapshot
from ..errors import InvalidArgumentError
from ..format.column_types import rebuilt
from ..format.manifest import DataFile
from ..storage import FileIO, ObjectStore

if TYPE_CHECKING:
    import duckdb

logger = logging.getLogger("manifest_table.interop")

_VIRTUAL = ("filename", "file_row_number")
_READ_OPTIONS = "hive_partitioning=false, can_have_nan=true, binary_as_string=false"
"""Options of every ``read_parquet`` (see the module docstring)."""
_GLOB = re.compile(r"[*?\[]")
"""Characters DuckDB expands in a path."""
_MARK = "manifest_table view of version "
"""The comment on a view ``to_duckdb`` made, followed by the version."""


def register_view(
    con: duckdb.DuckDBPyConnection, name: str, snapshot: Snapshot, io: FileIO, uri: str
) -> duckdb.DuckDBPyRelation:
    """Make ``name`` a temporary view of every live row of ``snapshot`` on ``con`` (replacing
    a view of that name made by an earlier call; any other object of that name is refused)
    and return it as a relation. ``uri`` names the table in the fallback's warning."""
    import duckdb

    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise InvalidArgumentError(f"con must be a duckdb connection, not {type(con).__name__}")
    check_string("the view name", name)
    view, hidden = _quote(name), _quote(f"__manifest_table_deleted_{name}")
    _refuse_theirs(con, name)
    _drop(con, name, view, hidden)
    files = [f for f in snapshot.files if f.live_rows > 0]
    # A real column named like one of DuckDB's virtual ones would hide it from the anti-join.
    clash = set(_VIRTUAL) & set(snapshot.schema.names) and any(f.deletes for f in files)
    root, reason = _native_root(con, io.store) if files else (None, "")
    if clash:
        root, reason = None, f"a column is named like DuckDB's virtual columns {list(_VIRTUAL)}"
    if root is None and files:  # docs/interop.md promises a warning: the whole version is held in memory
        logger.warning(
            "DuckDB cannot read the files of %s by path (%s): registering an in-memory Arrow table instead", uri, reason
        )
    mark = f"COMMENT ON VIEW {view} IS {_literal(f'{_MARK}{snapshot.version}')}"
    if root is not None:
        try:
            con.execute(f"CREATE TEMP VIEW {view} AS {_select(con, root, snapshot, io, files, hidden)}")
            con.execute(mark)
            return con.view(name)
        except duckdb.Error as exc:  # e.g. S3 credentials DuckDB does not have
            logger.warning("DuckDB cannot read %s natively (%s); registering an Arrow table instead", root, exc)
            _drop(con, name, view, hidden)
    con.register(name, Scan(snapshot, io).to_arrow())
    con.execute(mark)
    return con.view(name)


def _select(
    con: duckdb.DuckDBPyConnection, root: str, snapshot: Snapshot, io: FileIO, files: list[DataFile], hidden: str
) -> str:
    """The view's query: one ``read_parquet`` per column plan, the files with deletes
    anti-joined with their deleted positions (loaded into ``hidden``)."""
    paths = [f"{root}/{f.path}" for f in files]
    dirty = [(f, p) for f, p in zip(files, paths) if f.deletes is not None]
    if dirty:
        _load(con, hidden, deleted_rows([f for f, _ in dirty], [p for _, p in dirty], snapshot.deleted))
    parts = []
    read_as = pa.schema([f.with_type(_as_read(f.type)) for f in snapshot.schema])
    types = dict(zip(snapshot.schema.names, map(str, con.from_arrow(read_as.empty_table()).dtypes)))
    for plan, group in by_column_plan(io, snapshot.fields, files).items():
        columns = ", ".join(_column(name, source, cast is not None, types[name]) for name, source, cast in plan)
        clean = [f"{root}/{f.path}" for f in group if f.deletes is None]
        with_deletes = [f"{root}/{f.path}" for f in group if f.deletes is not None]
        if clean:
            parts.append(f"SELECT {columns} FROM read_parquet({_list(clean)}, {_READ_OPTIONS}) AS t")
        if with_deletes:
            parts.append(
                f"SELECT {columns} FROM read_parquet({_list(with_deletes)}, {_READ_OPTIONS}, filename=true, "
                f"file_row_number=true) AS t ANTI JOIN {hidden} AS d USING ({', '.join(_VIRTUAL)})"
            )
    return " UNION ALL ".join(parts)


def _as_read(dtype: pa.DataType) -> pa.DataType:
    """The type DuckDB's ``read_parquet`` gives a column of ``dtype`` in our files, which the
    view's casts and NULLs must match: a duration, which Parquet keeps as a plain INT64, is
    its BIGINT count of the unit (docs/writing.md, "Column types"), not an INTERVAL."""
    dtype = rebuilt(dtype, _as_read)
    return pa.int64() if pa.types.is_duration(dtype) else dtype


def _column(name: str, source: str | None, cast: bool, duck_type: str) -> str:
    """Table column ``name`` read from file column ``source`` (None: the file has none)."""
    if source is None:
        return f"CAST(NULL AS {duck_type}) AS {_quote(name)}"
    if cast:
        return f"CAST(t.{_quote(source)} AS {duck_type}) AS {_quote(name)}"
    return f"t.{_quote(source)} AS {_quote(name)}"


def _native_root(con: duckdb.DuckDBPyConnection, store: ObjectStore) -> tuple[str | None, str]:
    """Where DuckDB can read the data files by path, or None and why not."""
    import duckdb

    location = file_location(store)
    if location is None:  # in memory, gs://, az://: DuckDB's extensions are not given their settings
        return None, f"DuckDB reads local and s3:// files by path only, not those of a {type(store).__name__}"
    scheme, root = location
    if _GLOB.search(root):
        return None, f"DuckDB would expand the glob characters of {root}"
    if scheme == "s3":
        try:  # load an installed httpfs; installing is the user's choice (it downloads)
            con.execute("LOAD httpfs")
        except duckdb.Error:
            return None, "DuckDB has no httpfs extension"
    return root, ""


def _refuse_theirs(con: Any, name: str) -> None:
    """Raise if ``name`` is a table or a view that is not ours (``_MARK``). DuckDB matches
    names without regard to case, and a temporary view would hide an object of any schema."""
    found = con.execute(
        "SELECT 'table', NULL FROM duckdb_tables() WHERE lower(table_name) = lower($1) UNION ALL "
        "SELECT 'view', comment FROM duckdb_views() WHERE lower(view_name) = lower($1) "
        "AND NOT internal",
        [name],
    ).fetchall()
    theirs = [kind for kind, comment in found if not (comment or "").startswith(_MARK)]
    if theirs:
        raise InvalidArgumentError(
            f"{name!r} is a {theirs[0]} on this DuckDB connection; to_duckdb replaces "
            "only views it made: choose another name"
        )


def _drop(con: Any, name: str, view: str, hidden: str) -> None:
    """Remove what an earlier call registered under ``name`` (an Arrow table or a view, and
    the deleted positions): only ever ours, ``_refuse_theirs`` has checked."""
    con.unregister(name)
    con.execute(f"DROP VIEW IF EXISTS {view}")
    con.execute(f"DROP TABLE IF EXISTS {hidden}")


def _load(con: Any, hidden: str, deleted: Any) -> None:
    """Copy the deleted positions into a DuckDB temporary table: scanned natively by every
    query, rather than through Python as a registered Arrow table would be."""
    con.register("__manifest_table_staging", deleted)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {hidden} AS FROM __manifest_table_staging")
    finally:
        con.unregister("__manifest_table_staging")


def _list(paths: list[str]) -> str:
    return "[" + ", ".join(_literal(p) for p in paths) + "]"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"

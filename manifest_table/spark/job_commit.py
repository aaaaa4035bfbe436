"""The one driver-side commit of data files that Spark wrote, shared by the data source's
writers and the native writer: the target table checked (or its schema chosen) before any
task runs, the table created at commit when missing, and cleanup of a job that failed."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

import pyarrow as pa
from pyspark.sql.types import StructType

from ..clock import utc_now
from ..commit import CommitInfo
from ..entry_points import create_table
from ..errors import InvalidArgumentError, ManifestTableError, SchemaMismatchError, TableExistsError, TableNotFoundError
from ..expressions import Expr
from ..format.field_ids import plain
from ..format.manifest import DataFile
from ..format.properties import BLOOM_FILTER_COLUMNS, SORT_BY
from ..operations.overwrite import check_within
from ..storage import FileIO
from ..table import Table
from .options import TableLocation
from .schema import check_write_schema, exchange_schema

log = logging.getLogger("manifest_table.spark")
_REQUIRE_MATCH_REMEDY = "write them anyway with require_match=False (the data source: option requireMatch false)"


class TableCommit:
    """Where a Spark job's files go and how they are committed. Built on the driver before
    the job runs, so a DataFrame that does not fit the table fails before any task starts."""

    def __init__(
        self,
        location: TableLocation,
        frame: StructType,
        overwrite: bool,
        where: Expr | None = None,
        require_match: bool = True,
    ) -> None:
        self.began = utc_now()
        """Before any task of the job wrote a file (the batch writers build this on the
        driver before the job runs; a streaming batch's tasks report when they began)."""
        self.location = location
        self.overwrite = overwrite
        self.where = where
        self.require_match = require_match
        if where is not None and not overwrite:
            raise InvalidArgumentError("where applies to overwrites only; this write appends")
        try:
            table = location.open()
        except TableNotFoundError:  # created at commit, so a failed job leaves no table
            # Nullable columns, as Spark's own file sources create them: a DataFrame's NOT
            # NULL is often an accident of how it was built (range(), literals).
            self.table_schema = pa.schema([f.with_nullable(True) for f in exchange_schema(frame)])
            self.base_version: int | None = None
            self.fields = plain(self.table_schema)
            self.sort_by: tuple[str, ...] = ()
            self.bloom_filter_columns: tuple[str, ...] = ()
        else:
            base = table.manifest()
            check_write_schema(frame, base.schema, table.uri)
            self.table_schema = base.schema
            self.base_version = base.version
            self.fields = base.fields  # the job's files carry its field ids and physical names
            self.sort_by = base.properties[SORT_BY]  # each task's rows are sorted by these
            self.bloom_filter_columns = base.properties[BLOOM_FILTER_COLUMNS]
        if where is not None:
            self.where = where.bind(self.table_schema)  # an unknown column fails now, not after the job

    def commit(
        self,
        files: Sequence[DataFile],
        app_transaction: tuple[str, int] | None = None,
        written_since: datetime | None = None,
    ) -> CommitInfo:
        """Add exactly ``files`` (after replacing the rows an overwrite replaces) in one commit.
        An overwrite's condition is checked against every row of the files first, as
        ``Table.overwrite`` checks it, before a missing table is created. ``written_since``:
        when the tasks began writing them, if known and earlier than when this was built. A
        job longer than the table's ``gc_grace`` less a margin fails with ``CommitFailedError``
        and its files are removed (deadline.py)."""
        since = self.began if written_since is None else min(self.began, written_since)
        if self.overwrite and self.where is not None and self.require_match:
            io = FileIO(self.location.store())
            check_within(io, self.fields, files, self.where, _REQUIRE_MATCH_REMEDY)
        table = self._open_or_create()
        with table.transaction() as tx:  # an error before commit() removes the files
            if app_transaction is not None:
                tx.set_app_transaction(*app_transaction)
            if self.overwrite:
                tx.overwrite(self.table_schema.empty_table(), self.where)
            tx.add_files(files, written_since=since)
            info = tx.commit()
        if not info.committed:  # a replayed micro-batch: an earlier attempt's files are in
            table.store.delete_unreferenced(f.path for f in files)
        log.info(
            "%s: %s version %d (%s)",
            table.uri,
            "committed" if info.committed else "unchanged at",
            info.version,
            info.metrics,
        )
        return info

    def abort(self, paths: Iterable[str]) -> None:
        """Remove the files of a failed job. A commit that raised with an unknown outcome
        may have landed: files that a newer version references are kept."""
        paths = set(paths)
        if paths and not self._maybe_committed(paths):
            self.location.store().delete_unreferenced(sorted(paths))

    def _maybe_committed(self, paths: set[str]) -> bool:
        try:
            table = self.location.open()
            first = 0 if self.base_version is None else self.base_version + 1
            # Past the pointer too: a commit whose pointer step failed has landed all the same.
            latest = table.log.probe_forward(table.version)
            return any(paths & table.manifest(v).file_map().keys() for v in range(first, latest + 1))
        except TableNotFoundError:
            return False
        except ManifestTableError:
            return True  # cannot tell: leave the files to GC's grace period

    def _open_or_create(self) -> Table:
        location = self.location
        if self.base_version is not None:
            return location.open()
        try:
            table = create_table(location.uri, self.table_schema, storage_options=location.storage_options)
        except TableExistsError:
            table = location.open()
        if not table.schema.equals(self.table_schema):
            raise SchemaMismatchError(
                f"the table at {table.uri} was created concurrently with schema {table.schema}, "
                f"which differs from the written files' {self.table_schema}; nothing was committed"
            )
        return table

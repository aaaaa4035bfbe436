"""Reading data files of one version on an executor, as the data source's batch and stream
readers (and the delete's fallback) do: the ordinary ``Scan`` over a snapshot holding only
those files, so that row-group pruning, deletion bitmaps and the residual filter work exactly
as in Python, with the batches cast to Spark's types."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.types import StructType

from ..data.scan import Scan, Snapshot
from ..data.tombstones import DeletionVectors
from ..errors import SchemaMismatchError
from ..expressions import Expr
from ..format.field_ids import FieldIds
from ..format.manifest import DataFile
from ..storage import FileIO
from .options import TableLocation
from .schema import spark_schema


def scan_files(
    location: TableLocation,
    version: int,
    fields: FieldIds,
    files: Iterable[DataFile],
    columns: list[str] | None,
    where: Expr | None,
) -> Scan:
    """A scan of just ``files`` of one version (``fields``: its schema and field ids), as
    run on an executor."""
    store = location.store()
    snapshot = Snapshot(version, fields.schema, tuple(files), DeletionVectors(store).of, fields=fields)
    return Scan(snapshot, FileIO(store), columns, where)


def for_spark(scan: Scan, output: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches of ``scan`` in Spark's types (``output``: microsecond UTC timestamps, no
    unsigned integers, ...)."""
    for batch in scan.to_batches():
        yield batch.cast(output, safe=False)


def read_columns(schema: StructType, table: pa.Schema) -> list[str]:
    """The columns Spark asked for: the table's, or a subset a user-given schema names (a
    projection), whose types must then be the table's as Spark sees them."""
    ours = {f.name: f.dataType for f in spark_schema(table).fields}
    wrong = [f.name for f in schema.fields if ours.get(f.name) != f.dataType]
    if wrong:
        raise SchemaMismatchError(
            f"the read schema does not match the table for columns {wrong}; "
            f"the table's schema is {spark_schema(table).simpleString()}"
        )
    return schema.fieldNames()

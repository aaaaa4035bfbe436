"""Table schemas as Spark sees them, and the check that a DataFrame may be written to a table.

Spark has no unsigned integers, half floats, 64-bit dates, 32-bit times or view types: those
columns (and list items, struct fields, map keys and values) are read as the nearest wider
Spark type. Nanosecond timestamps are read at Spark's microsecond
precision. Everything else maps one to one (``pyspark.sql.pandas.types.from_arrow_type``)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors import PySparkTypeError
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StructField,
    StructType,
)

from ..errors import SchemaMismatchError
from ..format.column_types import rebuilt

_WIDER_FOR_SPARK = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.decimal128(20, 0),
    pa.float16(): pa.float32(),
    pa.date64(): pa.date32(),
    pa.string_view(): pa.string(),
    pa.binary_view(): pa.binary(),
    pa.time32("s"): pa.time64("us"),
    pa.time32("ms"): pa.time64("us"),
}

_WIDENINGS = {
    ByteType(): (ShortType(), IntegerType(), LongType()),
    ShortType(): (IntegerType(), LongType()),
    IntegerType(): (LongType(),),
    FloatType(): (DoubleType(),),
}
"""DataFrame column type -> table column types it may be written to without loss."""


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a table; a column Spark cannot hold fails with its name."""
    fields = []
    for field in schema:
        try:
            spark_type = from_arrow_type(_for_spark(field.type))
        except PySparkTypeError:
            raise SchemaMismatchError(
                f"column {field.name!r} has type {field.type}, which Spark cannot represent"
            ) from None
        fields.append(StructField(field.name, spark_type, field.nullable))
    return StructType(fields)


def _for_spark(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with each type Spark lacks, at any depth, as the nearest wider one."""
    wider = _WIDER_FOR_SPARK.get(dtype)
    return wider if wider is not None else rebuilt(dtype, _for_spark)


def exchange_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects batches of a Python data source read to have."""
    return to_arrow_schema(schema, timezone="UTC")


def same_in_spark(arrow_type: pa.DataType) -> bool:
    """True when Spark sees exactly the stored values of a column of this type, so a filter
    Spark pushes down means the same thing evaluated on the stored data. Floats are out:
    Spark orders NaN above everything and makes NaN = NaN true, Arrow does neither."""
    t = pa.types
    return (
        t.is_integer(arrow_type)
        or t.is_string(arrow_type)
        or t.is_large_string(arrow_type)
        or t.is_boolean(arrow_type)
        or t.is_date32(arrow_type)
        or t.is_decimal(arrow_type)
        or (t.is_timestamp(arrow_type) and arrow_type.unit != "ns")
    )


def check_write_schema(frame: StructType, table: pa.Schema, uri: str) -> None:
    """Raise ``SchemaMismatchError`` naming every column of ``frame`` that cannot be written to
    the table: missing, unknown, or of a type that does not widen losslessly to the table's.
    Called on the driver before any task runs. Nullability is not compared: Spark's schema
    says little about it (its optimiser folds columns into NOT NULL literals), so a NOT
    NULL table column is checked on the data itself, batch by batch, when it is written."""
    wanted = {f.name: f.dataType for f in spark_schema(table).fields}
    given = {f.name: f.dataType for f in frame.fields}
    problems = []
    missing = [name for name in wanted if name not in given]
    extra = [name for name in given if name not in wanted]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unknown columns {extra}")
    for name, have in given.items():
        want = wanted.get(name)
        if want is not None and not _writable(have, want):
            problems.append(f"column {name!r} is {have.simpleString()}, the table has {want.simpleString()}")
    if problems:
        raise SchemaMismatchError(f"the DataFrame does not match the table at {uri}: {'; '.join(problems)}")


def _writable(have: DataType, want: DataType) -> bool:
    if have.simpleString() == want.simpleString() or isinstance(have, NullType):
        return True
    if isinstance(have, DecimalType) and isinstance(want, DecimalType):
        return have.scale == want.scale and have.precision <= want.precision
    return want in _WIDENINGS.get(have, ())  # type: ignore[call-overload]  # (Spark's types hash by value)


def native_readable(arrow_type: pa.DataType) -> bool:
    """True when Spark's own Parquet reader reads the Parquet files of a column of this type
    (as pyarrow writes them) as ``spark_schema`` says, with the values the Python data
    source gives. Nanosecond timestamps (Spark refuses them), half floats and view types
    are read through the data source."""
    t = pa.types
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return native_readable(arrow_type.value_type)
    if t.is_struct(arrow_type):
        return all(native_readable(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    return (
        t.is_integer(arrow_type)
        or t.is_float32(arrow_type)
        or t.is_float64(arrow_type)
        or t.is_boolean(arrow_type)
        or t.is_string(arrow_type)
        or t.is_large_string(arrow_type)
        or t.is_binary(arrow_type)
        or t.is_large_binary(arrow_type)
        or t.is_date(arrow_type)
        or t.is_decimal128(arrow_type)
        or (t.is_timestamp(arrow_type) and arrow_type.unit != "ns")
    )


def native_writable(schema: pa.Schema) -> bool:
    """True when the Parquet files Spark's own writer produces for this table read back (in
    pyarrow) with exactly the table's schema: flat columns of the types Spark writes
    one to one, all nullable (Spark's file sources read every column as nullable, so a
    compaction could not keep NOT NULL). Other tables are written through the data source."""
    t = pa.types
    return all(
        f.nullable
        and (
            t.is_signed_integer(f.type)
            or t.is_float32(f.type)
            or t.is_float64(f.type)
            or t.is_boolean(f.type)
            or t.is_string(f.type)
            or t.is_binary(f.type)
            or t.is_date32(f.type)
            or t.is_decimal128(f.type)
            or (t.is_timestamp(f.type) and f.type.unit == "us" and f.type.tz in (None, "UTC"))
        )
        for f in schema
    )

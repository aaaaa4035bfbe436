"""Our schema, file entries and deletion vectors as Iceberg describes them: the schema JSON
with our field ids, the name mapping for files written without ids, and manifest entries with
column bounds in Iceberg's single-value binary form."""

from __future__ import annotations

import decimal
import json
import struct
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

from ..format.field_ids import FieldIds
from ..format.manifest import DataFile, DeletionVector
from .iceberg_avro import PATH_FIELD, as_map, entry
from .types import iceberg_type
from .vectors import FRAMING

DATA_SEQUENCE = 0
"""The data sequence number of every data file. A deletion vector applies to data files with
a sequence number at or below its own; ours always apply (a bitmap names its file), so data
files get the lowest, whichever manifest lists them."""


def schema_json(fields: FieldIds, schema_id: int) -> dict[str, Any]:
    return {"type": "struct", "schema-id": schema_id, "fields": [
        {"id": fid, "name": f.name, "required": not f.nullable, "type": iceberg_type(f.type)}
        for fid, f in zip(fields.ids, fields.schema)]}


def name_mapping(fields: FieldIds) -> str:
    """``schema.name-mapping.default``: the names files without field ids carry each column
    under (its physical name; files with ids are read by id)."""
    return json.dumps([{"field-id": fid, "names": [name]} for fid, name in zip(fields.ids, fields.physical_names)])


def data_entry(f: DataFile, location: str, fields: FieldIds) -> dict[str, Any]:
    lower, upper, nulls, values = {}, {}, {}, {}
    for fid, column in zip(fields.ids, fields.schema):
        stats = f.stats.get(column.name)
        if stats is None:
            continue
        values[fid] = f.rows
        if stats.null_count is not None:
            nulls[fid] = stats.null_count
        for bound, out in ((stats.min, lower), (stats.max, upper)):
            encoded = _single_value(bound, column.type)
            if encoded is not None:
                out[fid] = encoded
    return entry({"content": 0, "file_path": f"{location}/{f.path}", "file_format": "PARQUET",
                  "record_count": f.rows, "file_size_in_bytes": f.size, "value_counts": as_map(values),
                  "null_value_counts": as_map(nulls), "lower_bounds": as_map(lower),
                  "upper_bounds": as_map(upper)}, DATA_SEQUENCE)


def dv_entry(path: str, ref: DeletionVector, location: str, puffin: str, puffin_size: int,
             offset: int) -> dict[str, Any]:
    """The entry of data file ``path``'s deletion vector, the blob at ``offset`` of ``puffin``."""
    target = f"{location}/{path}"
    bound = as_map({PATH_FIELD: target.encode()})
    return entry({"content": 1, "file_path": f"{location}/{puffin}", "file_format": "PUFFIN",
                  "record_count": ref.cardinality, "file_size_in_bytes": puffin_size, "lower_bounds": bound,
                  "upper_bounds": bound, "referenced_data_file": target, "content_offset": offset,
                  "content_size_in_bytes": ref.length + FRAMING})


def _single_value(value: Any, dtype: pa.DataType) -> bytes | None:
    """Iceberg's binary form of a bound (None: leave it unknown)."""
    if value is None or isinstance(value, float) and value != value:
        return None
    kind = iceberg_type(dtype)
    if pat.is_dictionary(dtype):
        dtype = dtype.value_type
    if kind == "boolean":
        return bytes([int(value)])
    if kind in ("int", "date"):
        return struct.pack("<i", _integer(value, dtype))
    if kind in ("long", "time") or kind is not None and kind.startswith("timestamp"):
        return struct.pack("<q", _integer(value, dtype))
    if kind in ("float", "double"):
        return struct.pack("<f" if kind == "float" else "<d", value)
    if kind == "string":
        return value.encode()
    if kind is not None and kind.startswith("decimal"):
        unscaled = int(decimal.Decimal(value).scaleb(dtype.scale))
        return unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    return None


def _integer(value: Any, dtype: pa.DataType) -> int:
    """The integer Iceberg stores for a value: itself, or days / micros / nanos since the epoch."""
    if isinstance(value, int):
        return value
    physical = pa.int32() if pat.is_date(dtype) else pa.int64()
    return pa.scalar(value, pa.date32() if pat.is_date(dtype) else dtype).cast(physical).as_py()

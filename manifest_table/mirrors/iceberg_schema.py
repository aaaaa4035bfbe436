"""Our schema, file entries and deletion vectors as Iceberg describes them: the schema JSON
with our field ids, the name mapping for files written without ids, and manifest entries with
column bounds in Iceberg's single-value binary form."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

from ..format.field_ids import FieldIds
from ..format.manifest import DataFile, DeletionVector
from .columns import Bounds
from .iceberg_avro import PATH_FIELD, as_map, entry
from .types import iceberg_type
from .vectors import FRAMING

DATA_SEQUENCE = 0
"""The data sequence number of every data file. A deletion vector applies to data files with
a sequence number at or below its own; ours always apply (a bitmap names its file), so data
files get the lowest, whichever manifest lists them."""


def schema_json(fields: FieldIds, schema_id: int) -> dict[str, Any]:
    return {
        "type": "struct",
        "schema-id": schema_id,
        "fields": [
            {"id": fid, "name": f.name, "required": not f.nullable, "type": iceberg_type(f.type)}
            for fid, f in zip(fields.ids, fields.schema)
        ],
    }


def name_mapping(fields: FieldIds) -> str:
    """``schema.name-mapping.default``: the names files without field ids carry each column
    under (its physical name; files with ids are read by id)."""
    return json.dumps([{"field-id": fid, "names": [name]} for fid, name in zip(fields.ids, fields.physical_names)])


def data_entries(
    files: Sequence[DataFile], bounds: dict[int, Bounds], location: str, fields: FieldIds
) -> list[dict[str, Any]]:
    """The manifest entries of ``files``, whose column ``bounds`` are given (columns.py)."""
    columns = []
    for fid, column in zip(fields.ids, fields.schema):
        b = bounds[fid]
        columns.append(
            (fid, _encoded(b.mins, column.type, len(files)), _encoded(b.maxs, column.type, len(files)), b.nulls)
        )
    out = []
    for i, f in enumerate(files):
        lower, upper, nulls, values = {}, {}, {}, {}
        for fid, lows, highs, null_counts in columns:
            if null_counts is None:
                continue  # a column added after the file was written: no stats
            values[fid] = f.rows
            if null_counts[i] is not None:
                nulls[fid] = null_counts[i]
            if lows[i] is not None:
                lower[fid] = lows[i]
            if highs[i] is not None:
                upper[fid] = highs[i]
        out.append(
            entry(
                {
                    "content": 0,
                    "file_path": f"{location}/{f.path}",
                    "file_format": "PARQUET",
                    "record_count": f.rows,
                    "file_size_in_bytes": f.size,
                    "value_counts": as_map(values),
                    "null_value_counts": as_map(nulls),
                    "lower_bounds": as_map(lower),
                    "upper_bounds": as_map(upper),
                },
                DATA_SEQUENCE,
            )
        )
    return out


def dv_entry(
    path: str, ref: DeletionVector, location: str, puffin: str, puffin_size: int, offset: int
) -> dict[str, Any]:
    """The entry of data file ``path``'s deletion vector, the blob at ``offset`` of ``puffin``."""
    target = f"{location}/{path}"
    bound = as_map({PATH_FIELD: target.encode()})
    return entry(
        {
            "content": 1,
            "file_path": f"{location}/{puffin}",
            "file_format": "PUFFIN",
            "record_count": ref.cardinality,
            "file_size_in_bytes": puffin_size,
            "lower_bounds": bound,
            "upper_bounds": bound,
            "referenced_data_file": target,
            "content_offset": offset,
            "content_size_in_bytes": ref.length + FRAMING,
        }
    )


_PACKED = {
    "int": ("<i", pa.int32()),
    "date": ("<i", pa.int32()),
    "long": ("<q", pa.int64()),
    "time": ("<q", pa.int64()),
    "float": ("<f", None),
    "double": ("<d", None),
}


def _encoded(values: pa.Array | None, dtype: pa.DataType, count: int) -> list[bytes | None]:
    """Iceberg's single-value binary form of each bound (None: unknown): little-endian
    numbers (dates as days, times and timestamps as micro- or nanoseconds since the epoch),
    UTF-8 strings, decimals as their unscaled big-endian two's complement."""
    kind = iceberg_type(dtype) or ""
    if values is None:
        return [None] * count
    if pat.is_date64(values.type):
        values = values.cast(pa.date32())
    if kind.startswith("timestamp"):
        kind = "long"
    if kind in _PACKED:
        fmt, physical = _PACKED[kind]
        pack = struct.Struct(fmt).pack
        raw = (values.cast(physical) if physical is not None else values).to_pylist()
        return [None if v is None or v != v else pack(v) for v in raw]
    if kind == "boolean":
        return [None if v is None else bytes([v]) for v in values.to_pylist()]
    if kind == "string":
        return [None if v is None else v.encode() for v in values.to_pylist()]
    if kind.startswith("decimal"):
        scale = (dtype.value_type if pat.is_dictionary(dtype) else dtype).scale
        return [None if v is None else _unscaled(v, scale) for v in values.to_pylist()]
    return [None] * count


def _unscaled(value: Decimal, scale: int) -> bytes:
    """The unscaled integer of ``value`` at ``scale``, exactly: ``Decimal.scaleb`` in the
    default context rounds to 28 digits, and a decimal(38) bound would name another value."""
    n = int(value.scaleb(scale, _EXACT))
    return n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)


_EXACT = Context(prec=80)
"""Room for any decimal128 (38 digits) at any scale shift."""

"""Which Arrow types each mirror can describe, as what (docs/mirrors.md, "Types").

A data file keeps its Parquet types, so a column maps to another format only if that
format's readers decode the file's column as the same values: unsigned integers (no signed
equivalent in either format), second/millisecond timestamps (and for Iceberg, zones other
than UTC), nested columns (their inner
fields carry no field ids) and types neither format has are refused, naming the column."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.types as pat

from ..errors import MirrorTypeError
from ..format.field_ids import FieldIds
from ..format.mirrors import DELTA, ICEBERG

_TITLE = {ICEBERG: "Iceberg", DELTA: "Delta"}
_UTC = (None, "UTC", "+00:00", "Etc/UTC", "Z")
"""Zones an Iceberg timestamp may have: our files keep a column's zone in their Arrow schema,
and pyiceberg refuses to read any other (a zoned column needs UTC to be mirrored there)."""


def iceberg_type(dtype: pa.DataType) -> str | None:
    """The Iceberg type of a column of ``dtype``, or None when Iceberg cannot hold it."""
    if pat.is_dictionary(dtype):
        return iceberg_type(dtype.value_type)
    if pat.is_boolean(dtype):
        return "boolean"
    if pat.is_signed_integer(dtype):
        return "long" if dtype.bit_width == 64 else "int"
    if pat.is_float32(dtype) or pat.is_float64(dtype):
        return "float" if pat.is_float32(dtype) else "double"
    if pat.is_decimal128(dtype):
        return f"decimal({dtype.precision}, {dtype.scale})"
    if pat.is_date(dtype):
        return "date"
    if pat.is_timestamp(dtype) and dtype.unit in ("us", "ns") and dtype.tz in _UTC:
        return ("timestamptz" if dtype.tz else "timestamp") + ("_ns" if dtype.unit == "ns" else "")
    if pat.is_time64(dtype) and dtype.unit == "us":
        return "time"
    if pat.is_string(dtype) or pat.is_large_string(dtype) or pat.is_string_view(dtype):
        return "string"
    if pat.is_binary(dtype) or pat.is_large_binary(dtype) or pat.is_binary_view(dtype):
        return "binary"
    if pat.is_fixed_size_binary(dtype):
        return f"fixed[{dtype.byte_width}]"
    return None


_DELTA_INTEGERS = {8: "byte", 16: "short", 32: "integer", 64: "long"}


def delta_type(dtype: pa.DataType) -> str | None:
    """The Delta type of a column of ``dtype``, or None when Delta cannot hold it."""
    if pat.is_dictionary(dtype):
        return delta_type(dtype.value_type)
    if pat.is_signed_integer(dtype):
        return _DELTA_INTEGERS[dtype.bit_width]
    if pat.is_timestamp(dtype):
        return None if dtype.unit != "us" else "timestamp" if dtype.tz else "timestamp_ntz"
    if pat.is_decimal128(dtype):
        return f"decimal({dtype.precision},{dtype.scale})"
    found = iceberg_type(dtype)
    return found if found in ("boolean", "float", "double", "date", "string", "binary") else None


_MAPPERS = {ICEBERG: iceberg_type, DELTA: delta_type}


def check_mirrored(fields: FieldIds, mirrors: Iterable[str], before: FieldIds | None = None) -> None:
    """Raise ``MirrorTypeError`` for the first column of ``fields`` that a mirror in ``mirrors``
    cannot represent, or, given the schema ``before`` a change, for a type change Delta's
    readers refuse (deltalake refuses tables declaring the ``typeWidening`` feature)."""
    for name in mirrors:
        mapper = _MAPPERS.get(name)
        if mapper is None:
            continue  # a mirror of a newer release: not ours to check
        for column in fields.schema:
            if mapper(column.type) is None:
                raise MirrorTypeError(
                    f"column {column.name!r} has type {column.type}, which the {_TITLE[name]} mirror cannot "
                    f'represent (see docs/mirrors.md, "Types"); turn the {name} mirror off or change the column'
                )
        if name == DELTA and before is not None:
            old = dict(zip(before.ids, before.schema))
            for fid, column in zip(fields.ids, fields.schema):
                if fid in old and old[fid].type != column.type:
                    raise MirrorTypeError(
                        f"cannot change column {column.name!r} from {old[fid].type} to {column.type} while the "
                        "delta mirror is on: Delta readers refuse tables that widen types; turn the mirror off "
                        "first (docs/mirrors.md)"
                    )

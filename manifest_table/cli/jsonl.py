"""JSON lines as the command line writes and reads them: one object per row, strict JSON
(RFC 8259 has no NaN or Infinity, and Python's ``json.dumps`` writes both by default), in a
mapping that ``append`` reads back to the same values (docs/cli.md):

=================================  ==============================================================
Arrow type                         JSON
=================================  ==============================================================
boolean, integers, strings         themselves (integers exact, uint64 included)
floats                             numbers (the shortest text that reads back the same); NaN,
                                   infinities: ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, as in
                                   protobuf's JSON mapping and Spark's JSON writer
decimals                           strings, ``"12.50"``: many readers take JSON numbers as doubles
binary                             base64 strings
dates, times, timestamps           ISO 8601 strings, ``"2025-10-04T12:00:00.123456"``; a zoned
                                   timestamp in its zone with its offset (``Z`` for UTC)
durations                          integer counts of their unit
lists (of any kind), structs, maps  arrays, objects, arrays of ``[key, value]`` pairs
=================================  ==============================================================

pyarrow's JSON reader cannot read this back (a float column holding ``"NaN"``, dates as
strings, base64, maps), so lines are parsed by Python's ``json`` (numbers with a fraction as
``Decimal``, exact) and each column is converted by its type, leaves through Arrow casts."""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.types as pat

from ..errors import InputFileError
from ..format.column_types import appendable, cast_safely, map_entries
from ..format.schema import MERGE_HINT
from ..lazy import lazy

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy("pyarrow.compute")

LINES_PER_BATCH = 65536
_SPECIAL = frozenset({"NaN", "Infinity", "-Infinity"})
_SPECIAL_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
# An offset after a time of day: "…12:00Z", "…12:00:00.5+02:00", "…12:00 -0130".
_OFFSET = r"\d:\d\d(:\d\d(\.\d*)?)?\s*([zZ]|[+-]\d\d(:?\d\d)?)$"


def is_binary(arrow_type: pa.DataType) -> bool:
    """Binary types, which both CSV and JSON carry as base64."""
    return pat.is_binary(arrow_type) or pat.is_large_binary(arrow_type) or pat.is_fixed_size_binary(arrow_type)


# --- writing --------------------------------------------------------------------------------
def json_lines(batch: pa.RecordBatch) -> str:
    """The rows of ``batch``, one JSON object per line."""
    names = batch.schema.names
    columns = [to_json(column) for column in batch.columns]
    return "".join(
        json.dumps(dict(zip(names, row)), allow_nan=False, ensure_ascii=False) + "\n" for row in zip(*columns)
    )


def to_json(array: pa.Array) -> list[Any]:
    """The values of ``array`` as Python values ``json.dumps`` writes in the mapping above."""
    kind = array.type
    if pat.is_dictionary(kind):
        return to_json(array.dictionary_decode())
    if pat.is_map(kind):
        return [None if v is None else [[e["key"], e["value"]] for e in v] for v in to_json(map_entries(array))]
    if pat.is_list(kind) or pat.is_large_list(kind) or pat.is_fixed_size_list(kind):
        values = to_json(array.flatten())
        lengths = pc.list_value_length(array).to_pylist()
        ends = itertools.accumulate(n or 0 for n in lengths)
        return [None if n is None else values[end - n : end] for n, end in zip(lengths, ends)]
    if pat.is_struct(kind):
        names = [f.name for f in kind]
        return [
            dict(zip(names, row)) if valid else None
            for valid, row in zip(array.is_valid().to_pylist(), zip(*map(to_json, array.flatten())))
        ]
    if pat.is_floating(kind):
        values = array.to_pylist()
        if pc.all(pc.is_finite(array)).as_py() is False:
            values = [v if v is None or math.isfinite(v) else _SPECIAL_TEXT[str(v)] for v in values]
        return values
    if is_binary(kind) or pat.is_binary_view(kind):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in array.to_pylist()]
    if pat.is_timestamp(kind):  # Arrow writes "2025-10-04 14:00:00.5+0200"
        text = pc.replace_substring_regex(timestamp_text(array), r"^(\S+) ", r"\1T")
        return pc.replace_substring_regex(text, r"([+-]\d\d)(\d\d)$", r"\1:\2").to_pylist()
    if pat.is_decimal(kind) or pat.is_date(kind) or pat.is_time(kind):
        return array.cast(pa.string()).to_pylist()
    if pat.is_duration(kind):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


def timestamp_text(array: pa.Array) -> pa.Array:
    """Arrow's text of timestamps (``2025-10-04 14:00:00.000000+0200``): a zoned value in its
    column's zone with its offset, except where the zone's offset then had seconds (local mean
    time before about 1900: Berlin's was +00:53:28), which ISO 8601's offsets cannot write and
    Arrow would cut to +0053: such a value is written in UTC (``...Z``), the same instant."""
    text = array.cast(pa.string())
    if not array.type.tz:
        return text
    per_minute = 60 * _PER_SECOND[array.type.unit]
    offset = pc.subtract(pc.local_timestamp(array), array.cast(pa.timestamp(array.type.unit))).cast(pa.int64())
    odd = pc.not_equal(pc.multiply(pc.divide(offset, per_minute), per_minute), offset)
    if not pc.any(odd).as_py():
        return text
    return pc.if_else(odd, array.cast(pa.timestamp(array.type.unit, "UTC")).cast(pa.string()), text)


# --- reading --------------------------------------------------------------------------------
def read_json_lines(path: str, source: IO[bytes], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of the table's columns from the JSON lines of ``source``; a key missing from
    an object is null, an unknown key or a value of the wrong kind an ``InputFileError``
    naming the lines."""
    first = 1
    while lines := list(itertools.islice(source, LINES_PER_BATCH)):
        where = f"{path} (lines {first}-{first + len(lines) - 1})"
        rows = _objects(path, first, lines)
        unknown = set().union(*rows) - set(schema.names)
        if unknown:
            raise InputFileError(f"cannot read {where}: unknown columns {sorted(unknown)} ({MERGE_HINT})")
        try:
            yield pa.RecordBatch.from_arrays(
                [from_json([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema
            )
        except (ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
            raise InputFileError(f"cannot read {where}: {exc}") from None
        first += len(lines)


_DECODER = json.JSONDecoder(parse_float=Decimal)
"""Numbers with a fraction as ``Decimal``: exact for a decimal column, and ``float()`` of one
is the correctly rounded double."""


def _objects(path: str, first: int, lines: list[bytes]) -> list[dict[str, Any]]:
    """The objects of non-blank ``lines``, parsed as one JSON array (a call per line costs
    three times as much); a failure is looked for line by line, to name the line."""
    lines = [line for line in lines if line.strip()]
    try:
        rows = _DECODER.decode("[" + b",".join(lines).decode("utf-8") + "]")
    except ValueError:
        rows = []
    if len(rows) != len(lines) or set(map(type, rows)) - {dict}:
        for number, line in enumerate(lines, first):
            try:
                row = _DECODER.decode(line.decode("utf-8"))
            except ValueError as exc:
                raise InputFileError(f"cannot read {path} line {number}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                raise InputFileError(f"cannot read {path} line {number}: expected an object, not {row!r}")
    return rows


def from_json(values: list[Any], kind: pa.DataType) -> pa.Array:
    """An array of type ``kind`` from values as ``json.loads`` gives them (mapping above).
    Raises ``ValueError`` (or an Arrow error) naming a value of the wrong kind."""
    if pat.is_fixed_size_list(kind):  # a null list holds its size of null items too
        size = kind.list_size
        _expect(values, (list,), kind)
        if any(v is not None and len(v) != size for v in values):
            raise ValueError(f"a {kind} value is a list of {size} items")
        items = [item for v in values for item in (v if v is not None else [None] * size)]
        return pa.FixedSizeListArray.from_arrays(
            from_json(items, kind.value_type), type=kind, mask=pa.array([v is None for v in values])
        )
    if pat.is_list(kind) or pat.is_large_list(kind) or pat.is_map(kind):
        _expect(values, (list,), kind)
        items = [item for v in values if v is not None for item in v]
        offsets = pa.array(
            [0, *itertools.accumulate(len(v or ()) for v in values)],
            pa.int64() if pat.is_large_list(kind) else pa.int32(),
        )
        mask = pa.array([v is None for v in values])
        if pat.is_map(kind):
            _expect(items, (list,), kind)
            if any(p is None or len(p) != 2 for p in items):
                raise ValueError(f"a {kind} entry is a [key, value] pair")
            pairs = cast("list[list[Any]]", items)
            return pa.MapArray.from_arrays(
                offsets,
                from_json([p[0] for p in pairs], kind.key_type),
                from_json([p[1] for p in pairs], kind.item_type),
                type=kind,
                mask=mask,
            )
        array_type = pa.LargeListArray if pat.is_large_list(kind) else pa.ListArray
        return array_type.from_arrays(offsets, from_json(items, kind.value_type), type=kind, mask=mask)
    if pat.is_dictionary(kind):  # a column of a table made before dictionaries were refused
        return from_json(values, kind.value_type).dictionary_encode().cast(kind)
    if pat.is_struct(kind):
        _expect(values, (dict,), kind)
        unknown = set().union(*(v for v in values if v is not None)) - {f.name for f in kind}
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)} in a {kind}")
        children = [from_json([None if v is None else v.get(f.name) for v in values], f.type) for f in kind]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=pa.array([v is None for v in values]))
    return _leaf(values, kind)


def _leaf(values: list[Any], kind: pa.DataType) -> pa.Array:
    if pat.is_floating(kind):
        _expect(values, (int, Decimal, float, str), kind)  # float: NaN and Infinity literals, tolerated
        strange = {v for v in values if type(v) is str} - _SPECIAL
        if strange:
            raise ValueError(f"{sorted(strange)[0]!r} is not a value of type {kind}")
        doubles = pa.array([None if v is None else float(v) for v in values], pa.float64())
        return cast_safely(doubles, kind, appendable, ValueError, f"a {kind} value")  # 1e39: no float32
    if is_binary(kind):
        return pa.array([None if v is None else _base64(v) for v in _expect(values, (str,), kind)], kind)
    if pat.is_decimal(kind):  # a safe cast from text: a digit the scale cannot hold is an error
        return pa.array([None if v is None else str(v) for v in _expect(values, (str, int, Decimal), kind)]).cast(kind)
    if pat.is_timestamp(kind) or pat.is_date(kind) or pat.is_time(kind):
        text = pa.array(_expect(values, (str,), kind), pa.string())
        if pat.is_timestamp(kind) and kind.tz:
            return to_timestamp(text, kind)
        if pat.is_time(kind):  # Arrow casts no text to a time of day: read it as one on 1970-01-01
            moment = pc.binary_join_element_wise("1970-01-01T", text, "").cast(pa.timestamp(kind.unit))
            return moment.cast(pa.int64()).cast(pa.int32() if kind.bit_width == 32 else pa.int64()).cast(kind)
        return text.cast(kind)
    if pat.is_duration(kind):
        return pa.array(_expect(values, (int,), kind), pa.int64()).cast(kind)
    accepted = (
        (bool,) if pat.is_boolean(kind) else (int,) if pat.is_integer(kind) else (str,) if pat.is_string(kind) else None
    )
    return pa.array(values if accepted is None else _expect(values, accepted, kind), kind)


def to_timestamp(text: pa.Array, target: pa.TimestampType) -> pa.Array:
    """ISO 8601 strings as instants of a zoned timestamp type: with an offset as written,
    without one as UTC (Arrow alone refuses offset-less strings for a zoned type)."""
    has_offset = pc.match_substring_regex(text, _OFFSET)
    utc = pa.timestamp(target.unit, "UTC")
    aware = pc.cast(pc.if_else(has_offset, text, None), utc)
    naive = pc.cast(pc.cast(pc.if_else(has_offset, None, text), pa.timestamp(target.unit)), utc)
    return pc.if_else(has_offset, aware, naive).cast(target)


def _expect(values: list[Any], kinds: tuple[type, ...], arrow_type: pa.DataType) -> list[Any]:
    """``values`` if each is null or of exactly one of ``kinds`` (so a bool is no integer):
    judged by the set of types, as data/ingest.py does, not value by value."""
    wrong = set(map(type, values)) - {type(None), *kinds}
    if wrong:
        value = next(v for v in values if type(v) in wrong)
        raise ValueError(f"{value!r} is not a value of type {arrow_type}")
    return values


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError(f"{text!r} is not base64") from None

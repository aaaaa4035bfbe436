"""What it means for a corpus case to be unchanged: the same objects under the same keys,
each equal by what it says rather than by its bytes where a library release may encode the
same content differently.

- Our JSON objects (the pointer, versions, table roots): equal as JSON once sizes are left
  out (a data file's ``size``, a segment's and the totals' ``bytes``, compaction's
  ``bytes_*`` metrics, a target file size derived from them): pyarrow may write the same rows
  in a few more or fewer bytes.
- Parquet (data files, segments, expected rows): the same Arrow schema, field metadata
  (field ids) included, the same rows, and for data files the same row groups (deletes
  address rows by position); a segment's ``size`` column left out.
- Tombstones: the same bytes (the portable roaring format is ours to keep).
- Mirror objects (Iceberg metadata, Avro, Puffin, Delta log, deletion-vector files): present
  under the same keys. Avro files carry a random sync marker; the mirrors' contents are
  checked by their own readers (tests/mirrors/test_mirrors.py)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_OURS_JSON = re.compile(r"(^|.*/)(_latest_manifest|manifest/v[0-9]{20}\.json|roots/[0-9a-f]{32}\.json)$")
_PARQUET = re.compile(r"(^|.*/)(data|segments)/[^/]+\.parquet$")
_MIRROR = re.compile(r"(^|.*/)(metadata/|_delta_log/|tombstones/.*\.puffin$|tombstones/deletion_vector_)")
_SIZES = "<size>"


@dataclass
class Built:
    """A case: case.json, the objects by key, the expected rows by path (Parquet bytes)."""

    info: dict[str, Any]
    objects: dict[str, bytes]
    expected: dict[str, bytes]


def load(directory: Path) -> Built:
    """A case as committed."""
    objects = {_key(p, directory / "objects"): p.read_bytes() for p in _files(directory / "objects")}
    expected = {_key(p, directory / "expected"): p.read_bytes() for p in _files(directory / "expected")}
    return Built(json.loads((directory / "case.json").read_text()), objects, expected)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _key(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def differences(new: Built, old: Built) -> list[str]:
    """What differs between two builds of a case (empty: the same case)."""
    found = [] if new.info == old.info else ["case.json"]
    for kind, a, b in (("objects", new.objects, old.objects), ("expected", new.expected, old.expected)):
        found += [f"{kind}/{k} is new" for k in sorted(a.keys() - b.keys())]
        found += [f"{kind}/{k} is gone" for k in sorted(b.keys() - a.keys())]
        found += [f"{kind}/{k} differs" for k in sorted(a.keys() & b.keys()) if not same(k, a[k], b[k], kind)]
    return found


def same(key: str, a: bytes, b: bytes, kind: str = "objects") -> bool:
    if a == b or (kind == "objects" and _MIRROR.match(key)):
        return True
    if kind == "expected":
        return _parquet_content(key, a, groups=False) == _parquet_content(key, b, groups=False)
    if _OURS_JSON.match(key):
        return _without_sizes(json.loads(a)) == _without_sizes(json.loads(b))
    if _PARQUET.match(key):
        return _parquet_content(key, a) == _parquet_content(key, b)
    return False


def _table(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def _parquet_content(key: str, data: bytes, groups: bool = True) -> tuple[Any, ...]:
    table = _table(data)
    if "segments/" in key:
        table = table.drop_columns(["size"])
    count = pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups if groups else None
    return table.schema.to_string(show_field_metadata=True), _canonical(table.to_pylist()), count


def _canonical(value: Any) -> Any:
    """``value`` with NaN equal to NaN and -0.0 unequal to 0.0, as stored bits are."""
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _without_sizes(doc: Any) -> Any:
    if isinstance(doc, list):
        return [_without_sizes(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    out = {key: _without_sizes(value) for key, value in doc.items()}
    if "path" in out and "size" in out:  # a file entry
        out["size"] = _SIZES
    if "bytes" in out and "files" in out:  # a segment's summary, the totals
        out["bytes"] = _SIZES
    for name in ("bytes_added", "bytes_removed", "target_file_size"):  # (the case derives its target from sizes)
        if name in out:
            out[name] = _SIZES
    return out

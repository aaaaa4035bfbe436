"""The table formats we compare with, behind one small interface.

``from_files`` builds a peer table over Parquet files we wrote, so every Parquet engine reads
the very same bytes (hard links, no copies): Delta by ``convert_to_deltalake``, Iceberg by
``add_files``. Lance has its own file format, so it gets the same rows rewritten as Lance.
``with_synthetic`` (Delta, Iceberg) builds a table of many files cheaply: one real file, then
one commit of entries, with stats, for files that were never written (for appends, which
read no data file).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._common import SyntheticFiles

IdRange = tuple[int, int]  # [lo, hi)


def _link_all(paths: Sequence[str], directory: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    out = []
    for path in paths:
        target = os.path.join(directory, os.path.basename(path))
        os.link(path, target)
        out.append(target)
    return out


class Delta:
    name = "deltalake"

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def create(cls, root: str, data: pa.Table) -> Delta:
        from deltalake import write_deltalake
        write_deltalake(root, data)
        return cls(root)

    @classmethod
    def from_files(cls, root: str, paths: Sequence[str]) -> Delta:
        from deltalake import convert_to_deltalake
        _link_all(paths, root)
        convert_to_deltalake(root)
        return cls(root)

    @classmethod
    def with_synthetic(cls, root: str, sample: pa.Table, files: SyntheticFiles) -> Delta:
        """``sample`` written, then one commit adding ``files``, then a checkpoint (as a table
        that size has: delta-rs checkpoints every 100 commits)."""
        from deltalake import DeltaTable, write_deltalake
        write_deltalake(root, sample)
        now = int(time.time() * 1000)
        with open(os.path.join(root, "_delta_log", f"{1:020d}.json"), "w") as log:
            log.write(json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}}) + "\n")
            for lows, highs in files.bounds():
                stats = {"numRecords": files.rows, "minValues": lows, "maxValues": highs,
                         "nullCount": dict.fromkeys(lows, 0)}
                add = {"path": f"part-00000-{uuid.uuid4()}-c000.zstd.parquet", "partitionValues": {},
                       "size": files.size, "modificationTime": now, "dataChange": True,
                       "stats": json.dumps(stats, default=str)}  # dates, timestamps: "2025-01-01 00:00:00"
                log.write(json.dumps({"add": add}) + "\n")
        DeltaTable(root).create_checkpoint()
        return cls(root)

    def file_count(self) -> int:
        from deltalake import DeltaTable
        return len(DeltaTable(self.root).file_uris())

    def append(self, data: pa.Table) -> None:
        from deltalake import write_deltalake
        write_deltalake(self.root, data, mode="append")

    def read(self, columns: list[str] | None = None, ids: IdRange | None = None) -> pa.Table:
        from deltalake import DeltaTable
        filters = [("id", ">=", ids[0]), ("id", "<", ids[1])] if ids else None
        return DeltaTable(self.root).to_pyarrow_table(columns=columns, filters=filters)

    def delete_id(self, value: int) -> str:
        from deltalake import DeltaTable
        m = DeltaTable(self.root).delete(f"id = {value}")
        return f"files rewritten {m.get('num_removed_files')}->{m.get('num_added_files')}"

    def upsert(self, source: pa.Table) -> str:
        """MERGE on id, every column updated or inserted; ``streamed_exec=False`` lets it
        prune target files by the source's key range (its best case)."""
        from deltalake import DeltaTable
        m = (DeltaTable(self.root).merge(source, "t.id = s.id", source_alias="s", target_alias="t",
                                         streamed_exec=False)
             .when_matched_update_all().when_not_matched_insert_all().execute())
        return (f"files rewritten {m.get('num_target_files_removed')}->{m.get('num_target_files_added')}, "
                f"{m.get('num_target_rows_updated')} updated, {m.get('num_target_rows_inserted')} inserted")


class Iceberg:
    name = "pyiceberg"

    def __init__(self, root: str) -> None:
        from pyiceberg.catalog.sql import SqlCatalog
        self.root = root
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
        self.table = self.catalog.load_table("bench.t") if self.catalog.table_exists("bench.t") else None

    @classmethod
    def _empty(cls, root: str, schema: pa.Schema) -> Iceberg:
        os.makedirs(root, exist_ok=True)
        peer = cls(root)
        peer.catalog.create_namespace("bench")
        peer.table = peer.catalog.create_table("bench.t", schema=schema)
        return peer

    @classmethod
    def create(cls, root: str, data: pa.Table) -> Iceberg:
        peer = cls._empty(root, data.schema)
        peer.append(data)
        return peer

    @classmethod
    def from_files(cls, root: str, paths: Sequence[str]) -> Iceberg:
        peer = cls._empty(root, pq.read_schema(paths[0]))
        peer.table.add_files(_link_all(paths, os.path.join(root, "files")))
        return peer

    @classmethod
    def with_synthetic(cls, root: str, sample: pa.Table, files: SyntheticFiles) -> Iceberg:
        """``sample`` appended, then one fast append of ``files`` (one manifest)."""
        from pyiceberg.conversions import to_bytes
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record
        peer = cls.create(root, sample)
        schema = peer.table.schema()
        fields = [schema.find_field(name) for name in sample.column_names]
        counts = {f.field_id: files.rows for f in fields}
        nulls = dict.fromkeys(counts, 0)
        with peer.table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for lows, highs in files.bounds():
                append.append_data_file(DataFile.from_args(
                    content=DataFileContent.DATA, file_path=f"{peer.table.location()}/data/{uuid.uuid4()}.parquet",
                    file_format=FileFormat.PARQUET, partition=Record(), record_count=files.rows,
                    file_size_in_bytes=files.size, value_counts=counts, null_value_counts=nulls,
                    lower_bounds={f.field_id: to_bytes(f.field_type, lows[f.name]) for f in fields},
                    upper_bounds={f.field_id: to_bytes(f.field_type, highs[f.name]) for f in fields},
                    spec_id=peer.table.spec().spec_id))
        return peer

    def file_count(self) -> int:
        return int(self.catalog.load_table("bench.t").current_snapshot().summary["total-data-files"])

    def append(self, data: pa.Table) -> None:
        self.table.append(data)

    def read(self, columns: list[str] | None = None, ids: IdRange | None = None) -> pa.Table:
        table = self.catalog.load_table("bench.t")
        where = f"id >= {ids[0]} and id < {ids[1]}" if ids else "True"
        return table.scan(row_filter=where, selected_fields=tuple(columns or ("*",))).to_arrow()

    def delete_id(self, value: int) -> str:
        self.table.delete(f"id == {value}")
        s = self.table.current_snapshot().summary
        return f"files rewritten {s.get('deleted-data-files', 0)}->{s.get('added-data-files', 0)}"

    def upsert(self, source: pa.Table) -> str:
        result = self.table.upsert(source, join_cols=["id"])
        return f"{result.rows_updated} updated, {result.rows_inserted} inserted (copy-on-write)"


class Lance:
    name = "lance"

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def create(cls, root: str, data: pa.Table) -> Lance:
        import lance
        lance.write_dataset(data, root)
        return cls(root)

    @classmethod
    def from_files(cls, root: str, paths: Sequence[str]) -> Lance:
        import lance
        lance.write_dataset(pq.ParquetDataset(paths).read(), root)
        return cls(root)

    def append(self, data: pa.Table) -> None:
        import lance
        lance.write_dataset(data, self.root, mode="append")

    def read(self, columns: list[str] | None = None, ids: IdRange | None = None) -> pa.Table:
        import lance
        where = f"id >= {ids[0]} AND id < {ids[1]}" if ids else None
        return lance.dataset(self.root).to_table(columns=columns, filter=where)

    def delete_id(self, value: int) -> str:
        import lance
        lance.dataset(self.root).delete(f"id = {value}")
        return "deletion file"


_PEERS: dict[str, Any] = {"deltalake": Delta, "pyiceberg": Iceberg, "lance": Lance}
_MODULES = {"deltalake": "deltalake", "pyiceberg": "pyiceberg", "lance": "lance"}


def selected(names: str) -> list[Any]:
    """The peer classes named (comma-separated) whose package is installed."""
    out = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        if name not in _PEERS:
            raise SystemExit(f"unknown peer {name!r}; known: {', '.join(_PEERS)}")
        if importlib.util.find_spec(_MODULES[name]) is None:
            print(f"note: {name} is not installed, skipped (pip install manifest_table[bench])", file=sys.stderr)
            continue
        out.append(_PEERS[name])
    return out

"""Corpus cases of tables written by earlier releases: the real tables of tests/data/, copied
as they are (never regenerated), with the rows the release that wrote them read; and two of
them carried on by this release (an upgrade to format 2, schema changes over files without
field ids)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conformance.registry import Expected, Site, case

DATA = Path(__file__).parent.parent / "data"


def copy(site: Site, name: str) -> None:
    """The objects of tests/data/``name`` into the case's store (names starting with '.' are
    a local store's own files, not objects)."""
    root = DATA / name
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            site.store.put_if_absent(path.relative_to(root).as_posix(), path.read_bytes())


def expected_of(name: str) -> Expected:
    """What the release read at each version: ``v<N>.parquet`` or Arrow IPC ``v<N>.arrow``."""
    out = {}
    for path in sorted((DATA / f"{name}.expected").iterdir()):
        if path.suffix == ".arrow":
            with pa.ipc.open_file(path) as reader:
                out[f"{path.stem}.parquet"] = reader.read_all()
        else:
            out[path.name] = pq.read_table(path)
    return out


@case(
    "written-by-0.1.0",
    "Written by release 0.1.0 (format 1): appends, a delete, an overwrite with a condition, a "
    "compaction and another delete; a float column with NaN (0.1.0 kept no min/max for it), a "
    "decimal, a timestamp zoned in Europe/Berlin across the repeated hour.",
    "old release",
    "format v1",
    "compaction",
    written_by="0.1.0",
)
def _(site: Site) -> Expected:
    copy(site, "table_written_by_0.1.0")
    return expected_of("table_written_by_0.1.0")


@case(
    "written-by-0.2.0",
    "Written by release 0.2.0, the first of format 2, under tiny limits: segments, a tail, a "
    "deletes map, merged and rewritten segments, a compaction; data files without field ids.",
    "old release",
    "format v2",
    "files without field ids",
    "segments",
    written_by="0.2.0",
)
def _(site: Site) -> Expected:
    copy(site, "table_written_by_0.2.0")
    return expected_of("table_written_by_0.2.0")


@case(
    "second-units-by-0.2.0",
    "Written by release 0.2.0: second-unit timestamps (naive and zoned), date64 and time32[s], "
    "whose segment statistics and data files hold milliseconds and days.",
    "old release",
    "format v2",
    "second units",
    "segments",
    written_by="0.2.0",
)
def _(site: Site) -> Expected:
    copy(site, "table_with_second_units_by_0.2.0")
    return expected_of("table_with_second_units_by_0.2.0")


@case(
    "updates-by-0.3.0",
    "Written by release 0.3.0: updates, upserts, a transaction updating a row twice, a "
    "compaction, an overwrite and a rename, before commits recorded parameters.replaced. "
    "Expected rows as this release reads them (0.3.0 kept none).",
    "old release",
    "format v2",
    "update",
    "upsert",
    "schema evolution",
    written_by="0.3.0",
)
def _(site: Site) -> None:
    copy(site, "table_with_updates_by_0.3.0")


@case(
    "0.1.0-upgraded-evolved",
    "The table of release 0.1.0 upgraded to format 2 by this release (its files, without field "
    "ids, moved into segments of two entries), then evolved (a rename, an added and a dropped "
    "column: its old files resolved through name_mapping), appended to and deleted from.",
    "old release",
    "upgrade",
    "format v1",
    "format v2",
    "segments",
    "files without field ids",
    "name_mapping",
    "schema evolution",
)
def _(site: Site) -> None:
    copy(site, "table_written_by_0.1.0")
    table = site.open()
    table.upgrade({"segment_target_files": 2})
    with table.update_schema() as s:
        s.rename_column("name", "label").add_column("extra", pa.int64()).drop_column("score")
    rows = table.scan(where="id < 2").to_arrow()
    extra = rows.schema.get_field_index("extra")
    table.append(
        rows.set_column(0, "id", pa.array([1000, 1001], pa.int64())).set_column(
            extra, "extra", pa.array([7, None], pa.int64())
        )
    )
    table.delete("id = 1000 OR label = 'n5'")

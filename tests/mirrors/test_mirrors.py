"""Mirrors (docs/mirrors.md): every retained version of random histories reads the same
through pyiceberg and deltalake as through ``scan()``, on a local directory and on S3 (moto);
the API, its typed errors, the CLI, and garbage collection of mirror objects.

``MT_MIRROR_STEPS`` lengthens the random histories (default 30 steps; CI cost: a few seconds
per history)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.cli.mirror import versions
from manifest_table.errors import (
    CorruptTableError,
    InvalidArgumentError,
    MirrorTypeError,
    PreconditionFailed,
    SchemaEvolutionError,
    UpgradeRequiredError,
)
from manifest_table.format.keys import is_writer_key
from manifest_table.maintenance.job import JobOptions, maintain
from manifest_table.mirrors import iceberg_manifests
from manifest_table.mirrors import sync as mirror_sync
from manifest_table.operations.gc_report import GCReport
from manifest_table.storage import LocalStore
from tests import delta_protocol, iceberg_spec
from tests.mirror_readers import PROPERTIES, SCHEMA, History, check_version, delta_rows, iceberg_rows, rows, run_history
from tests.stores import AmbiguousPutStore, WrappedStore

STEPS = int(os.environ.get("MT_MIRROR_STEPS", "30"))
BOTH = {"iceberg": {}, "delta": {"checkpoint_interval": 4}}


def _retained(t: mt.Table) -> list[int]:
    return [info.version for info in t.history()]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_histories_read_the_same_through_both_mirrors(tmp_path: Path, seed: int) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties=PROPERTIES, mirrors=BOTH)
    kinds = run_history(t, seed, STEPS, widen=False, gc_every=12)
    assert {"append", "delete", "update", "upsert", "overwrite", "compact", "schema", "gc"} <= set(kinds), kinds
    assert t.sync_mirrors() == {"iceberg": t.version, "delta": t.version}
    for version in _retained(t):
        check_version(t, version, ["iceberg", "delta"])
    # The pointers: readers that find the latest version by path.
    assert iceberg_rows(t.uri) == delta_rows(t.uri) == rows(t.to_arrow())
    assert delta_protocol.problems(t) == []
    assert iceberg_spec.problems(t) == []


def test_the_layout_is_mirrored_where_the_format_can_say_it(tmp_path: Path) -> None:
    """Issue 34: ``sort_by`` as Iceberg's sort order, ``cluster_by`` as Delta's clustering
    domain (a checkpoint included); histories that cluster read the same through both."""
    from pyiceberg.table import StaticTable

    t = mt.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        properties={**PROPERTIES, "cluster_by": ["small", "id"], "sort_by": ["id"]},
        mirrors=BOTH,
    )
    run_history(t, 5, 16, widen=False)
    t.compact(target_file_size=2_000)
    assert {"compact"} <= {c.operation for c in t.history()}
    for version in _retained(t)[:4]:
        check_version(t, version, ["iceberg", "delta"])
    assert delta_protocol.problems(t) == []
    order = StaticTable.from_metadata(f"{t.uri}/metadata/v{t.version}.metadata.json").sort_order()
    assert [(f.source_id, str(f.direction), str(f.null_order)) for f in order.fields] == [(1, "ASC", "NULLS LAST")]
    domains = [
        json.loads(line)["domainMetadata"]
        for line in (tmp_path / "t" / "_delta_log").joinpath(f"{1:020d}.json").read_text().splitlines()
        if "domainMetadata" in line
    ]
    assert [json.loads(d["configuration"])["clusteringColumns"] for d in domains] in ([], [[["small"], ["id"]]])
    checkpoint = pq.read_table(next((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet")))
    found = [d for d in checkpoint["domainMetadata"].to_pylist() if d]
    assert [json.loads(d["configuration"])["clusteringColumns"] for d in found] == [[["small"], ["id"]]]
    protocol = json.loads((tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[1])
    assert {"domainMetadata", "clustering"} <= set(protocol["protocol"]["writerFeatures"])
    t.set_properties({"sort_by": None})  # a curve over two columns is no Iceberg sort order
    assert not StaticTable.from_metadata(f"{t.uri}/metadata/v{t.version}.metadata.json").sort_order().fields
    t.set_properties({"cluster_by": ["small"]})  # one column: a plain sort
    order = StaticTable.from_metadata(f"{t.uri}/metadata/v{t.version}.metadata.json").sort_order()
    assert [(f.source_id, str(f.direction)) for f in order.fields] == [(6, "ASC")]
    with t.update_schema() as schema:  # Delta's clustering names the column as its files do
        schema.rename_column("small", "tiny")
    assert delta_protocol.problems(t) == []
    check_version(t, t.version, ["iceberg", "delta"])


def test_a_widened_column_reads_the_same_through_iceberg(tmp_path: Path) -> None:
    """Iceberg follows every schema change (int -> long included); Delta refuses widening."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties=PROPERTIES, mirrors=["iceberg"])
    run_history(t, 3, 8, widen=True)
    with t.update_schema() as s:
        s.widen("small", pa.int64())
    run_history(t, 4, 8, widen=True)
    for version in _retained(t):
        check_version(t, version, ["iceberg"])


def test_mirrors_on_s3(s3_uri: str, moto_endpoint: str) -> None:
    t = mt.create_table(s3_uri, SCHEMA, properties=PROPERTIES, mirrors=BOTH)
    run_history(t, 5, max(12, STEPS // 2), widen=False)
    credentials = {"access-key-id": "testing", "secret-access-key": "testing", "region": "us-east-1"}
    iceberg = {"s3.endpoint": moto_endpoint, **{f"s3.{k}": v for k, v in credentials.items()}}
    delta = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    for version in _retained(t):
        check_version(t, version, ["iceberg", "delta"], iceberg=iceberg, delta=delta)


def test_iceberg_snapshots_name_our_versions(tmp_path: Path) -> None:
    """Time travel maps both ways: a snapshot's summary names our version."""
    from pyiceberg.manifest import ManifestContent
    from pyiceberg.table import StaticTable

    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    run_history(t, 6, 6, widen=False)
    table = StaticTable.from_metadata(t.uri)
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    assert [s.parent_snapshot_id for s in table.metadata.snapshots][1:] == ids[:-1]  # each on the one before
    ours = {info.version: info.operation for info in t.history()}
    iceberg_operation = {"append": "append", "delete": "delete", "update": "overwrite", "compact": "replace"}
    for snapshot in table.metadata.snapshots:
        version = int(snapshot.summary["manifest-table.version"])
        assert rows(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()) == rows(t.scan(version=version).to_arrow())
        if ours[version] in iceberg_operation:
            assert snapshot.summary.operation.value == iceberg_operation[ours[version]], ours[version]
    assert {ours[int(s.summary["manifest-table.version"])] for s in table.metadata.snapshots} >= {"append", "delete"}
    assert table.metadata.format_version == 3 and table.metadata.next_row_id is not None
    # Every data file has data sequence number 0 (so every deletion vector applies to it).
    manifests = table.current_snapshot().manifests(table.io)
    assert {m.min_sequence_number for m in manifests if m.content == ManifestContent.DATA} == {0}
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    assert deletes and all(m.min_sequence_number == m.sequence_number > 0 for m in deletes)
    # Row lineage: each snapshot's rows take ids from where the one before it left off.
    metadata = [json.loads(p.read_text()) for p in sorted((tmp_path / "t" / "metadata").glob("v*.metadata.json"),
                                                           key=lambda p: int(p.name[1:].split(".")[0]))]
    for before, after in zip(metadata, metadata[1:]):
        current = next(s for s in after["snapshots"] if s["snapshot-id"] == after["current-snapshot-id"])
        assert current["first-row-id"] == before["next-row-id"]
        assert after["next-row-id"] == before["next-row-id"] + current["added-rows"]
        if current["summary"]["operation"] == "delete":  # deletion vectors add no row
            assert current["added-rows"] == 0
    assert metadata[-1]["next-row-id"] > 0


@pytest.mark.parametrize("how", ["moved", "copied"])
def test_a_moved_or_copied_table_is_mirrored_afresh_at_its_new_location(tmp_path: Path, how: str) -> None:
    """Iceberg names files by absolute paths, in its metadata and in each Puffin file's footer:
    the first commit at the new location describes every file there, and deleted rows stay
    deleted (0.3.0 kept the Puffin files naming the old location: pyiceberg read them back).
    GC there reads the metadata files that came along by the location each names (0.3.0 cut
    their paths by the new location's length, and failed)."""
    t = mt.create_table(str(tmp_path / "old"), SCHEMA, mirrors=["iceberg", "delta"])
    run_history(t, 3, 4, widen=False)
    assert t.manifest().totals.deleted > 0  # tombstones: Puffin files
    new = tmp_path / "a-longer-name"
    (shutil.move if how == "moved" else shutil.copytree)(tmp_path / "old", new)
    if how == "moved":  # and one Puffin file damaged: made again from its tombstone
        next((new / "tombstones").glob("*.puffin")).write_bytes(b"PFA1 not a footer")
    there = mt.open_table(str(new))
    there.append(there.scan().to_arrow().slice(0, 1))
    check_version(there, there.version, ["iceberg", "delta"])
    assert _gc(there, 2).versions_expired  # one version from before the move retained
    check_version(there, there.version, ["iceberg", "delta"])
    there.append(there.scan().to_arrow().slice(0, 1))
    _gc(there, 1)
    check_version(there, there.version, ["iceberg", "delta"])
    if how == "copied":
        t.append(t.scan().to_arrow().slice(0, 1))
        _gc(t, 1)
        check_version(t, t.version, ["iceberg", "delta"])


def test_iceberg_operations_and_schemas_follow_our_commits(tmp_path: Path) -> None:
    """A compaction is a ``replace`` (same rows); a commit that keeps the columns keeps the
    schema id, a schema change adds one schema."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    for i in range(3):
        t.append(pa.Table.from_pylist([{"id": i}], schema=SCHEMA))
    t.delete("id = 0")
    t.compact(min_deleted_fraction=0)
    with t.update_schema() as change:
        change.add_column("note", pa.string())
    t.append(pa.Table.from_pylist([{"id": 9, "note": "n"}], schema=t.schema))
    metadata = json.loads(t.store.get(f"metadata/v{t.version}.metadata.json"))
    assert [s["summary"]["operation"] for s in metadata["snapshots"]][-5:] == [
        "append", "delete", "replace", "replace", "append"
    ]
    assert [s["schema-id"] for s in metadata["snapshots"]][-5:] == [0, 0, 0, 1, 1]
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1] and metadata["current-schema-id"] == 1


def test_a_manifest_list_path_out_of_the_root_is_never_followed(tmp_path: Path) -> None:
    """A metadata file naming ``<location>/../outside``: GC does not read it, and the next
    commit mirrors the table afresh rather than reuse what it names."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    t.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    (tmp_path / "outside").write_bytes(b"not for us")
    path = tmp_path / "t" / "metadata" / f"v{t.version}.metadata.json"
    metadata = json.loads(path.read_text())
    for snapshot in metadata["snapshots"]:
        snapshot["manifest-list"] = f"{metadata['location']}/metadata/../../outside"
    path.write_text(json.dumps(metadata))
    fresh = mt.open_table(t.uri)
    _gc(fresh, 1)  # reads the retained metadata file's lists
    fresh.append(pa.Table.from_pylist([{"id": 2}], schema=SCHEMA))
    assert (tmp_path / "outside").read_bytes() == b"not for us"
    assert iceberg_rows(fresh.uri, fresh.version) == rows(fresh.to_arrow())


# --- the API and its errors ---------------------------------------------------------------
def test_set_mirrors_is_one_commit_and_writes_the_current_version(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(pa.Table.from_pylist([{"id": 1}, {"id": 2}], schema=SCHEMA))
    assert t.mirrors == []
    info = t.set_mirrors(["iceberg", "delta"])
    assert info.committed and info.version == 2 and info.operation == "set_mirrors"
    assert t.mirrors == ["iceberg", "delta"]
    assert iceberg_rows(t.uri, 2) == delta_rows(t.uri, 2) == rows(t.to_arrow())
    assert not (tmp_path / "t" / "metadata" / "v1.metadata.json").exists()  # a mirror starts where enabled
    assert (tmp_path / "t" / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()
    assert not t.set_mirrors(["delta", "iceberg"]).committed  # the same set: nothing to commit
    t.set_mirrors(["iceberg"])
    t.delete("id = 1")
    assert t.mirrors == ["iceberg"] and t.sync_mirrors() == {"iceberg": 4}
    assert delta_rows(t.uri) == delta_rows(t.uri, 2)  # delta stopped where it was turned off


def test_a_mirror_kept_on_keeps_its_identity(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    uuid = t.manifest().mirrors["iceberg"]["table_uuid"]
    t.set_mirrors(["iceberg", "delta"])
    assert t.manifest().mirrors["iceberg"]["table_uuid"] == uuid
    metadata = json.loads((tmp_path / "t" / "metadata" / "v1.metadata.json").read_text())
    assert metadata["table-uuid"] == uuid


@pytest.mark.parametrize(
    "mirror, column",
    [
        ("iceberg", pa.field("u", pa.uint64())),
        ("delta", pa.field("u", pa.uint32())),
        ("iceberg", pa.field("l", pa.list_(pa.int64()))),
        ("delta", pa.field("t", pa.timestamp("ns"))),
        ("iceberg", pa.field("t", pa.timestamp("ms"))),
        ("iceberg", pa.field("z", pa.timestamp("us", tz="Asia/Tokyo"))),
    ],
)
def test_a_type_a_mirror_cannot_represent_is_refused_naming_the_column(
    tmp_path: Path, mirror: str, column: pa.Field
) -> None:
    schema = pa.schema([("id", pa.int64()), column])
    with pytest.raises(MirrorTypeError, match=f"column '{column.name}'.*{mirror.capitalize()}"):
        mt.create_table(str(tmp_path / "a"), schema, mirrors=[mirror])
    assert not (tmp_path / "a").exists()
    t = mt.create_table(str(tmp_path / "b"), schema)
    with pytest.raises(MirrorTypeError, match=f"column '{column.name}'"):
        t.set_mirrors([mirror])
    assert t.version == 0 and t.mirrors == []


def test_schema_changes_a_mirror_cannot_follow_are_refused(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg", "delta"])
    with pytest.raises(MirrorTypeError, match="'u'"):
        with t.update_schema() as s:
            s.add_column("u", pa.uint16())
    with pytest.raises(SchemaEvolutionError, match="delta mirror"):
        with t.update_schema() as s:
            s.widen("small", pa.int64())
    assert t.version == 0
    t.set_mirrors(["iceberg"])
    with t.update_schema() as s:
        s.widen("small", pa.int64())


def test_bad_mirror_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown mirror 'hudi'"):
        mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["hudi"])
    with pytest.raises(InvalidArgumentError, match="list of names"):
        mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors="iceberg")
    with pytest.raises(InvalidArgumentError, match="format version 2"):
        mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["delta"], format_version=1)
    v1 = mt.create_table(str(tmp_path / "v1"), SCHEMA, format_version=1)
    with pytest.raises(UpgradeRequiredError):
        v1.set_mirrors(["iceberg"])
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "stored, field",
    [
        ([], "mirrors"),
        ({"iceberg": "x"}, "mirrors.iceberg"),
        ({"iceberg": {"table_uuid": 5}}, "mirrors.iceberg.table_uuid"),
        ({"delta": {"table_id": "not a uuid", "checkpoint_interval": 5}}, "mirrors.delta.table_id"),
        (
            {"delta": {"table_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "checkpoint_interval": 0}},
            "mirrors.delta.checkpoint_interval",
        ),
    ],
)
def test_a_stored_mirror_setting_is_validated(tmp_path: Path, stored: object, field: str) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    key = tmp_path / "t" / "manifest" / f"v{0:020d}.json"
    doc = json.loads(key.read_text())
    doc["mirrors"] = stored
    key.write_text(json.dumps(doc))
    with pytest.raises(CorruptTableError, match=f"field {field} "):
        mt.open_table(t.uri).manifest(0)


def test_a_mirror_of_a_newer_release_is_kept_and_ignored(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["delta"])
    key = tmp_path / "t" / "manifest" / f"v{0:020d}.json"
    doc = json.loads(key.read_text())
    doc["mirrors"]["hudi"] = {"anything": 1}
    key.write_text(json.dumps(doc))
    t.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    assert t.mirrors == ["delta"] and t.manifest().mirrors["hudi"] == {"anything": 1}
    assert t.sync_mirrors() == {"delta": 1}


def test_a_renamed_column_keeps_its_physical_name_in_new_files(tmp_path: Path) -> None:
    """Delta readers match Parquet columns by physical name even in id mode (docs/design/004-mirrors.md)."""
    import pyarrow.parquet as pq

    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["delta"])
    with t.update_schema() as s:
        s.rename_column("name", "label")
        s.drop_column("score")
        s.add_column("score", pa.float64())
    t.append(
        pa.table(
            {
                "id": [1],
                "label": ["a"],
                "score": [0.5],
                "amount": pa.array([None], pa.decimal128(9, 2)),
                "ts": pa.array([None], pa.timestamp("us", tz="UTC")),
                "small": pa.array([1], pa.int32()),
            }
        )
    )
    written = pq.read_schema(tmp_path / "t" / t.manifest().files[0].path).names
    assert written == ["id", "name", "amount", "ts", "small", "score_7"]
    assert delta_rows(t.uri) == rows(t.to_arrow())


def test_files_written_before_field_ids_are_mirrored(tmp_path: Path) -> None:
    """Files without field ids (format v1, and 0.2.0): Iceberg resolves them through the name
    mapping, Delta by their physical names (the names they were written with)."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, format_version=1)
    history = History(t, 9, widen=False)
    for _ in range(3):
        t.append(history.batch(5))
    t.delete("id = 3 OR id = 12")
    t.upgrade()
    with t.update_schema() as s:
        s.rename_column("name", "label")
        s.drop_column("score")
        s.add_column("score", pa.float64())
    enabled = t.set_mirrors(["iceberg", "delta"]).version
    run_history(t, 10, 6, widen=False)
    for version in range(enabled, t.version + 1):
        check_version(t, version, ["iceberg", "delta"])


def test_a_0_2_0_table_gets_a_delta_mirror(tmp_path: Path) -> None:
    root = tmp_path / "old"
    shutil.copytree(Path(__file__).parents[1] / "data" / "table_written_by_0.2.0", root)
    t = mt.open_table(str(root))
    with pytest.raises(MirrorTypeError, match="'ts'.*Iceberg"):
        t.set_mirrors(["iceberg"])  # its zone is Europe/Berlin
    t.set_mirrors(["delta"])
    t.delete("id = 1 OR id = 90")
    for version in (t.version - 1, t.version):
        check_version(t, version, ["delta"])


def test_cli_mirror_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "t")
    mt.create_table(uri, SCHEMA)
    assert main(["mirror", uri, "--iceberg", "--delta"]) == 0
    assert "mirrors iceberg, delta from version 1" in capsys.readouterr().out
    assert main(["info", uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mirrors"] == {"iceberg": 1, "delta": 1}
    assert main(["mirror", uri, "--sync"]) == 0
    assert "iceberg at version 1, delta at version 1" in capsys.readouterr().out
    assert main(["mirror", uri, "--off"]) == 0
    assert "mirrors off" in capsys.readouterr().out
    assert main(["info", uri]) == 0
    assert "mirrors:                 no mirrors" in capsys.readouterr().out


# --- garbage collection -----------------------------------------------------------------------
def _gc(t: mt.Table, keep: int) -> GCReport:
    return t.gc(retain_versions=keep, retain_for=None, grace=timedelta(0), force=True)


def test_gc_expires_mirror_objects_with_our_versions(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, properties=PROPERTIES, mirrors=BOTH)
    run_history(t, 7, 20, widen=False)
    before = {info.key for info in t.store.list()}
    report = _gc(t, 3)
    after = {info.key for info in t.store.list()}
    oldest = min(_retained(t))
    assert report.deleted["mirrors"].count > 0
    metadata = [int(k[len("metadata/v") : -len(".metadata.json")]) for k in after if k.endswith(".metadata.json")]
    assert min(metadata) == oldest
    log = [int(k[len("_delta_log/") :][:20]) for k in after if k.startswith("_delta_log/0")]
    assert min(log) == oldest  # GC wrote a checkpoint there: the log offers no expired version
    assert f"_delta_log/{oldest:020d}.checkpoint.parquet" in after
    assert {k for k in before - after if not is_writer_key(k)} == set()
    for version in _retained(t):
        check_version(t, version, ["iceberg", "delta"])
    for key in sorted(k for k in after if k.endswith(".metadata.json")):  # no expired snapshot offered
        metadata = json.loads(t.store.get(key))
        ids = {snapshot["snapshot-id"] for snapshot in metadata["snapshots"]}
        assert {entry["snapshot-id"] for entry in metadata["snapshot-log"]} <= ids, key
    # Every puffin and DV file kept belongs to a kept tombstone.
    tombstones = {k for k in after if k.endswith(".roaring")}
    assert {k for k in after if k.endswith(".puffin")} == {k.replace(".roaring", ".puffin") for k in tombstones}


def test_gc_that_loses_a_race_to_rewrite_a_metadata_file_reads_it_again(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    for i in range(4):
        t.append(pa.Table.from_pylist([{"id": i}], schema=SCHEMA))

    class LosesTheFirstRewrite(WrappedStore):
        lost = 0

        def _before(self, op: str, key: str) -> None:
            if op == "put" and key.endswith(".metadata.json") and not self.lost:
                self.lost += 1  # another GC rewrote it first (here: the same file)
                raise PreconditionFailed(key)

    store = LosesTheFirstRewrite(LocalStore(tmp_path / "t"))
    _gc(mt.Table(t.uri, store), 2)
    assert store.lost == 1
    oldest = min(_retained(t))
    for version in _retained(t):
        metadata = json.loads(t.store.get(f"metadata/v{version}.metadata.json"))
        assert all(int(s["summary"]["manifest-table.version"]) >= oldest for s in metadata["snapshots"]), version


def test_the_commit_after_gc_lists_no_expired_snapshot(tmp_path: Path) -> None:
    """The writer builds a version's metadata on the previous one's, which this process keeps
    from before GC expired versions: they are found (a HEAD, then a binary search) and left out."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    for i in range(9):
        t.append(pa.Table.from_pylist([{"id": i}], schema=SCHEMA))
    _gc(t, 3)
    oldest = min(_retained(t))
    t.append(pa.Table.from_pylist([{"id": 99}], schema=SCHEMA))
    metadata = json.loads(t.store.get(f"metadata/v{t.version}.metadata.json"))
    listed = [int(s["summary"]["manifest-table.version"]) for s in metadata["snapshots"]]
    assert listed == list(range(oldest, t.version + 1))
    assert iceberg_rows(t.uri) == rows(t.to_arrow())


def test_a_lagging_mirror_holds_gc_back(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    t.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    lagging = t.version
    plain = mt.Table(t.uri, LocalStore(tmp_path / "t"))
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text(str(lagging))
    for i in range(3):  # commits whose mirror writes fail
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("manifest_table.mirrors.sync.sync_one", _fail)
            plain.append(pa.Table.from_pylist([{"id": 10 + i}], schema=SCHEMA))
    _gc(t, 1)
    assert min(_retained(t)) == lagging  # kept for the mirror
    assert iceberg_rows(t.uri) == rows(t.scan(version=lagging).to_arrow())
    t.sync_mirrors()
    _gc(t, 1)
    assert _retained(t) == [t.version]
    assert iceberg_rows(t.uri) == rows(t.to_arrow())


def test_a_version_hint_left_behind_holds_nothing_back(tmp_path: Path) -> None:
    """The hint is best effort: the newest mirrored version is found past it, so GC keeps no
    version for a mirror that is in fact up to date."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    for i in range(3):
        t.append(pa.Table.from_pylist([{"id": i}], schema=SCHEMA))
    (tmp_path / "t" / "metadata" / "version-hint.text").write_text("1")  # its last moves were lost
    _gc(t, 1)
    assert _retained(t) == [t.version]
    assert iceberg_rows(t.uri, t.version) == rows(t.to_arrow())


def test_a_metadata_file_whose_create_landed_but_reported_a_conflict_is_ours(tmp_path: Path) -> None:
    """A create retried after a lost response finds the object taken: the same bytes there
    mean this writer made it, so the mirror counts that version done and moves the hint."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg"])
    store = AmbiguousPutStore(LocalStore(tmp_path / "t"), lambda op, key: key == "metadata/v1.metadata.json")
    mt.Table(t.uri, store).append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    assert store.injected == 1
    assert (tmp_path / "t" / "metadata" / "version-hint.text").read_text() == "1"
    assert iceberg_rows(t.uri) == rows(t.to_arrow())


def test_the_mirror_that_lags_most_holds_gc_back(tmp_path: Path) -> None:
    """Two mirrors, the Delta one failing to follow three commits the Iceberg one follows:
    GC keeps what the older of the two describes, not the newer."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg", "delta"])
    t.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    lagging, real = t.version, mirror_sync.sync_one

    def delta_fails(src: object, name: str, *args: object, **kwargs: object) -> int:
        if name == "delta":
            raise OSError("injected: the Delta mirror's write fails")
        return real(src, name, *args, **kwargs)  # type: ignore[arg-type]

    for i in range(3):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("manifest_table.mirrors.sync.sync_one", delta_fails)
            t.append(pa.Table.from_pylist([{"id": 10 + i}], schema=SCHEMA))
    _gc(t, 1)
    assert min(_retained(t)) == lagging  # kept for the Delta mirror
    assert delta_rows(t.uri) == rows(t.scan(version=lagging).to_arrow())
    assert iceberg_rows(t.uri) == rows(t.to_arrow())
    t.sync_mirrors()
    _gc(t, 1)
    assert _retained(t) == [t.version] and delta_rows(t.uri) == rows(t.to_arrow())


def test_a_lagging_mirror_holds_a_databases_gc_back(tmp_path: Path) -> None:
    """A database table whose Iceberg mirror failed to follow the database's last commit: GC
    keeping one database version keeps the one before too (the state the mirror describes,
    and its mirror objects), until the mirror catches up."""
    db = mt.create_database(str(tmp_path / "db"))
    a = db.create_table("a", SCHEMA, mirrors=["iceberg"])
    a.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    a.delete("id = 1")
    a.append(pa.Table.from_pylist([{"id": 2}], schema=SCHEMA))
    mirrored, folder, then = db.version, str(tmp_path / "db" / "tables" / a.table_id), rows(a.to_arrow())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("manifest_table.mirrors.sync.sync_one", _fail)
        a.delete("id = 2")  # (the database's last commit; the mirror's write fails)
    report = db.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert list(report.versions_retained) == [mirrored, db.version]  # kept for the mirror
    assert iceberg_rows(folder) == then != rows(a.to_arrow())
    assert db.table("a").sync_mirrors() == {"iceberg": a.version}
    report = db.gc(retain_versions=1, retain_for=None, grace=timedelta(0), force=True)
    assert list(report.versions_retained) == [db.version] and iceberg_rows(folder) == rows(a.to_arrow())


def _fail(*args: object) -> None:
    raise OSError("injected: the mirror write fails")


def test_the_maintenance_job_syncs_mirrors(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, mirrors=["iceberg", "delta"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("manifest_table.mirrors.sync.sync_one", _fail)
        t.append(pa.Table.from_pylist([{"id": 1}], schema=SCHEMA))
    assert versions(t) == {"iceberg": 0, "delta": 0}
    assert maintain(t.uri, JobOptions(dry_run=True, retain_for=None, grace=timedelta(0), force=True)).ok
    assert versions(t) == {"iceberg": 0, "delta": 0}  # a dry run writes nothing, mirrors included
    options = JobOptions(retain_versions=1, retain_for=None, grace=timedelta(0), force=True, compact=False)
    with pytest.MonkeyPatch.context() as mp:  # the sync fails: reported as a failure, and GC still runs
        mp.setattr("manifest_table.mirrors.sync.sync_one", _fail)
        failed = maintain(t.uri, options)
    assert not failed.ok and failed.error.startswith("mirror sync failed: ") and "GC of" in failed.lines[-1]
    outcome = maintain(t.uri, JobOptions(retain_for=None, grace=timedelta(0), force=True, compact=False))
    assert outcome.ok and "mirrors: iceberg at version 1, delta at version 1" in outcome.lines
    assert iceberg_rows(t.uri) == delta_rows(t.uri) == rows(t.to_arrow())


def test_a_delta_log_without_its_last_checkpoint_hint_goes_on_from_its_newest_commit(tmp_path: Path) -> None:
    """``_last_checkpoint`` is a hint. Lost, with the mirror lagging (the newest commits
    unwritten, as after a crash), the newest commit is found by listing the log and the
    mirror goes on from there: no second start, no checkpoint off its interval. A hint naming
    a log that is gone starts the mirror again."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), mirrors={"delta": {}})
    log = tmp_path / "t" / "_delta_log"
    for i in range(3):
        t.append(pa.table({"id": [i]}))
    for entry in [log / "_last_checkpoint", log / f"{2:020d}.json", log / f"{3:020d}.json"]:
        entry.unlink()
    assert t.sync_mirrors() == {"delta": 3}
    assert sorted(p.name for p in log.glob("0*")) == [f"{0:020d}.checkpoint.parquet"] + [
        f"{v:020d}.json" for v in range(4)
    ]
    assert delta_rows(t.uri) == rows(t.to_arrow())
    for entry in log.glob("0*"):  # the log gone, the hint kept
        entry.unlink()
    (log / "_last_checkpoint").write_text(json.dumps({"version": 2, "size": 3}))
    assert t.sync_mirrors() == {"delta": 3}
    assert delta_rows(t.uri) == rows(t.to_arrow())
    assert delta_protocol.problems(t) == []


def test_an_iceberg_mirror_without_its_hint_goes_on_from_its_newest_metadata(tmp_path: Path) -> None:
    """``version-hint.text`` lost with the mirror lagging: the newest metadata file is found by
    listing, and the next ones build on it (its snapshots kept), not on a fresh start."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), mirrors=["iceberg"])
    metadata = tmp_path / "t" / "metadata"
    for i in range(3):
        t.append(pa.table({"id": [i]}))
    for name in ["version-hint.text", "v2.metadata.json", "v3.metadata.json"]:
        (metadata / name).unlink()
    assert t.sync_mirrors() == {"iceberg": 3}
    newest = json.loads((metadata / "v3.metadata.json").read_text())
    assert [s["summary"]["manifest-table.version"] for s in newest["snapshots"]] == ["0", "1", "2", "3"]
    assert iceberg_rows(t.uri) == rows(t.to_arrow())
    assert iceberg_spec.problems(t) == []


def test_a_copied_table_mirrors_its_new_versions_at_its_own_location(tmp_path: Path) -> None:
    """A table copied elsewhere (its metadata files name the old location): the copy's next
    version is mirrored whole at the new location, nothing in it naming the old one."""
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), mirrors=["iceberg"])
    t.append(pa.table({"id": [1]}))
    shutil.copytree(tmp_path / "t", tmp_path / "copy")
    copy = mt.open_table(str(tmp_path / "copy"))
    copy.append(pa.table({"id": [2]}))
    assert iceberg_spec.problems(copy, [copy.version]) == []
    assert iceberg_rows(copy.uri) == rows(copy.to_arrow())


def test_a_segments_deletion_vectors_are_split_into_buckets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment's vectors go to manifests by a hash of the file (``BUCKET_FILES`` files a
    bucket, here one), so a delete rewrites only the buckets it touches. (Eight files in
    buckets 0-3 by a hash of random names: all in bucket 0 once in 65,536 runs.)"""
    monkeypatch.setattr(iceberg_manifests, "BUCKET_FILES", 1)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    t = mt.create_table(str(tmp_path / "t"), schema, properties=PROPERTIES, mirrors=["iceberg"])
    for i in range(10):
        t.append(pa.table({"id": [2 * i, 2 * i + 1]}, schema=schema))
    t.delete("id % 2 = 0")
    metadata = json.loads((tmp_path / "t" / "metadata" / f"v{t.version}.metadata.json").read_text())
    listed = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    entries = iceberg_spec.read_avro(tmp_path / "t", metadata["location"], listed["manifest-list"], [])
    slots = [iceberg_manifests.slot_of(e["manifest_path"]) for e in entries]
    buckets = {slot.rsplit("-x", 1)[1] for slot in slots if "-x" in slot and not slot.startswith("t-")}
    assert buckets - {"0"}, slots
    assert iceberg_rows(t.uri) == rows(t.to_arrow())
    assert iceberg_spec.problems(t) == []


def test_iceberg_bounds_and_null_counts_hold_for_every_column_type_and_an_added_column(tmp_path: Path) -> None:
    """Every bound in the manifests, decoded as the spec says, holds the file's values, and a
    column added after a file was written is no column of that file's entry (a segment's
    files, mirrored whole after the change, included)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("f", pa.float32()), ("i", pa.int32()),
                        ("d", pa.date32()), ("b", pa.bool_()), ("s", pa.string()), ("m", pa.decimal128(20, 4)),
                        ("t", pa.timestamp("ns", "UTC")), ("c", pa.time64("us"))])
    t = mt.create_table(str(tmp_path / "t"), schema, properties=PROPERTIES)  # (files flushed to segments)

    def part(n: np.ndarray) -> pa.Table:  # (negatives too: a bound's sign and byte order)
        return pa.table({
            "id": n, "f": np.where(n == 5, np.nan, n * 1.5).astype(np.float32), "i": n.astype(np.int32) * 1000,
            "d": pa.array(n.astype(np.int32) * 100, pa.date32()), "b": n % 3 == 0, "s": [f"s{v}é" for v in n],
            "m": [(Decimal(int(v)) / 8).quantize(Decimal("0.0001")) for v in n],
            "t": pa.array(n * 10**15, pa.timestamp("ns", "UTC")), "c": pa.array((n + 30) * 10**9, pa.time64("us")),
        }, schema=schema)

    for start in range(-30, 70, 20):
        t.append(part(np.arange(start, start + 20)))
    with t.update_schema() as change:
        change.add_column("late", pa.int64())
    t.set_mirrors(["iceberg"])  # (a full build: a manifest of files that all lack the column)
    t.append(part(np.arange(70, 80)).append_column("late", pa.array(np.arange(10))))
    assert iceberg_spec.problems(t) == []
    assert iceberg_rows(t.uri) == rows(t.to_arrow())

"""The Structured Streaming sink: one commit per micro-batch, recorded under the query's id,
so a query restarted from its checkpoint, even one replaying a batch, writes each row once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_table as mt
from manifest_table.errors import InvalidArgumentError
from manifest_table.spark.options import SourceOptions
from manifest_table.spark.schema import spark_schema
from manifest_table.spark.writer import StreamWriter, streaming_app_id

pytest_plugins = ["tests.spark.fixtures"]

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
ROWS_PER_FILE = 100


def rows(start: int, stop: int) -> pa.Table:
    return pa.table({"id": list(range(start, stop)), "name": [f"n{i}" for i in range(start, stop)]},
                    schema=SCHEMA)


def add_input_file(directory: Path, k: int) -> None:
    """Written aside and renamed in, so the file source never sees half a file."""
    staging = directory.parent / f"staging-{k}.parquet"
    pq.write_table(rows(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE), staging)
    staging.rename(directory / f"part-{k}.parquet")


def ids_of(table: mt.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def test_restarted_query_writes_each_row_once(spark, tmp_path: Path):
    source, checkpoint, uri = tmp_path / "in", tmp_path / "checkpoint", str(tmp_path / "t")
    source.mkdir()

    def run_until_caught_up():
        query = (spark.readStream.schema("id long, name string").option("maxFilesPerTrigger", 1)
                 .parquet(str(source)).writeStream.format("manifest_table")
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(uri))
        query.awaitTermination(120)
        return query

    for k in range(3):
        add_input_file(source, k)
    first = run_until_caught_up()  # batches 0, 1, 2: one file each
    t = mt.open_table(uri)
    app_id = f"spark-query:{first.id}"
    assert ids_of(t) == list(range(300))
    assert t.manifest().app_transactions == {app_id: 2}
    assert t.version == 3  # the create, then one version per batch

    # As if the driver died after our commit of batch 2 but before Spark logged it as done:
    # on restart Spark runs batch 2 again, and the sink must commit nothing for it.
    for name in ("2", ".2.crc"):
        (checkpoint / "commits" / name).unlink()
    for k in range(3, 5):
        add_input_file(source, k)
    second = run_until_caught_up()
    assert second.id == first.id and second.runId != first.runId
    assert [p.batchId for p in second.recentProgress] == [2, 3, 4]
    assert ids_of(t) == list(range(500))
    assert t.manifest().app_transactions == {app_id: 4}
    assert t.version == 5  # batch 2 again made no version; batches 3 and 4 made one each
    files_on_disk = {f"data/{p.name}" for p in (Path(uri) / "data").iterdir()}
    assert files_on_disk == {f.path for f in t.manifest().files}  # the replay's files were removed


def test_a_replayed_batch_commits_nothing(tmp_path: Path):
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    writer = StreamWriter(SourceOptions.parse({"path": t.uri, "app_id": "query-1"}), spark_schema(SCHEMA), False)
    writer.commit([writer.write(iter(rows(0, 10).to_batches()))], 0)
    writer.commit([writer.write(iter(rows(10, 20).to_batches()))], 1)
    assert t.version == 2 and ids_of(t) == list(range(20))
    replay = writer.write(iter(rows(10, 20).to_batches()))
    writer.commit([replay], 1)
    assert t.version == 2 and ids_of(t) == list(range(20))
    assert not any((Path(t.uri) / f.path).exists() for f in replay.files)
    writer.commit([writer.write(iter([]))], 2)  # an empty batch makes no version
    assert t.version == 2


def test_the_app_id_comes_from_the_checkpoint(tmp_path: Path):
    (tmp_path / "metadata").write_text('{"id":"3f2c"}\n')
    parse = SourceOptions.parse
    assert streaming_app_id(parse({"path": "t", "checkpointlocation": str(tmp_path)})) == "spark-query:3f2c"
    assert streaming_app_id(parse({"path": "t", "checkpointlocation": f"file://{tmp_path}"})) == "spark-query:3f2c"
    assert streaming_app_id(parse({"path": "t", "checkpointlocation": "s3a://b/ck/"})) == "spark-checkpoint:s3a://b/ck"
    assert streaming_app_id(parse({"path": "t", "app_id": "mine", "checkpointlocation": str(tmp_path)})) == "mine"
    with pytest.raises(InvalidArgumentError, match="checkpointLocation"):
        streaming_app_id(parse({"path": "t"}))

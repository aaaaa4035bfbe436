"""Float narrowing is a checked cast (issue 30 item 2): a finite value beyond float32's range
was stored as infinity through ``update(values=)``, update expressions and ``append``; now it
is refused and nothing is written, while NaN and infinities given as such are stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import manifest_table as mt
from manifest_table.cli import main
from manifest_table.errors import InvalidArgumentError, SchemaMismatchError
from tests.catalog import assert_rejected

SCHEMA = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("f32", pa.float32()),
                    ("l32", pa.list_(pa.float32())), ("s32", pa.struct([("x", pa.float32())])),
                    ("pair32", pa.list_(pa.float32(), 2))])
BEYOND = r"1e\+39 is beyond the range of float32"


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(tmp_path / "t", SCHEMA)
    t.append([{"id": 1, "f": 1e30, "f32": 1.5}])
    return t


@pytest.mark.parametrize("write, error", [
    (lambda t: t.update(values={"f32": 1e39}), InvalidArgumentError),
    (lambda t: t.update({"f32": "f * 1e9"}), InvalidArgumentError),
    (lambda t: t.update(values={"l32": [1.0, 1e39]}), InvalidArgumentError),
    (lambda t: t.update(values={"pair32": [1.0, 1e39]}), InvalidArgumentError),
    (lambda t: t.append([{"id": 2, "f32": 1e39}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "l32": [1e39]}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "s32": {"x": -1e39}}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "pair32": [1.0, 1e39]}]), SchemaMismatchError),
    (lambda t: t.append(pa.table({"id": [2], "f": [0.0], "f32": [1e39], "l32": pa.nulls(1, SCHEMA.field("l32").type),
                                  "s32": pa.nulls(1, SCHEMA.field("s32").type),
                                  "pair32": pa.nulls(1, SCHEMA.field("pair32").type)})), SchemaMismatchError),
    (lambda t: t.append(pa.table({"id": [2], "f": [0.0], "f32": [1.0], "l32": pa.nulls(1, SCHEMA.field("l32").type),
                                  "s32": pa.nulls(1, SCHEMA.field("s32").type),
                                  "pair32": pa.array([[1e39, 0.0]], pa.list_(pa.float64(), 2))})), SchemaMismatchError),
    (lambda t: t.append(pd.DataFrame({"id": [2], "f": [0.0], "f32": [np.float64(1e39)], "l32": [None],
                                      "s32": [None], "pair32": [None]})), SchemaMismatchError),
], ids=["values", "expression", "values-list", "values-fixed-size-list", "rows", "rows-list", "rows-struct",
        "rows-fixed-size-list", "arrow", "arrow-fixed-size-list", "pandas"])
def test_a_finite_value_beyond_float32_is_refused(table: mt.Table, write, error):
    assert_rejected(table.store, error, lambda: write(table), match=BEYOND.replace("1e\\+39", "-?1(.0*)?e\\+39"))


def test_doubles_in_fixed_size_lists_narrow_to_a_float32_column_of_their_size(table: mt.Table):
    """On main a fixed-size list was no nested type to ``appendable``: doubles were refused
    from Arrow, and Python floats built straight as float32, 1e39 stored as infinity."""
    nulls = {name: pa.nulls(1, SCHEMA.field(name).type) for name in ("f", "f32", "l32", "s32")}
    table.append(pa.table({"id": [3], **nulls, "pair32": pa.array([[0.5, -2.0]], pa.list_(pa.float64(), 2))}))
    with pytest.raises(SchemaMismatchError, match="pair32"):
        table.append(pa.table({"id": [4], **nulls, "pair32": pa.array([[0.5, 1, 2]], pa.list_(pa.float64(), 3))}))
    assert table.scan(where="id = 3").to_arrow().column("pair32").to_pylist() == [[0.5, -2.0]]


def test_nan_and_infinities_are_stored_as_given(table: mt.Table):
    table.update(values={"f32": float("-inf"), "f": float("nan"), "l32": [float("inf"), float("nan")]})
    row = table.to_arrow().to_pylist()[0]
    assert row["f32"] == float("-inf") and row["f"] != row["f"] and row["l32"][0] == float("inf")
    table.update({"f32": "f32 * 2"})  # -inf * 2 stays -inf: no finite value was lost
    assert table.to_arrow().column("f32").to_pylist() == [float("-inf")]
    table.update({"f32": "f / 1e10"})  # NaN / 1e10 is NaN
    assert np.isnan(table.to_arrow().column("f32").to_pylist()[0])


def test_the_cli_refuses_it_from_csv_and_json_lines(table: mt.Table, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]):
    """Arrow's CSV reader parsed 1e39 as float32 infinity; JSON lines went through the same cast."""
    narrow = mt.create_table(tmp_path / "n", pa.schema([("id", pa.int64()), ("f32", pa.float32())]))
    (tmp_path / "big.csv").write_text("id,f32\n1,1e39\n")
    (tmp_path / "big.jsonl").write_text('{"id": 1, "f32": 1e39}\n')
    (tmp_path / "fine.csv").write_text("id,f32\n2,3.4e38\n3,inf\n4,nan\n")
    for name in ("big.csv", "big.jsonl"):
        assert main(["append", narrow.uri, str(tmp_path / name)]) == 1
        assert "beyond the range of float32" in capsys.readouterr().err
    assert main(["append", narrow.uri, str(tmp_path / "fine.csv")]) == 0
    values = narrow.to_arrow().column("f32").to_pylist()
    assert values[:2] == [float(np.float32(3.4e38)), float("inf")] and np.isnan(values[2])
    assert main(["update", narrow.uri, "--value", "f32=1e39"]) == 1
    assert "beyond the range of float32" in capsys.readouterr().err

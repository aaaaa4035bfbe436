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
                    ("pair32", pa.list_(pa.float32(), 2)), ("m32", pa.map_(pa.string(), pa.float32()))])
BEYOND = r"1e\+39 is beyond the range of float32"


def arrow_row(**given: pa.Array) -> pa.Table:
    """One row of id 2 with ``given`` columns (Arrow arrays of their own types), nulls elsewhere."""
    columns = {f.name: given.get(f.name, pa.nulls(1, f.type)) for f in SCHEMA if f.name != "id"}
    return pa.table({"id": [2], **columns})


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
    (lambda t: t.update(values={"m32": [("k", 1e39)]}), InvalidArgumentError),
    (lambda t: t.append([{"id": 2, "f32": 1e39}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "l32": [1e39]}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "s32": {"x": -1e39}}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "pair32": [1.0, 1e39]}]), SchemaMismatchError),
    (lambda t: t.append([{"id": 2, "m32": [("k", 1.0), ("j", 1e39)]}]), SchemaMismatchError),
    (lambda t: t.append(arrow_row(f32=pa.array([1e39]))), SchemaMismatchError),
    (lambda t: t.append(arrow_row(pair32=pa.array([[1e39, 0.0]], pa.list_(pa.float64(), 2)))), SchemaMismatchError),
    (lambda t: t.append(arrow_row(m32=pa.array([[("k", 1e39)]], pa.map_(pa.string(), pa.float64())))),
     SchemaMismatchError),
    (lambda t: t.append(pd.DataFrame({"id": [2], "f": [0.0], "f32": [np.float64(1e39)], "l32": [None],
                                      "s32": [None], "pair32": [None], "m32": [None]})), SchemaMismatchError),
], ids=["values", "expression", "values-list", "values-fixed-size-list", "values-map", "rows", "rows-list",
        "rows-struct", "rows-fixed-size-list", "rows-map", "arrow", "arrow-fixed-size-list", "arrow-map", "pandas"])
def test_a_finite_value_beyond_float32_is_refused(table: mt.Table, write, error):
    assert_rejected(table.store, error, lambda: write(table), match=BEYOND.replace("1e\\+39", "-?1(.0*)?e\\+39"))


def test_doubles_in_fixed_size_lists_and_maps_narrow_to_float32_columns(table: mt.Table):
    """On main neither was a nested type to ``appendable``: doubles were refused from Arrow,
    and Python floats built straight as float32, 1e39 stored as infinity."""
    table.append(arrow_row(pair32=pa.array([[0.5, -2.0]], pa.list_(pa.float64(), 2)),
                           m32=pa.array([[("k", 0.25)]], pa.map_(pa.large_string(), pa.float64()))))
    with pytest.raises(SchemaMismatchError, match="pair32"):
        table.append(arrow_row(pair32=pa.array([[0.5, 1, 2]], pa.list_(pa.float64(), 3))))
    with pytest.raises(SchemaMismatchError, match="m32"):
        table.append(arrow_row(m32=pa.array([[(1, 0.5)]], pa.map_(pa.int64(), pa.float64()))))
    assert table.scan(columns=["pair32", "m32"], where="id = 2").to_arrow().to_pylist() == [
        {"pair32": [0.5, -2.0], "m32": [("k", 0.25)]}
    ]


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

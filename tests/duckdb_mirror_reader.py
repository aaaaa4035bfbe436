"""Run by tests/test_mirrors_duckdb.py in a subprocess whose ``sys.path`` starts with a
directory holding DuckDB 1.4.4 and its extensions from PyPI (``duckdb-ext-*``): reads each
query's rows and prints them, canonical, as JSON. ``canonical`` is imported by the test too.

stdin: {"extensions": dir, "secret": SQL or null, "queries": {label: SQL}}."""

from __future__ import annotations

import glob
import json
import sys
from typing import Any

EXTENSIONS = ("avro", "iceberg", "delta", "httpfs")


def canonical(names: list[str], records: list[tuple]) -> list[list[Any]]:
    """Rows with their columns in name order, each value as ``str`` (None kept), sorted."""
    order = sorted(range(len(names)), key=names.__getitem__)
    return sorted(([None if r[i] is None else str(r[i]) for i in order] for r in records), key=repr)


def main() -> None:
    import duckdb

    request = json.load(sys.stdin)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for name in EXTENSIONS:
        path = glob.glob(f"{request['extensions']}/**/{name}.duckdb_extension", recursive=True)[0]
        con.execute(f"LOAD '{path}'")
    con.execute("SET TimeZone = 'UTC'")
    if request["secret"]:
        con.execute(request["secret"])
    out = {"duckdb": duckdb.__version__}
    for label, sql in request["queries"].items():
        try:
            cursor = con.execute(sql)
            out[label] = canonical([d[0] for d in cursor.description], cursor.fetchall())
        except duckdb.Error as exc:
            out[label] = f"error: {exc}"
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

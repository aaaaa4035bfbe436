"""Run by tests/benchmarks/point_ops.py in a subprocess whose path starts with a directory
holding DuckDB 1.5.5 and ``duckdb-extension-ducklake`` (the suite's DuckDB has no DuckLake
extension on PyPI): a DuckLake catalog in a local directory, driven one JSON line at a time.

stdin lines: {"load": [parquet files], "order": column, "root": dir} makes table ``t`` from
the files' rows in that order; {"sql": statement} runs it and answers the wall-clock seconds
it took inside DuckDB's Python client (the pipe's round trip left out)."""

from __future__ import annotations

import glob
import json
import os
import sys
import time


def main() -> None:
    import duckdb
    import duckdb_extension_ducklake

    extension = glob.glob(os.path.join(os.path.dirname(duckdb_extension_ducklake.__file__), "**",
                                       "ducklake.duckdb_extension"), recursive=True)[0]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    print(json.dumps({"duckdb": duckdb.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        if "load" in request:
            root = request["root"]
            con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS lake (DATA_PATH '{root}/data/')")
            con.execute(f"CREATE TABLE lake.t AS SELECT * FROM read_parquet({request['load']!r}) "
                        f"ORDER BY {request['order']}")
        else:
            con.execute(request["sql"]).fetchall()
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main()

"""Run by the mirror tests (tests/mirrors/test_mirrors_duckdb.py, tests/mirrors/test_mirror_matrix.py) in a
subprocess whose ``sys.path`` starts with a directory holding one DuckDB release and its
extensions from PyPI (tests/reader_envs.py): reads each query's rows and prints them,
canonical (tests/mirror_canonical.py), as JSON; a query that fails gives ``"error: ..."``.

stdin: {"setup": [SQL, ...], "queries": {label: SQL}}: the setup statements (a secret, a
setting) run first, then the queries in order on the same connection. The extensions are
found under the directory the ``duckdb`` package was imported from; avro and httpfs load
before iceberg."""

from __future__ import annotations

import glob
import json
import os
import sys

from tests.mirror_canonical import canonical

EXTENSIONS = ("avro", "httpfs", "iceberg", "delta")


def main() -> None:
    import duckdb

    request = json.load(sys.stdin)
    where = os.path.dirname(os.path.dirname(duckdb.__file__))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for name in EXTENSIONS:
        path = glob.glob(f"{where}/**/{name}.duckdb_extension", recursive=True)[0]
        con.execute(f"LOAD '{path}'")
    con.execute("SET TimeZone = 'UTC'")
    for statement in request.get("setup", []):
        con.execute(statement)
    out = {"duckdb": duckdb.__version__}
    for label, sql in request["queries"].items():
        try:
            cursor = con.execute(sql)
            out[label] = canonical([d[0] for d in cursor.description], cursor.fetchall())
        except duckdb.Error as exc:
            out[label] = f"error: {type(exc).__name__}: {exc}"[:2000]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

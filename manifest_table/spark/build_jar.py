"""``python -m manifest_table.spark.build_jar``: build the jar of Spark's live-row function
(live_row.py) for the installed pyspark and print its path, to put in ``spark.jars`` where
the driver has no JDK."""

from __future__ import annotations

import sys

from .live_row import CLASS, built_jar


def main() -> None:
    jar = built_jar()
    if jar is None:
        sys.exit(f"cannot build the jar of {CLASS}: see the message above")
    print(jar)


if __name__ == "__main__":
    main()

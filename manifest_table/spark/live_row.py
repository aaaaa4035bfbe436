"""The JVM function that drops deleted rows inside Spark's own Parquet scan.

``manifest_table_live_row(<file key>, _metadata.row_index, <deletes>)`` is a Java UDF
(``LiveRow.java`` beside this module) that looks each row up in its file's deletion bitmap;
``<deletes>`` is a binary literal holding the bitmaps of the files read, so the filter needs no
join, no shuffle and no broadcast (docs/design/006-spark-deletes.md has the measurements). The
file key is ``_metadata.file_size``, a constant of the scan, when the files read have different
sizes (nearly always), else ``xxhash64(_metadata.file_name)``, computed per row.

The class is compiled on the driver, once per Spark version, by the JDK's ``javac`` against
the session's own Spark jars (so it always matches the running Spark's API), cached as a jar
under ``~/.cache/manifest_table`` (``$XDG_CACHE_HOME``), added to the session (``ADD JAR``, or
``addArtifacts`` over Spark Connect) and registered as a temporary function. Where any of that
is impossible (no JDK, a Spark Connect client without Spark's jars, the switch
``MANIFEST_TABLE_SPARK_JVM=0``) the caller falls back to the anti-join, which the log says once.
A jar put on the session's classpath some other way (``spark.jars``) is used as it is:
``python -m manifest_table.spark.build_jar`` builds it and prints its path."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pyroaring import BitMap
from pyspark.sql import Column
from pyspark.sql import functions as F

from ..format.manifest import DataFile

FUNCTION = "manifest_table_live_row"
CLASS = "manifest_table.spark.LiveRow"
SOURCE = Path(__file__).with_name("LiveRow.java")
SWITCH = "MANIFEST_TABLE_SPARK_JVM"
"""Set to ``0`` to never build or register the function (reads use the anti-join)."""
MAGIC = b"MTLIVE02"

log = logging.getLogger("manifest_table.spark")
_reported: set[str] = set()


def live_row_filter(
    spark: Any, files: Sequence[DataFile], deleted: Callable[[DataFile], BitMap], name_of: Callable[[DataFile], str]
) -> Column | None:
    """A filter keeping the live rows of a Parquet read of ``files`` (which must be read with
    Spark's ``_metadata`` columns available), or None when the function is not available in
    ``spark``. ``name_of`` gives the name Spark's ``_metadata.file_name`` has for a file."""
    if not available(spark):
        return None
    by_size = len({f.size for f in files}) == len(files)
    key = F.col("_metadata.file_size") if by_size else F.xxhash64(F.col("_metadata.file_name"))
    literal = deletes_literal(files, deleted, name_of, by_size)
    return F.call_function(FUNCTION, key, F.col("_metadata.row_index"), F.lit(literal))


def deletes_literal(
    files: Sequence[DataFile],
    deleted: Callable[[DataFile], BitMap],
    name_of: Callable[[DataFile], str],
    by_size: bool,
) -> bytearray:
    """The ``<deletes>`` argument of the function (its layout: LiveRow.java); ``by_size``:
    files are keyed by their sizes, which must differ, else by the hashes of their names."""
    out = bytearray(MAGIC)
    out += struct.pack(">ib", len(files), 1 if by_size else 0)
    for f in files:
        name, bitmap = name_of(f).encode(), deleted(f).serialize()
        out += struct.pack(">i", len(name)) + name + struct.pack(">qi", f.size, len(bitmap)) + bitmap
    return out


def available(spark: Any) -> bool:
    """True when ``FUNCTION`` can be called in ``spark``, registering it first if need be."""
    if os.environ.get(SWITCH, "1").strip() == "0":
        _report("switch", f"{SWITCH}=0")
        return False
    if spark.catalog.functionExists(FUNCTION) or _register(spark):
        return True  # registered before, or the class is on the session's classpath already
    jar = built_jar()
    if jar is None:
        return False
    try:
        if hasattr(spark, "_jsparkSession"):
            spark.sql(f"ADD JAR '{jar}'")
        else:  # Spark Connect: the server takes the jar as an artifact of this session
            spark.addArtifacts(str(jar))
    except Exception as exc:
        _report("add", f"adding {jar} to the Spark session failed ({_first_line(exc)})")
        return False
    if not _register(spark):
        _report("register", f"{CLASS} could not be registered from {jar}")
        return False
    return True


def _register(spark: Any) -> bool:
    try:
        spark.udf.registerJavaFunction(FUNCTION, CLASS, "boolean")
        return True
    except Exception:  # the class is not on the classpath (an AnalysisException)
        return False


def built_jar() -> Path | None:
    """The function's jar for the installed Spark, built with ``javac`` on first use and cached;
    None (logged once) when there is no JDK or no Spark jars to compile against."""
    jars = _spark_jars()
    javac = _javac()
    if jars is None or javac is None:
        missing = "JDK (javac)" if javac is None else "Spark jars (pyspark/jars or $SPARK_HOME/jars)"
        _report("build", f"cannot build {CLASS}: no {missing} on the driver")
        return None
    from pyspark import __version__ as spark_version

    digest = hashlib.sha256(SOURCE.read_bytes() + spark_version.encode()).hexdigest()[:16]
    target = _cache_dir() / f"manifest-table-spark-{digest}.jar"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        command = [javac, "--release", "17", "-nowarn", "-cp", os.path.join(jars, "*"), "-d", work, str(SOURCE)]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            _report("build", f"javac failed to build {CLASS}: {detail.strip()[:400]}")
            return None
        staged = Path(work) / "live_row.jar"
        with zipfile.ZipFile(staged, "w") as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for cls in sorted(Path(work).rglob("*.class")):
                jar.write(cls, cls.relative_to(work).as_posix())
        os.replace(staged, target)  # atomic: a concurrent build writes the same bytes
    return target


def _spark_jars() -> str | None:
    """The jars of the Spark this driver runs: pip's pyspark carries them, a Spark install
    has them under ``$SPARK_HOME``."""
    import pyspark

    homes = [os.path.dirname(pyspark.__file__), os.environ.get("SPARK_HOME") or ""]
    for jars in (os.path.join(home, "jars") for home in homes if home):
        if os.path.isdir(jars) and any(n.startswith("spark-catalyst") for n in os.listdir(jars)):
            return jars
    return None


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "manifest_table"


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def _report(kind: str, reason: str) -> None:
    """Log once per kind of reason that deleted rows are dropped by the slower anti-join."""
    if kind not in _reported:
        _reported.add(kind)
        log.warning("%s; Spark reads drop deleted rows with a broadcast anti-join instead (docs/spark.md)", reason)

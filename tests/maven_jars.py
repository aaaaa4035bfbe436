"""Jars the Spark tests need that pyspark does not ship: Hadoop's connectors for Google Cloud
Storage and Azure (tests/spark/test_spark_cloud.py). Maven fetches them from Maven Central on
first use (``mvn dependency:copy``, the artifact alone) into a per-user cache,
``$MANIFEST_TABLE_TEST_CACHE/jars`` or ``~/.cache/manifest_table/jars``, outside the clone: CI
runs in a fresh clone each time, and the cache makes every run after the first on a machine
skip Maven (about 40 MB, under a minute once)."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str
    classifier: str | None = None

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}" + (f":jar:{self.classifier}" if self.classifier else "")

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}" + (f"-{self.classifier}" if self.classifier else "") + ".jar"


def hadoop_version() -> str:
    """The Hadoop version of the installed pyspark (a connector must match it)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)[1]  # type: ignore[index]
    raise RuntimeError(f"no hadoop-client-api jar in {jars}")


def cloud_connectors() -> list[Artifact]:
    """Google's gcs-connector (Hadoop's own hadoop-gcp cannot be pointed at an emulator: it has
    no endpoint setting) and hadoop-azure's ABFS with the TLS library it loads."""
    return [Artifact("com.google.cloud.bigdataoss", "gcs-connector", "3.1.18", "shaded"),
            Artifact("org.apache.hadoop", "hadoop-azure", hadoop_version()),
            Artifact("org.wildfly.openssl", "wildfly-openssl", "2.2.5.Final")]


def cache_dir() -> Path:
    root = os.environ.get("MANIFEST_TABLE_TEST_CACHE") or Path.home() / ".cache" / "manifest_table"
    return Path(root) / "jars"


def fetch(artifacts: list[Artifact]) -> list[Path]:
    """The artifacts' jars, fetched by Maven the first time. A lock keeps two test runs from
    fetching at once; a jar is moved into the cache only once complete."""
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    paths = [target / a.file_name for a in artifacts]
    with open(target / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for artifact, path in zip(artifacts, paths):
            if not path.exists():
                _copy(artifact, path)
    return paths


def _copy(artifact: Artifact, path: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("the Spark cloud tests need Maven (mvn) to fetch Hadoop's connectors")
    staging = path.parent / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run([mvn, "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={artifact.coordinates}",
                    f"-DoutputDirectory={staging}"], check=True, stdin=subprocess.DEVNULL, timeout=900)
    os.replace(staging / artifact.file_name, path)
    shutil.rmtree(staging, ignore_errors=True)

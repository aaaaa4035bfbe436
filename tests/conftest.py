"""Shared fixtures. Each storage server (moto and SeaweedFS for S3, fake-gcs-server, Azurite)
starts once per session, and only when a test asks for it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from manifest_table.storage import store_for_uri
from manifest_table.storage.base import ObjectStore
from manifest_table.storage.local import LocalStore
from manifest_table.storage.memory import MemoryStore
from tests import azurite_server, seaweedfs_server
from tests.gcs_server import start_gcs_server
from tests.s3_server import start_moto_server
from tests.server_process import ServerProcess

pytest_plugins = ["tests.run_records"]

MOTO_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


# --- S3 (moto) -------------------------------------------------------------------------
@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """URL of a moto S3 server for the whole session. The AWS_* variables point the default
    boto3 chain at it, in this process and in any subprocess a test starts."""
    endpoint, stop = start_moto_server()
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in {**MOTO_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
                mp.setenv(name, value)
            yield endpoint
    finally:
        stop()


@pytest.fixture
def s3_uri(moto_endpoint: str) -> str:
    """``s3://<fresh bucket>/tables/t``."""
    bucket = f"test-{uuid.uuid4().hex[:24]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/tables/t"


def _serving(started: tuple[str, ServerProcess], environment: dict[str, str]) -> Iterator[str]:
    """The body of a server's session fixture: its endpoint, with ``environment`` set while it
    runs; the server stops when the session ends."""
    endpoint, server = started
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in environment.items():
                mp.setenv(name, value)
            yield endpoint
    finally:
        server.stop()


# --- S3 (SeaweedFS) ---------------------------------------------------------------------
@pytest.fixture(scope="session")
def seaweedfs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a SeaweedFS S3 gateway. Stores reach it through ``seaweedfs_server.storage_options``,
    not the environment, which the moto fixture owns."""
    yield from _serving(seaweedfs_server.start_seaweedfs(tmp_path_factory.mktemp("seaweedfs")), {})


@pytest.fixture
def seaweedfs_uri(seaweedfs_endpoint: str) -> str:
    """``s3://tables/<fresh prefix>/t`` on SeaweedFS."""
    return f"s3://{seaweedfs_server.BUCKET}/{uuid.uuid4().hex}/t"


# --- GCS (fake-gcs-server) -----------------------------------------------------------------
@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a fake-gcs-server; ``STORAGE_EMULATOR_HOST`` points every GCS client at it, in
    this process and in subprocesses."""
    endpoint, server = start_gcs_server(tmp_path_factory.mktemp("gcs"))
    yield from _serving((endpoint, server), {"STORAGE_EMULATOR_HOST": endpoint})


@pytest.fixture
def gcs_uri(gcs_endpoint: str) -> str:
    """``gs://<fresh bucket>/tables/t``."""
    from manifest_table.storage.gcs import GcsStore  # google-cloud-storage only for tests on GCS

    bucket = f"test-{uuid.uuid4().hex[:24]}"
    GcsStore.from_uri(f"gs://{bucket}").client.create_bucket(bucket)
    return f"gs://{bucket}/tables/t"


# --- Azure (Azurite) -----------------------------------------------------------------------
@pytest.fixture(scope="session")
def azurite_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of Azurite's blob service; ``AZURE_STORAGE_CONNECTION_STRING`` names its account."""
    endpoint, server = azurite_server.start_azurite(tmp_path_factory.mktemp("azurite"))
    environment = {"AZURE_STORAGE_CONNECTION_STRING": azurite_server.connection_string(endpoint)}
    yield from _serving((endpoint, server), environment)


@pytest.fixture
def azure_uri(azurite_endpoint: str) -> str:
    """``az://<fresh container>/tables/t``."""
    from manifest_table.storage.azure import AzureStore  # azure-storage-blob only for tests on Azure

    container = f"test-{uuid.uuid4().hex[:24]}"
    AzureStore.from_uri(f"az://{container}").client.create_container()
    return f"az://{container}/tables/t"


# --- stores ----------------------------------------------------------------------------
STORE_KINDS = ["memory", "local", "s3", "seaweedfs", "gcs", "azure"]
"""Every store the conformance tests run on; ``store`` (below) takes the first three, which
the rest of the suite was written against."""


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "local":
        return LocalStore(tmp_path / "table")
    return store_for_uri(*store_location(kind, request))


def store_location(kind: str, request: pytest.FixtureRequest) -> tuple[str, dict[str, str] | None]:
    """A fresh, empty location on the server of ``kind`` and the storage options that reach
    it, given explicitly so that a store pickled into a process started earlier (whose
    environment the session fixtures did not set) reaches it too."""
    if kind == "s3":
        endpoint = request.getfixturevalue("moto_endpoint")
        return request.getfixturevalue("s3_uri"), {"endpoint_url": endpoint, "region": MOTO_ENV["AWS_REGION"],
                                                   "access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
                                                   "secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}
    if kind == "seaweedfs":
        endpoint = request.getfixturevalue("seaweedfs_endpoint")
        return request.getfixturevalue("seaweedfs_uri"), seaweedfs_server.storage_options(endpoint)
    if kind == "gcs":
        return request.getfixturevalue("gcs_uri"), {"endpoint_url": request.getfixturevalue("gcs_endpoint")}
    if kind == "azure":
        endpoint = request.getfixturevalue("azurite_endpoint")
        return request.getfixturevalue("azure_uri"), {"connection_string": azurite_server.connection_string(endpoint)}
    raise ValueError(kind)


@pytest.fixture(params=["memory", "local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A fresh, empty store of each kind."""
    return make_store(request.param, request, tmp_path)

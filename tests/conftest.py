"""Shared fixtures. The moto S3 server starts only when a test asks for S3."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import boto3
import pytest

from manifest_table.storage.base import ObjectStore
from manifest_table.storage.local import LocalStore
from manifest_table.storage.memory import MemoryStore
from manifest_table.storage.s3 import S3Store
from tests.s3_server import start_moto_server

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


# --- stores ----------------------------------------------------------------------------
def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "local":
        return LocalStore(tmp_path / "table")
    if kind == "s3":
        return S3Store.from_uri(request.getfixturevalue("s3_uri"))
    raise ValueError(kind)


@pytest.fixture(params=["memory", "local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A fresh, empty store of each kind."""
    return make_store(request.param, request, tmp_path)

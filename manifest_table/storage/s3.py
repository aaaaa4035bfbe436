"""A table on S3 (or an S3-compatible endpoint), made transactional by S3 conditional writes.

Create-only is ``PutObject`` with ``If-None-Match: *``; compare-and-swap is ``PutObject`` with
``If-Match: <etag>``. Both are atomic on the server, so no lock service is needed. Errors
map to the protocol's three outcomes as ``storage/cloud.py`` describes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.loaders
import botocore.session
import pyarrow.fs as pafs
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..errors import NotFound, PreconditionFailed, StoreError
from .base import ObjectInfo
from .cloud import CONNECT_TIMEOUT, READ_TIMEOUT, CloudStore, resolve_options, split_location

_MAX_ATTEMPTS = 5

_OPTION_ALIASES = {
    "endpoint_url": "endpoint_url",
    "region": "region",
    "access_key_id": "access_key_id",
    "secret_access_key": "secret_access_key",
    "session_token": "session_token",
    "AWS_ENDPOINT_URL": "endpoint_url",
    "AWS_REGION": "region",
    "AWS_ACCESS_KEY_ID": "access_key_id",
    "AWS_SECRET_ACCESS_KEY": "secret_access_key",
    "AWS_SESSION_TOKEN": "session_token",
}

# Loose on purpose: legacy buckets may hold upper case and underscores.
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_LOST_RACE_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}
# Hosts where pyarrow should find the endpoint itself from the region (virtual-hosted
# addressing, like boto3) rather than be pinned to the URL boto3 shows in client.meta.
_AWS_HOST_SUFFIXES = (".amazonaws.com", ".amazonaws.com.cn")


class S3Store(CloudStore):
    """Objects under ``s3://bucket/prefix``.

    Anything left as None (credentials, region, endpoint) comes from the standard boto3 chain:
    environment variables (``AWS_ENDPOINT_URL`` included), config files, instance roles.
    """

    scheme = "s3"
    service = "S3"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(bucket, prefix, client)
        self._endpoint_url = endpoint_url
        self._region = region
        self._access_key_id = access_key_id
        self._secret_access_key = secret_access_key
        self._session_token = session_token

    @classmethod
    def from_uri(cls, uri: str, storage_options: dict[str, str] | None = None) -> S3Store:
        """Parse ``s3://bucket[/prefix]`` (or Hadoop's ``s3a://``). Options are the
        constructor's keyword arguments, also accepted under their ``AWS_*`` env-var names."""
        bucket, prefix = split_location(uri, ("s3", "s3a"), _BUCKET, "bucket")
        return cls(bucket, prefix, **resolve_options(storage_options, _OPTION_ALIASES, "S3"))

    def _new_client(self) -> Any:
        # A private session: boto3's default session is not thread-safe. Its data loader (the
        # service's JSON models) is the process's one: parsing them took more than half of a
        # client's construction, which every store (every open_table) pays.
        core = botocore.session.Session()
        core.register_component("data_loader", _data_loader())
        session = boto3.session.Session(
            aws_access_key_id=self._access_key_id,
            aws_secret_access_key=self._secret_access_key,
            aws_session_token=self._session_token,
            region_name=self._region,
            botocore_session=core,
        )
        return session.client(
            "s3",
            endpoint_url=self._endpoint_url,
            config=Config(
                retries={"mode": "standard", "max_attempts": _MAX_ATTEMPTS},
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=READ_TIMEOUT,
            ),
        )

    def _new_filesystem(self) -> pafs.S3FileSystem:
        """Pointed at the endpoint, region and credentials that the boto3 client (the control
        plane) resolved, so the two can never disagree about where the table is or who is
        reading it."""
        return _arrow_s3(self.client)

    # --- ObjectStore ---------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        return self.get_with_etag(key)[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        # GetObject returns the ETag of exactly the bytes it sends: one request, no race.
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._root + key)
            return response["Body"].read(), response["ETag"]
        except ClientError as e:
            if _code(e) in _NOT_FOUND_CODES:
                raise NotFound(key) from None
            raise self._error("get", key, e) from e
        except BotoCoreError as e:
            raise self._error("get", key, e) from e

    def head(self, key: str) -> ObjectInfo | None:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self._root + key)
        except ClientError as e:
            if _code(e) in _NOT_FOUND_CODES:
                return None
            raise self._error("head", key, e) from e
        except BotoCoreError as e:
            raise self._error("head", key, e) from e
        return ObjectInfo(
            key,
            response["ContentLength"],
            response["ETag"],
            response["LastModified"].astimezone(UTC),
        )

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._put("put_if_absent", key, data, IfNoneMatch="*")

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self._put("put_if_match", key, data, IfMatch=etag)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # S3 lists keys in UTF-8 byte order, which is Python's str order: no sort needed,
        # and pages stream instead of being collected.
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._root + prefix
            )
            for page in pages:
                for obj in page.get("Contents", ()):
                    yield ObjectInfo(
                        obj["Key"][len(self._root) :],
                        obj["Size"],
                        obj["ETag"],
                        obj["LastModified"].astimezone(UTC),
                    )
        except (ClientError, BotoCoreError) as e:
            raise self._error("list", prefix + "*", e) from e

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._root + key)
        except (ClientError, BotoCoreError) as e:
            raise self._error("delete", key, e) from e

    # --- helpers -------------------------------------------------------------------------

    def _error(self, op: str, key: str, cause: BaseException, note: str = "") -> StoreError:
        """A missing bucket is the user's to fix, and botocore's text does not say so."""
        if isinstance(cause, ClientError) and _code(cause) == "NoSuchBucket":
            return StoreError(
                f"the S3 bucket {self.bucket!r} does not exist (at the endpoint in use): create it "
                f"first, e.g. aws s3 mb s3://{self.bucket}"
            )
        return super()._error(op, key, cause, note)

    def _put(self, op: str, key: str, data: bytes, **condition: str) -> str:
        try:
            response = self.client.put_object(Bucket=self.bucket, Key=self._root + key, Body=bytes(data), **condition)
        except ClientError as e:
            code = _code(e)
            if code in _LOST_RACE_CODES or _status(e) == 412:
                if e.response.get("ResponseMetadata", {}).get("RetryAttempts", 0):
                    # botocore retried after a timeout or a 5xx: the refused attempt may have
                    # been refused because an earlier attempt of ours had already landed.
                    raise self._error(op, key, e, "outcome unknown after a retry") from e
                raise PreconditionFailed(key) from None
            if code in _NOT_FOUND_CODES and "IfMatch" in condition:
                raise NotFound(key) from None
            raise self._error(op, key, e) from e
        except BotoCoreError as e:
            raise self._error(op, key, e) from e
        return response["ETag"]


@functools.cache
def _data_loader() -> botocore.loaders.Loader:
    """botocore's loader of service models, shared by every client (it only reads files)."""
    return botocore.loaders.create_loader()


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _status(e: ClientError) -> int | None:
    return e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _arrow_s3(client: Any) -> pafs.S3FileSystem:
    """An arrow S3 filesystem configured like ``client``. ``allow_delayed_open`` makes an
    output stream buffer its first part before starting a multipart upload, so a data file
    smaller than a part goes up as one PutObject (a 1-row append: 1 write request, not 3:
    create, part, complete); larger files stream in parts with bounded memory as before.
    Its cost, errors of the open reported only at the first write or at close, is none here:
    a data file counts as written only once its stream has closed cleanly."""
    endpoint = urlsplit(client.meta.endpoint_url)
    custom_endpoint = not (endpoint.hostname or "").endswith(_AWS_HOST_SUFFIXES)
    region = client.meta.region_name
    # botocore's signer holds the credentials it resolved from the chain; there is no public
    # accessor on a client (one passed in has no session we could ask).
    credentials = client._request_signer._credentials
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    return pafs.S3FileSystem(
        access_key=frozen.access_key if frozen else None,
        secret_key=frozen.secret_key if frozen else None,
        session_token=frozen.token if frozen else None,
        anonymous=frozen is None,
        region=region if region and region != "aws-global" else "us-east-1",
        endpoint_override=endpoint.netloc if custom_endpoint else None,
        scheme=endpoint.scheme if custom_endpoint else "https",
        connect_timeout=CONNECT_TIMEOUT,
        request_timeout=READ_TIMEOUT,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=_MAX_ATTEMPTS),
        allow_delayed_open=True,
    )

"""A table on Google Cloud Storage, made transactional by generation preconditions.

Every write of an object gets a new generation number (even a rewrite of equal bytes), and
a write can be conditioned on it: ``ifGenerationMatch=0`` creates only if no live object
has the name, ``ifGenerationMatch=<g>`` replaces only generation ``g``. The server checks
atomically, so the generation is our etag. A failed precondition is 412 whether the object
changed or is missing. Control plane: ``google-cloud-storage``; data plane: pyarrow's
``GcsFileSystem`` on the same endpoint and credentials (ranged, parallel reads).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import google.auth.transport.requests
import pyarrow.fs as pafs
from google.api_core import exceptions as google_errors
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import GoogleAuthError
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY
from google.oauth2 import service_account
from requests.exceptions import RequestException

from ..errors import InvalidArgumentError, NotFound, PreconditionFailed, RateLimited
from .base import ObjectInfo
from .cloud import CONNECT_TIMEOUT, READ_TIMEOUT, CloudStore, resolve_options, split_location

_OPTION_ALIASES = {
    "endpoint_url": "endpoint_url",
    "project": "project",
    "token": "token",
    "STORAGE_EMULATOR_HOST": "endpoint_url",
    "GOOGLE_CLOUD_PROJECT": "project",
    "GOOGLE_APPLICATION_CREDENTIALS": "token",
}
ANONYMOUS = "anonymous"
_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]*")
_ERRORS = (google_errors.GoogleAPIError, RequestException, GoogleAuthError)
_TIMEOUT = (CONNECT_TIMEOUT, READ_TIMEOUT)
_ARROW_RETRY_LIMIT = timedelta(seconds=60)
"""How long pyarrow's GCS client retries a transient failure (its default is 15 minutes)."""
_TOKEN_MARGIN = timedelta(minutes=5)
"""A data-plane access token is renewed this long before it expires."""


@dataclass(frozen=True)
class GcsConnection:
    """Where a GCS store connects and as whom, resolved from its options and the environment
    (what another client of the same bucket, such as Spark's connector, is given)."""

    endpoint: str | None
    """An emulator's URL, or None for Google's."""
    project: str | None
    key_file: str | None
    """A service account's key file, or None."""
    anonymous: bool
    """No credentials: an emulator's, or ``token="anonymous"``."""


class GcsStore(CloudStore):
    """Objects under ``gs://bucket/prefix``.

    ``endpoint_url`` (else ``$STORAGE_EMULATOR_HOST``) points both clients at an emulator,
    where no credentials are needed. ``token`` is ``"anonymous"`` or the path of a service
    account's key file; without it, both clients use Google's application default credentials
    (``$GOOGLE_APPLICATION_CREDENTIALS``, gcloud's login, the metadata server).
    """

    scheme = "gs"
    service = "GCS"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        project: str | None = None,
        token: str | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(bucket, prefix, client)
        self._endpoint_url = endpoint_url
        self._project = project
        self._token = token
        self._fs_expires: datetime | None = None
        if token not in (None, ANONYMOUS):
            try:
                self._credentials()
            except (OSError, ValueError, GoogleAuthError) as e:
                raise InvalidArgumentError(
                    f"GCS token {token!r} is neither {ANONYMOUS!r} nor a service account key file: {e}"
                ) from None

    @classmethod
    def from_uri(cls, uri: str, storage_options: dict[str, str] | None = None) -> GcsStore:
        """Parse ``gs://bucket[/prefix]``. Options are the constructor's keyword arguments, also
        accepted under the environment variable names Google's tools read."""
        bucket, prefix = split_location(uri, ("gs",), _BUCKET, "bucket")
        return cls(bucket, prefix, **resolve_options(storage_options, _OPTION_ALIASES, "GCS"))

    # --- clients ----------------------------------------------------------------------------

    @property
    def connection(self) -> GcsConnection:
        anonymous = self._anonymous()
        return GcsConnection(self._endpoint(), self._project, None if anonymous else self._token, anonymous)

    def _endpoint(self) -> str | None:
        endpoint = self._endpoint_url or os.environ.get("STORAGE_EMULATOR_HOST")
        if endpoint and "://" not in endpoint:
            endpoint = f"http://{endpoint}"  # the emulator convention: host:port
        return endpoint.rstrip("/") if endpoint else None

    def _anonymous(self) -> bool:
        """An emulator needs no credentials, and looking them up would fail where none exist."""
        return self._token == ANONYMOUS or (self._token is None and self._endpoint() is not None)

    def _credentials(self) -> Any:
        """google-auth credentials for the token, or None for the default chain."""
        if self._anonymous():
            return AnonymousCredentials()
        if self._token is None:
            return None
        return service_account.Credentials.from_service_account_file(self._token, scopes=_SCOPES)

    def _new_client(self) -> storage.Client:
        endpoint = self._endpoint()
        return storage.Client(
            project=self._project,
            credentials=self._credentials(),
            client_options={"api_endpoint": endpoint} if endpoint else None,
        )

    def _new_filesystem(self) -> pafs.GcsFileSystem:
        endpoint = urlsplit(self._endpoint() or "")
        token: dict[str, Any] = {}
        credentials = self._credentials()
        if credentials is not None and not self._anonymous():
            # pyarrow takes no credentials file, only an access token and its expiry.
            try:
                credentials.refresh(google.auth.transport.requests.Request())
            except _ERRORS as e:
                raise self._error("sign-in for the data plane", "", e) from e
            expiry = credentials.expiry.replace(tzinfo=UTC)
            token = {"access_token": credentials.token, "credential_token_expiration": expiry}
            self._fs_expires = expiry
        return pafs.GcsFileSystem(
            anonymous=self._anonymous(),
            **token,
            scheme=endpoint.scheme or None,
            endpoint_override=endpoint.netloc or None,
            project_id=self._project,
            retry_time_limit=_ARROW_RETRY_LIMIT,
        )

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The data plane; rebuilt with a fresh access token when the last one nears expiry."""
        with self._lock:
            if self._fs_expires is not None and datetime.now(UTC) > self._fs_expires - _TOKEN_MARGIN:
                self._fs = self._fs_expires = None
            return super().arrow_filesystem()

    # --- ObjectStore ------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        return self.get_with_etag(key)[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        # The download's response headers carry the generation of exactly these bytes.
        blob = self._blob(key)
        data = self._call("get", key, lambda: blob.download_as_bytes(timeout=_TIMEOUT))
        return data, str(blob.generation)

    def head(self, key: str) -> ObjectInfo | None:
        try:
            blob = self._call(
                "head", key, lambda: self.client.bucket(self.bucket).get_blob(self._root + key, timeout=_TIMEOUT)
            )
        except NotFound:
            return None
        return None if blob is None else _info(key, blob)

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._put("put_if_absent", key, data, 0)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        if not etag.isdigit():
            raise PreconditionFailed(key)  # not a generation: it matches no object
        return self._put("put_if_match", key, data, int(etag))

    @property
    def pointer_may_lag(self) -> bool:
        """GCS allows about one write per second to one object name and answers more with 429:
        a swap of the pointer is the only write that repeats a name."""
        return True

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # GCS lists names in lexicographic (UTF-8 byte) order, which is Python's str order;
        # pages stream. A 404 here is a missing bucket: an error, not an empty listing.
        try:
            for blob in self.client.list_blobs(
                self.bucket,
                prefix=self._root + prefix,
                timeout=_TIMEOUT,
                fields="items(name,size,generation,updated),nextPageToken",
            ):
                yield _info(blob.name[len(self._root) :], blob)
        except _ERRORS as e:
            raise self._error("list", prefix + "*", e) from e

    def delete(self, key: str) -> None:
        try:
            self._call("delete", key, lambda: self._blob(key).delete(timeout=_TIMEOUT))
        except NotFound:
            pass

    # --- helpers ----------------------------------------------------------------------------

    def _blob(self, key: str) -> storage.Blob:
        return self.client.bucket(self.bucket).blob(self._root + key)

    def _call(self, op: str, key: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except google_errors.NotFound:
            raise NotFound(key) from None
        except _ERRORS as e:
            raise self._error(op, key, e) from e

    def _put(self, op: str, key: str, data: bytes, generation: int) -> str:
        # A swap refused for the object's write rate is not retried here (the client would
        # retry it for two minutes): the version log decides (RateLimited).
        blob, retry = self._blob(key), _WatchedRetry(key if generation else None)
        try:
            blob.upload_from_string(bytes(data), if_generation_match=generation, retry=retry, timeout=_TIMEOUT)
        except google_errors.PreconditionFailed as e:
            if retry.retried:
                # The refused attempt may have been refused because an earlier one had landed.
                raise self._error(op, key, e, "outcome unknown after a retry") from e
            raise PreconditionFailed(key) from None
        except _ERRORS as e:  # a 404 here is a missing bucket, not a missing key
            raise self._error(op, key, e) from e
        return str(blob.generation)


class _WatchedRetry:
    """google-cloud-storage's default retry of one request, noting whether it repeated it.
    The library calls a retry object as ``retry(func)()``; ``Retry.__call__`` takes the
    ``on_error`` callback that every retried failure goes through. With ``rate_limited_key``,
    a 429 ends the request as ``RateLimited`` instead of being retried."""

    def __init__(self, rate_limited_key: str | None = None) -> None:
        self.retried = False
        self._rate_limited_key = rate_limited_key

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        return DEFAULT_RETRY(func, on_error=self._note)

    def _note(self, error: Exception) -> None:
        if self._rate_limited_key is not None and _status(error) == 429:
            raise RateLimited(
                f"{self._rate_limited_key}: GCS refused a write, more than about one a second to this object ({error})"
            ) from error
        self.retried = True


def _status(error: Exception) -> int | None:
    """The HTTP status of a failed request, as the API layer or the upload layer reports it."""
    if isinstance(error, google_errors.GoogleAPICallError):
        return error.code
    return getattr(getattr(error, "response", None), "status_code", None)


def _info(key: str, blob: storage.Blob) -> ObjectInfo:
    return ObjectInfo(key, blob.size, str(blob.generation), blob.updated.astimezone(UTC))

"""A table on Azure Blob Storage, made transactional by the service's conditional writes.

Create-only is Put Blob with ``If-None-Match: *`` (the SDK's ``overwrite=False``), refused
with 409 ``BlobAlreadyExists``; compare-and-swap is Put Blob with ``If-Match: <etag>``
(``MatchConditions.IfNotModified``), refused with 412 ``ConditionNotMet``. Every write gets
a new ETag, even of equal bytes. Control plane: ``azure-storage-blob``; data plane: pyarrow's
``AzureFileSystem`` on the same endpoint and credentials (ranged, parallel reads).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs
from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from ..errors import InvalidArgumentError, NotFound, PreconditionFailed
from .base import ObjectInfo
from .cloud import CONNECT_TIMEOUT, READ_TIMEOUT, CloudStore, resolve_options, split_location

_OPTION_ALIASES = {
    "account_name": "account_name",
    "account_key": "account_key",
    "connection_string": "connection_string",
    "endpoint_url": "endpoint_url",
    "AZURE_STORAGE_ACCOUNT": "account_name",
    "AZURE_STORAGE_KEY": "account_key",
    "AZURE_STORAGE_CONNECTION_STRING": "connection_string",
}
_CONTAINER = re.compile(r"\$?[a-z0-9][a-z0-9-]*")
_LOST_RACE_CODES = {"BlobAlreadyExists", "ConditionNotMet"}
_AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""The emulator's published account key (``UseDevelopmentStorage=true``)."""


@dataclass(frozen=True)
class AzureAccount:
    """Where a storage account's blob service is and how to sign in to it. Neither a key nor
    a SAS token means Azure's default credential chain (``azure-identity``)."""

    name: str
    blob_url: str
    key: str | None = None
    sas_token: str | None = None

    @classmethod
    def resolve(
        cls,
        account_name: str | None = None,
        account_key: str | None = None,
        connection_string: str | None = None,
        endpoint_url: str | None = None,
    ) -> AzureAccount:
        """From the storage options; without any, from ``$AZURE_STORAGE_CONNECTION_STRING``,
        else ``$AZURE_STORAGE_ACCOUNT`` and ``$AZURE_STORAGE_KEY`` (the Azure CLI's names)."""
        if connection_string:
            if account_name or account_key or endpoint_url:
                raise InvalidArgumentError(
                    "give Azure a connection_string or account_name/account_key/endpoint_url, not both"
                )
            return cls._parse(connection_string)
        if account_name:
            return cls(
                account_name, (endpoint_url or f"https://{account_name}.blob.core.windows.net").rstrip("/"), account_key
            )
        if account_key or endpoint_url:
            raise InvalidArgumentError("the Azure options account_key and endpoint_url need account_name")
        if os.environ.get("AZURE_STORAGE_CONNECTION_STRING"):
            return cls._parse(os.environ["AZURE_STORAGE_CONNECTION_STRING"])
        if os.environ.get("AZURE_STORAGE_ACCOUNT"):
            return cls.resolve(os.environ["AZURE_STORAGE_ACCOUNT"], os.environ.get("AZURE_STORAGE_KEY"))
        raise InvalidArgumentError(
            "Azure needs a storage account: give account_name or connection_string "
            "(or set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT)"
        )

    @classmethod
    def _parse(cls, connection_string: str) -> AzureAccount:
        fields = dict(part.split("=", 1) for part in connection_string.split(";") if "=" in part)
        if fields.get("UseDevelopmentStorage", "").lower() == "true":
            return cls("devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1", _AZURITE_KEY)
        name = fields.get("AccountName")
        if not name:
            raise InvalidArgumentError("the Azure connection string has no AccountName")
        protocol, suffix = fields.get("DefaultEndpointsProtocol", "https"), fields.get("EndpointSuffix")
        url = fields.get("BlobEndpoint") or f"{protocol}://{name}.blob.{suffix or 'core.windows.net'}"
        return cls(name, url.rstrip("/"), fields.get("AccountKey"), fields.get("SharedAccessSignature"))

    def arrow_endpoint(self) -> dict[str, str]:
        """pyarrow's form of ``blob_url``: an authority that starts with a dot is the account's
        host suffix (``.blob.core.windows.net``); any other is a host whose first path segment
        is the account, as emulators serve it."""
        url = urlsplit(self.blob_url)
        if url.path.strip("/") == self.name:
            authority, dfs = url.netloc, url.netloc
        elif url.netloc.startswith(self.name + ".") and url.path.strip("/") == "":
            authority = url.netloc[len(self.name) :]
            dfs = authority.replace(".blob.", ".dfs.", 1)
        else:
            raise InvalidArgumentError(
                f"Azure endpoint {self.blob_url!r} is neither https://{self.name}.blob.<suffix> "
                f"nor <scheme>://<host>/{self.name}"
            )
        return {
            "blob_storage_authority": authority,
            "blob_storage_scheme": url.scheme,
            "dfs_storage_authority": dfs,
            "dfs_storage_scheme": url.scheme,
        }


class AzureStore(CloudStore):
    """Objects under ``az://container/prefix``; ``bucket`` is the container."""

    scheme = "az"
    service = "Azure"

    def __init__(self, container: str, prefix: str = "", *, account: AzureAccount, client: Any = None) -> None:
        super().__init__(container, prefix, client)
        self.account = account
        account.arrow_endpoint()  # refuse an endpoint pyarrow cannot address now, not at the first read

    @classmethod
    def from_uri(cls, uri: str, storage_options: dict[str, str] | None = None) -> AzureStore:
        """Parse ``az://container[/prefix]``. The account comes from the options (also accepted
        under the Azure CLI's environment variable names) or from the environment."""
        container, prefix = split_location(uri, ("az",), _CONTAINER, "container")
        options = resolve_options(storage_options, _OPTION_ALIASES, "Azure")
        return cls(container, prefix, account=AzureAccount.resolve(**options))

    def _credential(self) -> Any:
        if self.account.key:
            return {"account_name": self.account.name, "account_key": self.account.key}
        if self.account.sas_token:
            return self.account.sas_token
        from azure.identity import DefaultAzureCredential  # only for those who sign in this way

        return DefaultAzureCredential()

    def _new_client(self) -> ContainerClient:
        return ContainerClient(
            self.account.blob_url,
            self.bucket,
            credential=self._credential(),
            connection_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
        )

    def _new_filesystem(self) -> pafs.AzureFileSystem:
        secret = (
            {"account_key": self.account.key}
            if self.account.key
            else ({"sas_token": self.account.sas_token} if self.account.sas_token else {})
        )
        return pafs.AzureFileSystem(account_name=self.account.name, **secret, **self.account.arrow_endpoint())

    # --- ObjectStore ------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        return self.get_with_etag(key)[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        # The download pins the ETag of its first response: the bytes are exactly that blob's.
        def download() -> tuple[bytes, str]:
            downloader = self.client.download_blob(self._root + key)
            return downloader.readall(), downloader.properties.etag

        return self._call("get", key, download)

    def head(self, key: str) -> ObjectInfo | None:
        try:
            props = self._call("head", key, lambda: self.client.get_blob_client(self._root + key).get_blob_properties())
        except NotFound:
            return None
        return _info(key, props)

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._put("put_if_absent", key, data, overwrite=False)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self._put(
            "put_if_match", key, data, overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified
        )

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Azure lists blob names in lexicographic order; pages stream.
        try:
            for props in self.client.list_blobs(name_starts_with=self._root + prefix):
                yield _info(props.name[len(self._root) :], props)
        except AzureError as e:
            raise self._error("list", prefix + "*", e) from e

    def delete(self, key: str) -> None:
        try:
            self._call("delete", key, lambda: self.client.delete_blob(self._root + key))
        except NotFound:
            pass

    # --- helpers ----------------------------------------------------------------------------

    def _call(self, op: str, key: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ResourceNotFoundError as e:
            if getattr(e, "error_code", None) == "ContainerNotFound":
                raise self._error(op, key, e) from e
            raise NotFound(key) from None
        except AzureError as e:
            raise self._error(op, key, e) from e

    def _put(self, op: str, key: str, data: bytes, **condition: Any) -> str:
        retried: list[bool] = []
        try:
            result = self.client.get_blob_client(self._root + key).upload_blob(
                bytes(data), retry_hook=lambda **_: retried.append(True), **condition
            )
        except ResourceNotFoundError as e:
            if getattr(e, "error_code", None) == "BlobNotFound" and "etag" in condition:
                raise NotFound(key) from None
            raise self._error(op, key, e) from e
        except HttpResponseError as e:
            if getattr(e, "error_code", None) in _LOST_RACE_CODES or e.status_code == 412:
                if retried:
                    # The SDK repeated the request after a timeout or a 5xx: the refused attempt
                    # may have been refused because an earlier one had landed.
                    raise self._error(op, key, e, "outcome unknown after a retry") from e
                raise PreconditionFailed(key) from None
            raise self._error(op, key, e) from e
        except AzureError as e:
            raise self._error(op, key, e) from e
        return result["etag"]


def _info(key: str, props: Any) -> ObjectInfo:
    # Listings give the ETag unquoted; every other answer, and If-Match, quotes it.
    etag = props.etag if props.etag.startswith('"') else f'"{props.etag}"'
    return ObjectInfo(key, props.size, etag, props.last_modified.astimezone(UTC))

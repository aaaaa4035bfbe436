"""What the stores on object services (S3, Google Cloud Storage, Azure Blob Storage) share:
a location ``scheme://bucket/prefix`` checked once, storage options checked against the
names a store knows, and clients built on first use in each process, so that constructing
and pickling a store (for Spark executors and spawned processes) is cheap and makes no call.

Each store maps its service's answers to the three outcomes the commit protocol tells apart:
a lost race (``PreconditionFailed``), a missing key (``NotFound``), and everything else
(``StoreError``): "the write may or may not have happened", resolved by reading back. A
conditional write that the client library repeated after a timeout or a 5xx and that then
lost is reported as ``StoreError``, not as a lost race: our own first attempt may be what
it lost to (docs/protocol.md, "Retries").
"""

from __future__ import annotations

import re
import threading
from abc import abstractmethod
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from ..errors import InvalidArgumentError, StoreError
from .base import ObjectStore

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\\]")

CONNECT_TIMEOUT = 5
READ_TIMEOUT = 30
"""Seconds; the same for every service's control-plane client."""


def split_location(uri: str, schemes: tuple[str, ...], bucket: re.Pattern[str], what: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``scheme://bucket[/prefix]``, with ``scheme`` one of ``schemes``
    and ``bucket`` matching the service's naming rule. Object keys are names, not paths:
    ``p/x/../y`` would store objects under a literal ``..`` that readers which normalise
    would look for elsewhere, so such prefixes are refused, never normalised."""
    parts = urlsplit(uri)
    path = parts.path.removeprefix("/").rstrip("/")
    if parts.scheme not in schemes or not bucket.fullmatch(parts.netloc) or parts.query or parts.fragment:
        raise InvalidArgumentError(f"not a {schemes[0]}://{what}/prefix URI: {uri!r}")
    segments = set(path.split("/")) if path else set()
    for bad, name in (("", "an empty segment (//)"), (".", "a '.' segment"), ("..", "a '..' segment")):
        if bad in segments:
            raise InvalidArgumentError(f"{uri!r} has {name} in its prefix: give the canonical prefix")
    if _UNPRINTABLE.search(path):
        raise InvalidArgumentError(f"{uri!r} has a backslash or a control character in its prefix")
    return parts.netloc, path


def resolve_options(options: dict[str, str] | None, aliases: dict[str, str], service: str) -> dict[str, str]:
    """Storage options renamed to the store's keyword arguments. ``aliases`` maps every name
    a store accepts (its own, and the environment variable names its provider's tools use)
    to the argument; an unknown name or two values for one argument is an error."""
    resolved: dict[str, str] = {}
    unknown = sorted(k for k in (options or {}) if k not in aliases)
    if unknown:
        raise InvalidArgumentError(
            f"unknown {service} storage option(s) {', '.join(unknown)}; expected one of {', '.join(aliases)}"
        )
    for key, value in (options or {}).items():
        name = aliases[key]
        if resolved.get(name, value) != value:
            raise InvalidArgumentError(f"conflicting values given for {service} option {name}")
        resolved[name] = value
    return resolved


class CloudStore(ObjectStore):
    """Objects under ``prefix`` in one bucket (an Azure container). Subclasses build their
    client and their pyarrow filesystem; this class builds each once per process."""

    scheme: str
    service: str
    """The service's name in messages: S3, GCS, Azure."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._root = f"{self.prefix}/" if self.prefix else ""
        self._client = client
        self._fs: pafs.FileSystem | None = None
        self._lock = threading.RLock()  # building the filesystem may build the client

    @abstractmethod
    def _new_client(self) -> Any:
        """The service's client for the control plane."""

    @abstractmethod
    def _new_filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem for the data plane, with the same endpoint and credentials."""

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._new_client()
        return self._client

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    self._fs = self._new_filesystem()
        return self._fs, f"{self.bucket}/{self.prefix}".rstrip("/")

    def __getstate__(self) -> dict[str, Any]:
        # Clients, filesystems and locks do not pickle; copies rebuild them on first use. A
        # client passed to the constructor is dropped too: the copy builds its own from the
        # stored options and the receiving process's environment.
        state = self.__dict__.copy()
        state.update(_client=None, _fs=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _error(self, op: str, key: str, cause: BaseException, note: str = "") -> StoreError:
        detail = f" ({note})" if note else ""
        return StoreError(
            f"{self.service} {op} of {self.scheme}://{self.bucket}/{self._root}{key} failed{detail}: {cause}"
        )

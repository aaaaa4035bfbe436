"""Object stores: one interface for the control plane, its implementations, and the mapping
from a table URI to a store."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from urllib.parse import urlparse

from ..arguments import check_location, check_unicode
from ..errors import InvalidArgumentError
from .base import ObjectInfo, ObjectStore
from .fileio import FileIO, ParquetSource
from .local import LocalStore
from .memory import MemoryStore


def store_for_uri(uri: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> ObjectStore:
    """A path or ``file://`` URI means a local directory; ``s3://bucket/prefix`` S3,
    ``gs://bucket/prefix`` Google Cloud Storage, ``az://container/prefix`` Azure Blob Storage.
    Each service's client library is imported only by those who use it."""
    text = check_location(uri)
    for key, value in (storage_options or {}).items():
        check_unicode(f"storage option {key!r}", value)
    parsed = urlparse(text)
    if parsed.scheme in ("s3", "s3a"):
        from .s3 import S3Store

        return S3Store.from_uri(text, storage_options)
    if parsed.scheme == "gs":
        return _cloud_store("gcs", "GcsStore")(text, storage_options)
    if parsed.scheme == "az":
        return _cloud_store("azure", "AzureStore")(text, storage_options)
    if storage_options:
        raise InvalidArgumentError(
            f"storage options {sorted(storage_options)} apply only to s3://, gs:// and az:// URIs"
        )
    if parsed.scheme == "file":
        return LocalStore(_file_uri_path(text))
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive
        raise InvalidArgumentError(
            f"unsupported URI scheme {parsed.scheme!r} in {text!r}: "
            "use a local path, file://, s3://, gs:// or az://, or pass store="
        )
    return LocalStore(text)


def _cloud_store(module: str, name: str) -> Callable[[str, dict[str, str] | None], ObjectStore]:
    """``from_uri`` of the store class ``name`` in ``storage/<module>.py``, whose client
    library comes with the extra of the same name: missing, it is a clear error."""
    try:
        store_class = getattr(importlib.import_module(f".{module}", __name__), name)
    except ImportError as exc:
        raise InvalidArgumentError(f"{name} needs {exc.name}: pip install 'manifest_table[{module}]'") from None
    return store_class.from_uri


def _file_uri_path(uri: str) -> str:
    """The absolute directory of a ``file:///abs/path`` URI. ``file://t`` names a host, not a
    directory, and would silently mean the current directory: it is refused, as are ``.`` and
    ``..`` segments, which a URI must not need."""
    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        raise InvalidArgumentError(
            f"{uri!r} names the host {parsed.netloc!r}, not a directory: a file URI "
            f"is file:///absolute/path (three slashes), or pass a plain path"
        )
    if not parsed.path.startswith("/") or parsed.params or parsed.query or parsed.fragment:
        raise InvalidArgumentError(f"{uri!r} is not a file:///absolute/path URI")
    if {".", ".."} & set(parsed.path.split("/")):
        raise InvalidArgumentError(f"{uri!r} has a '.' or '..' segment: give the directory's canonical path")
    return parsed.path


__all__ = ["FileIO", "ParquetSource", "LocalStore", "MemoryStore", "ObjectInfo", "ObjectStore", "store_for_uri"]

"""Object stores: one interface for the control plane, three implementations, and the
mapping from a table URI to a store."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ..errors import InvalidArgumentError
from .base import ObjectInfo, ObjectStore
from .files import FileIO
from .local import LocalStore
from .memory import MemoryStore


def store_for_uri(uri: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> ObjectStore:
    """A path or ``file://`` URI means a local directory; ``s3://bucket/prefix`` means S3."""
    text = os.fspath(uri)
    parsed = urlparse(text)
    if parsed.scheme in ("s3", "s3a"):
        from .s3 import S3Store  # boto3 is imported only by those who use S3

        return S3Store.from_uri(text, storage_options)
    if storage_options:
        raise InvalidArgumentError(f"storage options {sorted(storage_options)} apply only to s3:// URIs")
    if parsed.scheme == "file":
        return LocalStore(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive
        raise InvalidArgumentError(f"unsupported URI scheme {parsed.scheme!r} in {text!r}: "
                                   "use a local path, file:// or s3://, or pass store=")
    return LocalStore(text)


__all__ = ["FileIO", "LocalStore", "MemoryStore", "ObjectInfo", "ObjectStore", "store_for_uri"]

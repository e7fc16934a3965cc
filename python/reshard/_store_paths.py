"""Folders in object stores (``s3://``, ``gs://``) as TensorStore reads them, for reshard.orbax.

Orbax writes its arrays through TensorStore, so reshard.orbax reads them
through TensorStore too; for a checkpoint in a store, this module gives the
kvstore specs and a small pathlib-like ``StorePath`` (the part of
``pathlib.Path`` that reading an Orbax checkpoint's own files uses), with the
configuration the stores' own tools read:

- ``s3://``: ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (an S3-compatible
  endpoint, addressed path-style), ``AWS_REGION`` or ``AWS_DEFAULT_REGION``
  (``us-east-1`` with an endpoint of its own), and credentials from the
  environment (``AWS_ACCESS_KEY_ID`` ...), else ``AWS_PROFILE``'s profile, else
  AWS's default chain.
- ``gs://``: Application Default Credentials, as TensorStore finds them
  (anonymous without any); ``STORAGE_EMULATOR_HOST`` points TensorStore at an
  emulator through ``TENSORSTORE_GCS_HTTP_URL``, TensorStore's own variable for
  it (set from the former when it is not set itself).

TensorStore's errors become reshard's StorageError subclasses, without the
store's response body (which can echo signing details).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import tensorstore as ts

from . import _core
from .errors import (AccessDeniedError, BucketNotFoundError, InvalidArgumentError, ObjectNotFoundError,
                     ReshardError, StoreError, StoreUnreachableError, UnsupportedError)


def parse(value: Any, argument: str) -> tuple[str, str, str]:
    """(scheme, bucket, key) of a path or URL, as reshard's C++ library parses it (see _core._parse_location)."""
    from ._paths import fspath

    return tuple(_core._parse_location(fspath(value, argument), argument))


def _gcs_emulator() -> None:
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator and not os.environ.get("TENSORSTORE_GCS_HTTP_URL"):
        os.environ["TENSORSTORE_GCS_HTTP_URL"] = emulator if "://" in emulator else f"http://{emulator}"


def _aws_credentials() -> dict[str, Any]:
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return {"type": "environment"}
    if os.environ.get("AWS_PROFILE"):
        return {"type": "profile", "profile": os.environ["AWS_PROFILE"]}
    return {"type": "default"}


def kvstore_spec(scheme: str, bucket: str, key: str) -> dict[str, Any]:
    """The TensorStore kvstore spec of the object or prefix `key` of `bucket` ("" for the bucket's root)."""
    if scheme == "s3":
        spec: dict[str, Any] = {"driver": "s3", "bucket": bucket, "path": key,
                                "aws_credentials": _aws_credentials()}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if endpoint:
            spec["endpoint"] = endpoint
            region = region or "us-east-1"  # as the AWS tools sign for an endpoint of one's own
        if region:
            spec["aws_region"] = region
        return spec
    if scheme == "gs":
        _gcs_emulator()
        return {"driver": "gcs", "bucket": bucket, "path": key}
    raise UnsupportedError(f"{scheme}://{bucket}/{key}: reshard.orbax reads local folders, s3:// and gs://")


# TensorStore's error text: "CODE: message [http_response_body='...'] [http_response_code='403'] ...".
_ANNOTATION = re.compile(r"\s*\[([\w-]+)='((?:[^'\\]|\\.)*)'\]")
_BY_STATUS = {"PERMISSION_DENIED": AccessDeniedError, "UNAUTHENTICATED": AccessDeniedError,
              "NOT_FOUND": ObjectNotFoundError, "UNAVAILABLE": StoreUnreachableError,
              "DEADLINE_EXCEEDED": StoreUnreachableError}


def store_error(where: str, e: Exception) -> ReshardError:
    """A TensorStore failure reading `where` as reshard's StorageError subclass: the status and the store's
    own message, its response body left out."""
    text = str(e)
    notes = dict(_ANNOTATION.findall(text))
    message = _ANNOTATION.sub("", text).strip()
    status = message.split(":", 1)[0]
    cls = _BY_STATUS.get(status, StoreError)
    if cls is ObjectNotFoundError and "NoSuchBucket" in message:
        cls = BucketNotFoundError
    if "http_response_code" in notes:
        message += f" (HTTP {notes['http_response_code']})"
    return cls(f"{where}: {message}")


class StorePath:
    """An object or a folder (a prefix) in a store: ``/``, ``name``, ``parent``, ``is_file``, ``is_dir``,
    ``iterdir``, ``read_bytes``, as ``pathlib.Path`` has them. Each call asks the store."""

    def __init__(self, scheme: str, bucket: str, key: str) -> None:
        self.scheme, self.bucket, self.key = scheme, bucket, key.strip("/")

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}" if self.key else f"{self.scheme}://{self.bucket}"

    def __repr__(self) -> str:
        return f"StorePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorePath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __truediv__(self, name: str) -> StorePath:
        return StorePath(self.scheme, self.bucket, f"{self.key}/{name}" if self.key else str(name))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> StorePath:
        return StorePath(self.scheme, self.bucket, self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    def resolve(self) -> StorePath:
        return self

    def kvstore(self, folder: bool = False) -> dict[str, Any]:
        """This place's kvstore spec; a folder's path ends in '/' (TensorStore joins keys literally)."""
        return kvstore_spec(self.scheme, self.bucket, self.key + "/" if folder and self.key else self.key)

    def _bucket_store(self) -> ts.KvStore:
        try:
            return ts.KvStore.open(kvstore_spec(self.scheme, self.bucket, "")).result()
        except ValueError as e:
            raise store_error(str(self), e) from None

    def read_bytes(self) -> bytes:
        """The object's bytes; ObjectNotFoundError (a FileNotFoundError) when there is none."""
        try:
            found = self._bucket_store().read(self.key).result()
        except ValueError as e:
            raise store_error(str(self), e) from None
        if found.state != "value":
            raise ObjectNotFoundError(f"{self}: no such object")
        return bytes(found.value)

    def is_file(self) -> bool:
        """Whether an object has this key."""
        try:
            self.read_bytes()
        except ObjectNotFoundError:
            return False
        return True

    def _keys_under(self) -> list[str]:
        prefix = f"{self.key}/".encode() if self.key else b""
        store = self._bucket_store()
        try:
            keys = store.list(ts.KvStore.KeyRange(prefix, _prefix_end(prefix))).result()
        except ValueError as e:
            raise store_error(str(self), e) from None
        return [k.decode("utf-8", errors="surrogateescape") for k in keys]

    def relative_keys(self) -> list[str]:
        """The keys of every object under this folder, relative to it, from one listing."""
        start = len(self.key) + 1 if self.key else 0
        return [k[start:] for k in self._keys_under()]

    def is_dir(self) -> bool:
        """Whether any object's key starts with this one and a '/'."""
        return bool(self._keys_under())

    def folders_holding(self, name: str) -> list[str]:
        """The names of the folders right under this one that hold an object `name`, from one listing."""
        start = len(self.key) + 1 if self.key else 0
        found = set()
        for key in self._keys_under():
            parts = key[start:].split("/")
            if len(parts) == 2 and parts[1] == name and parts[0]:
                found.add(parts[0])
        return sorted(found)

    def iterdir(self) -> Iterator[StorePath]:
        """The objects and folders right under this folder (each once)."""
        start = len(self.key) + 1 if self.key else 0
        names = sorted({k[start:].split("/", 1)[0] for k in self._keys_under()})
        return iter([self / n for n in names if n])


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (b"" for no end)."""
    data = bytearray(prefix)
    while data and data[-1] == 0xFF:
        data.pop()
    if data:
        data[-1] += 1
    return bytes(data)


def path_of(value: Any, argument: str) -> Any:
    """A local path as ``pathlib.Path``, an ``s3://`` or ``gs://`` URL as a StorePath (never through
    pathlib, which would fold "s3://" into "s3:/"); another scheme is an InvalidArgumentError naming
    `argument`."""
    import pathlib

    scheme, bucket, key = parse(value, argument)
    if scheme == "local":
        return pathlib.Path(key)
    if scheme in ("s3", "gs"):
        return StorePath(scheme, bucket, key)
    raise InvalidArgumentError(f"{argument}: {scheme}://{bucket}/{key}: reshard.orbax reads local folders, "
                               "s3:// and gs://")



"""An archive in S3-compatible object storage (``--archive s3://bucket/prefix``), via boto3.

The client is boto3's default: credentials from the standard chain (environment, shared
files, instance roles) and the endpoint from ``AWS_ENDPOINT_URL`` (MinIO, R2, Ceph, any S3
API). Nothing here logs or stores a credential: errors name the bucket, key and the
service's error code only.

A crawl writes its WARC files into a local spool directory (``archive-spool`` in its state
directory); each file, once rolled, is uploaded (multipart past ``PART_BYTES``) by one
background thread and then deleted from the spool. A crawl that ends waits for its uploads;
a file it could not upload stays in the spool and the crawl ends with a ``StateError`` naming
it. What a killed process had written stays in the spool too: the next crawl with that state
directory uploads it first (its records are whole but for at most the last one).

Item exports to ``s3://`` URLs go through the same client (``exports.py``).
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError

from crawlfleet.archive.protocols import WARC_SUFFIX
from crawlfleet.errors import ConfigError, StateError

PART_BYTES = 8 * 1024 * 1024
"""Multipart threshold and part size (S3's minimum part is 5 MiB)."""


@dataclass(frozen=True, slots=True)
class S3Location:
    """``s3://bucket/prefix``: the bucket and the key prefix (no slash at either end)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """``ConfigError`` for what is not ``s3://bucket[/prefix]``."""
        if not url.startswith("s3://"):
            raise ConfigError(f"not an s3:// URL: {url!r}")
        bucket, _, prefix = url[len("s3://") :].partition("/")
        if not bucket:
            raise ConfigError(f"no bucket in {url!r}: give s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A WARC object: its name relative to the prefix, size and last change (epoch s)."""

    name: str
    size_bytes: int
    modified_at: float


def _describe(exc: Exception, what: str) -> StateError:
    if isinstance(exc, S3UploadFailedError) and isinstance(exc.__context__, ClientError):
        exc = exc.__context__  # the service's answer, without boto3's local path
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "error")
        return StateError(f"{what}: {code} {error.get('Message', '')}".strip())
    return StateError(f"{what}: {type(exc).__name__}: {exc}")


class S3Archive:
    """The objects under one ``S3Location``."""

    def __init__(self, location: S3Location, client: Any = None) -> None:
        self.location = location
        self._client = client if client is not None else boto3.client("s3")
        self._transfer = TransferConfig(
            multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES, use_threads=False
        )

    def upload(self, path: Path, name: str) -> None:
        """Put the file at ``path`` as ``name`` (multipart past ``PART_BYTES``)."""
        key = self.location.key(name)
        try:
            self._client.upload_file(str(path), self.location.bucket, key, Config=self._transfer)
        except (BotoCoreError, ClientError, S3UploadFailedError, OSError) as exc:
            where = f"s3://{self.location.bucket}/{key}"
            raise _describe(exc, f"cannot upload {path.name} to {where}") from None

    def files(self) -> list[StoredFile]:
        """The ``.warc.gz`` objects under the prefix, by name."""
        found: list[StoredFile] = []
        prefix = f"{self.location.prefix}/" if self.location.prefix else ""
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.location.bucket, Prefix=prefix
            )
            for page in pages:
                for entry in page.get("Contents", []):
                    key: str = entry["Key"]
                    if key.endswith(WARC_SUFFIX):
                        modified: dt.datetime = entry["LastModified"]
                        found.append(
                            StoredFile(key[len(prefix) :], entry["Size"], modified.timestamp())
                        )
        except (BotoCoreError, ClientError) as exc:
            raise _describe(exc, f"cannot list {self.location}") from None
        return sorted(found, key=lambda f: f.name)

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``name`` from ``offset`` (one ranged GET)."""
        key = self.location.key(name)
        try:
            answer = self._client.get_object(
                Bucket=self.location.bucket, Key=key, Range=f"bytes={offset}-{offset + length - 1}"
            )
            data: bytes = answer["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise _describe(exc, f"cannot read {key} in {self.location}") from None
        return data

    def download(self, name: str, path: Path) -> None:
        try:
            self._client.download_file(
                self.location.bucket, self.location.key(name), str(path), Config=self._transfer
            )
        except (BotoCoreError, ClientError, OSError) as exc:
            raise _describe(exc, f"cannot download {name} from {self.location}") from None

    def delete(self, name: str) -> None:
        try:
            self._client.delete_object(Bucket=self.location.bucket, Key=self.location.key(name))
        except (BotoCoreError, ClientError) as exc:
            raise _describe(exc, f"cannot delete {name} from {self.location}") from None


class Uploader:
    """Uploads a spool's finished files in one background thread, deleting each once stored.

    ``submit`` never blocks the crawl; ``close`` waits for every upload and raises a
    ``StateError`` naming the files kept in the spool when any failed.
    """

    def __init__(self, archive: S3Archive, spool: Path) -> None:
        self._archive = archive
        self._spool = spool
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="crawlfleet-archive-upload")
        self._uploads: list[Future[None]] = []

    def leftovers(self) -> list[Path]:
        """Files a killed process left in the spool, uploaded first."""
        return sorted(self._spool.glob(f"*{WARC_SUFFIX}")) if self._spool.is_dir() else []

    def submit(self, path: Path) -> None:
        self._uploads.append(self._pool.submit(self._upload, path))

    def _upload(self, path: Path) -> None:
        self._archive.upload(path, path.name)
        path.unlink()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        failures = [str(error) for upload in self._uploads if (error := upload.exception())]
        if failures:
            raise StateError(
                f"{len(failures)} archive file(s) not uploaded, kept in {self._spool}: {failures[0]}"
            )

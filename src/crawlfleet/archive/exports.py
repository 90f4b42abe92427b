"""Item exports to object storage (``-o s3://bucket/prefix/items.parquet``).

An export to an ``s3://`` URL is written whole to a local temporary file, then uploaded
through the archive's client (``s3.py``: boto3's credentials chain, ``AWS_ENDPOINT_URL``;
multipart past ``PART_BYTES``) and the local file deleted. An upload that fails raises a
``StateError`` naming the object and the local file, which is kept.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from crawlfleet.archive.protocols import S3_SCHEME
from crawlfleet.errors import ConfigError, StateError


def is_object_url(target: Path | str) -> bool:
    """Whether ``target`` names an object (``s3://...``) rather than a local file."""
    return isinstance(target, str) and target.startswith(S3_SCHEME)


def _object_name(url: str) -> str:
    """The last part of an object URL's key (its suffix names the export format)."""
    name = PurePosixPath(url[len(S3_SCHEME) :])
    if len(name.parts) < 2 or url.endswith("/"):
        raise ConfigError(f"no object name in {url!r}: give s3://bucket/prefix/items.jsonl")
    return name.name


@contextlib.contextmanager
def export_file(target: Path | str) -> Iterator[Path]:
    """The local file to write ``target``'s export to; uploaded when the block ends.

    A local ``target`` is yielded as is. An ``s3://`` one gets a file of the same name in a
    new temporary directory, uploaded once the block ends without error, then removed.
    """
    if not is_object_url(target):
        yield Path(target)
        return
    assert isinstance(target, str)
    name = _object_name(target)
    try:
        from crawlfleet.archive.s3 import S3Archive, S3Location
    except ImportError:
        raise ConfigError("s3:// exports need boto3: pip install 'crawlfleet[archive]'") from None

    bucket, _, key = target[len(S3_SCHEME) :].partition("/")
    archive = S3Archive(S3Location(bucket, ""))
    spool = Path(tempfile.mkdtemp(prefix="crawlfleet-export-"))
    local = spool / name
    try:
        yield local
    except BaseException:
        shutil.rmtree(spool, ignore_errors=True)
        raise
    try:
        archive.upload(local, key)
    except StateError as exc:
        raise StateError(f"{exc}; the export is kept in {local}") from None
    shutil.rmtree(spool, ignore_errors=True)


def export_to(target: Path | str, write: Callable[[Path], int]) -> int:
    """``write(local file)``'s count, the file uploaded when ``target`` is an ``s3://`` URL."""
    with export_file(target) as local:
        return write(local)

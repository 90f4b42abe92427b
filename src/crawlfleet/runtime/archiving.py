"""Opening a crawl's archive (``--archive``): its WARC files and their capture index.

Embedded, the index is ``archive.sqlite`` in the crawl's state directory. A directory target
gets the files themselves; an ``s3://bucket/prefix`` target gets them from a spool in the
state directory (``archive-spool``), each uploaded once rolled (``archive/s3.py``).
``fastwarc``, ``isal`` and ``boto3`` (the ``archive`` extra) are imported only when a crawl
archives.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.errors import ConfigError
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.archive.keeper import Archive

SPOOL_DIR = "archive-spool"
S3_SCHEME = "s3://"


def archive_root(target: str) -> str:
    """The canonical form of an ``archive`` target: an absolute directory, or ``s3://...``.

    ``ConfigError`` for another URL scheme.
    """
    if target.startswith(S3_SCHEME):
        from crawlfleet.archive.s3 import S3Location

        return str(S3Location.parse(target))
    if "://" in target:
        raise ConfigError(f"archive target {target!r}: give a directory or s3://bucket/prefix")
    return str(Path(target).expanduser().resolve())


def open_archive(settings: Settings, stack: AsyncExitStack) -> Archive | None:
    """The crawl's archive, closed by ``stack`` (None without ``archive``).

    ``ConfigError`` when the ``archive`` extra is missing (a distributed crawl with an
    archive is refused by the settings' checks).
    """
    if settings.archive is None:
        return None
    root = archive_root(settings.archive)
    try:
        from crawlfleet.archive.keeper import Archive, IndexBatch  # fastwarc: the archive extra
        from crawlfleet.archive.warc import WarcFiles
    except ImportError as exc:
        raise ConfigError(
            f"--archive needs the archive extra ({exc}): pip install 'crawlfleet[archive]'"
        ) from None
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    directory, on_closed = Path(root), None
    if root.startswith(S3_SCHEME):
        directory, on_closed = _spool(root, settings.state_dir / SPOOL_DIR, stack)
    index = SqliteCaptureIndex(settings.state_dir / INDEX_FILE)
    index.set_root(root)
    files = WarcFiles(
        directory,
        crawl_id=settings.crawl_id,
        max_file_bytes=settings.archive_file_bytes,
        on_closed=on_closed,
    )
    archive = Archive(files, IndexBatch(index), crawl_id=settings.crawl_id)
    stack.callback(archive.close)  # before the uploads are waited for (the stack is LIFO)
    return archive


def _spool(root: str, spool: Path, stack: AsyncExitStack) -> tuple[Path, Callable[[Path], None]]:
    """The spool the files are written to and what uploads each finished one; files a
    killed crawl left in the spool are uploaded first."""
    from crawlfleet.archive.s3 import S3Archive, S3Location, Uploader

    uploader = Uploader(S3Archive(S3Location.parse(root)), spool)
    stack.callback(uploader.close)
    for leftover in uploader.leftovers():
        uploader.submit(leftover)
    return spool, uploader.submit

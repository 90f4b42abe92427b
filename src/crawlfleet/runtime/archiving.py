"""Opening a crawl's archive (``--archive``): its WARC files and their capture index.

Embedded, the index is ``archive.sqlite`` in the crawl's state directory. ``fastwarc`` is
imported only here, so a crawl without an archive runs without the ``archive`` extra.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.errors import ConfigError
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.archive.keeper import Archive


def archive_root(target: str) -> Path:
    """The directory of an ``archive`` target; ``ConfigError`` for what is not one."""
    if "://" in target:
        raise ConfigError(f"archive target {target!r}: give a directory")
    return Path(target).expanduser().resolve()


def open_archive(settings: Settings, stack: AsyncExitStack) -> Archive | None:
    """The crawl's archive, closed by ``stack`` (None without ``archive``).

    ``ConfigError`` for a distributed crawl: its capture index is not kept yet.
    """
    if settings.archive is None:
        return None
    if settings.redis_url is not None:
        raise ConfigError(
            "--archive keeps its index in an embedded crawl's state only (no --redis)"
        )
    root = archive_root(settings.archive)
    try:
        from crawlfleet.archive.keeper import Archive, IndexBatch  # fastwarc: the archive extra
        from crawlfleet.archive.warc import WarcFiles
    except ImportError as exc:
        raise ConfigError(
            f"--archive needs the archive extra ({exc}): pip install 'crawlfleet[archive]'"
        ) from None
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    index = SqliteCaptureIndex(settings.state_dir / INDEX_FILE)
    index.set_root(str(root))
    files = WarcFiles(root, crawl_id=settings.crawl_id, max_file_bytes=settings.archive_file_bytes)
    archive = Archive(files, IndexBatch(index), crawl_id=settings.crawl_id)
    stack.callback(archive.close)
    return archive

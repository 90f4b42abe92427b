"""Opening a crawl's archive (``--archive``): its WARC files and their capture index.

Embedded, the index is ``archive.sqlite`` in the crawl's state directory; distributed, the
``archive_captures`` table in the crawl's PostgreSQL (every worker writes there). A directory
target gets the files themselves (workers: a directory they share); an ``s3://bucket/prefix``
target gets them from a spool in the state directory (``archive-spool``; a worker's own
``archive-spool/<host>-<pid>``), each uploaded once rolled (``archive/s3.py``). A worker
also uploads what a dead worker of its host left in its spool. Which index, which spool and
how rows are written is ``runtime/backends.py``'s choice (``archive_layout``).
``fastwarc``, ``isal`` and ``boto3`` (the ``archive`` extra) are imported only when a crawl
archives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from crawlfleet.archive.protocols import S3_SCHEME, WARC_SUFFIX
from crawlfleet.errors import ConfigError
from crawlfleet.runtime.backends import ArchiveLayout, archive_layout, open_capture_index
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.archive.keeper import Archive


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
    """The crawl's archive, closed by ``stack`` (None without ``archive``); where its index
    and spool are, and how rows are written, is ``runtime/backends.py``'s choice.

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
    layout = archive_layout(settings)
    directory, on_closed = Path(root), None
    if root.startswith(S3_SCHEME):
        directory, on_closed = _spool(root, layout, stack)
    index = open_capture_index(settings)
    index.set_root(root)
    files = WarcFiles(
        directory,
        crawl_id=settings.crawl_id,
        max_file_bytes=settings.archive_file_bytes,
        on_closed=on_closed,
    )
    if layout.row_at_a_time:  # a worker's loop stops between tasks: each row before its lease ends
        batch = IndexBatch(index, max_rows=1, threaded=True)
    else:
        batch = IndexBatch(index, alone=True)  # the state directory is locked: one writer
    archive = Archive(files, batch, crawl_id=settings.crawl_id)
    stack.push_async_callback(archive.close)  # before the uploads are waited for (LIFO)
    return archive


def _spool(
    root: str, layout: ArchiveLayout, stack: AsyncExitStack
) -> tuple[Path, Callable[[Path], None]]:
    """The spool the files are written to and what uploads each finished one; files a
    killed crawl (or a dead worker of this host) left in a spool are uploaded first."""
    from crawlfleet.archive.s3 import S3Archive, S3Location, Uploader

    uploader = Uploader(S3Archive(S3Location.parse(root)), layout.spool)
    stack.callback(uploader.close)
    leftovers = uploader.leftovers()
    if layout.per_process:
        leftovers += [
            path
            for dead in _dead_spools(layout.spool)
            for path in sorted(dead.glob(f"*{WARC_SUFFIX}"))
        ]
    for leftover in leftovers:
        uploader.submit(leftover)
    return layout.spool, uploader.submit


def _dead_spools(own: Path) -> list[Path]:
    """The spools beside ``own`` (``<host>-<pid>``) of this host's workers whose process is gone."""
    host = own.name.rpartition("-")[0]
    found = []
    for spool in own.parent.glob(f"{host}-*"):
        pid = spool.name.rpartition("-")[2]
        if not pid.isdigit() or spool == own:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            found.append(spool)
        except PermissionError:  # alive, another user's
            continue
    return found

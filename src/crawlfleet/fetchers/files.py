"""The file fetcher: ``file:`` URLs read from the local disk, answered like HTTP."""

from __future__ import annotations

import asyncio
import mimetypes
import os
import time
from email.utils import formatdate
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import FetchError, TooLarge
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest, FetchResult

_LOCAL_HOSTS = frozenset({"", "localhost"})


class FileFetcher:
    """Fetches ``file:`` URLs; a ``Fetcher``.

    A regular file answers 200 with a Content-Type guessed from its name; a missing path or
    a directory answers 404, an unreadable file 403. Bodies longer than ``max_body_bytes``
    raise ``TooLarge``; a remote host (``file://server/...``) or a non-file URL raises a
    non-transient ``FetchError``.
    """

    def __init__(self, options: FetchOptions, *, clock: Clock | None = None) -> None:
        self._max_body_bytes = options.max_body_bytes
        self._clock = clock or SystemClock()

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        """Read the file in a worker thread and return it as a response."""
        started = time.perf_counter()
        status, headers, body = await asyncio.to_thread(self._read, request.url)
        return FetchResult(
            url=request.url,
            final_url=request.url,
            status=status,
            headers=headers,
            body=body,
            elapsed_s=time.perf_counter() - started,
            fetcher="file",
            fetched_at=self._clock.now(),
        )

    async def close(self) -> None:
        """Nothing to release: every fetch opens and closes its own file."""

    def _read(self, url: str) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        if parts.scheme != "file":
            raise FetchError(f"{url}: not a file: URL", transient=False)
        if parts.hostname not in _LOCAL_HOSTS and parts.netloc:
            raise FetchError(f"{url}: file: URLs on other hosts are not fetched", transient=False)
        path = Path(url2pathname(parts.path))
        try:
            with path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_size > self._max_body_bytes:
                    raise TooLarge(
                        f"{url}: file is {stat.st_size} bytes, over {self._max_body_bytes}"
                    )
                body = handle.read(self._max_body_bytes + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return 404, {"content-type": "text/plain"}, b""
        except PermissionError:
            return 403, {"content-type": "text/plain"}, b""
        except OSError as exc:
            raise FetchError(f"{url}: cannot read file: {exc}", transient=False) from None
        if len(body) > self._max_body_bytes:
            raise TooLarge(f"{url}: file grew past {self._max_body_bytes} bytes while read")
        content_type, _ = mimetypes.guess_type(path.name)
        return (
            200,
            {
                "content-type": content_type or "application/octet-stream",
                "content-length": str(len(body)),
                "last-modified": formatdate(stat.st_mtime, usegmt=True),
            },
            body,
        )

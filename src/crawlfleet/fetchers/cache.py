"""An HTTP cache on disk for the developer loop: ``--http-cache DIR`` stores responses, replays them.

A ``CachingFetcher`` wraps another fetcher. A request whose response is in the cache (and not
expired) is answered from disk without touching the network; any other goes to the wrapped
fetcher, and its response is stored when the ``keep`` policy accepts it (never a
``FetchError``). A second identical crawl therefore makes no request to the server.

One file per response, ``DIR/<k[:2]>/<k>.entry`` where ``k`` is the SHA-256 of the request's
fingerprint (which covers what makes two requests different) and of the ``truncate_at_bytes``
asked for: a first line of JSON (URL, final URL, status, headers, redirects, fetch time,
body size) and then the body as it was received. A file is written beside its name and
renamed, so a reader sees a whole entry or none; an entry that cannot be read is a miss.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

import orjson

from crawlfleet.clock import Clock
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.models import CrawlRequest, FetchResult

CachePolicy = Callable[[FetchResult], bool]
"""Whether a fresh response may be stored (a retried status never should: it would replay)."""


class TruncatingFetcher(Protocol):
    """A fetcher that can cut a body short (``HttpFetcher``; robots.txt reads use it)."""

    async def fetch(
        self, request: CrawlRequest, *, truncate_at_bytes: int | None = None
    ) -> FetchResult: ...

    async def close(self) -> None: ...


class ResponseCache:
    """Responses on disk under ``directory``; ``expiry_s`` None keeps them for ever."""

    def __init__(self, directory: Path, *, clock: Clock, expiry_s: float | None = None) -> None:
        self.directory = directory
        self._clock = clock
        self._expiry_s = expiry_s

    def path_of(self, request: CrawlRequest, truncate_at_bytes: int | None) -> Path:
        seed = f"{request.fingerprint}\n{truncate_at_bytes}".encode()
        key = hashlib.sha256(seed).hexdigest()
        return self.directory / key[:2] / f"{key}.entry"

    def load(self, request: CrawlRequest, truncate_at_bytes: int | None) -> FetchResult | None:
        """The stored response for ``request``, or None (absent, expired, unreadable)."""
        path = self.path_of(request, truncate_at_bytes)
        try:
            with path.open("rb") as handle:
                meta = orjson.loads(handle.readline())
                body = handle.read()
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(meta, dict) or meta.get("url") != request.url:
            return None
        if len(body) != meta.get("body_bytes"):
            return None
        if self._expiry_s is not None and self._clock.now() - meta["fetched_at"] > self._expiry_s:
            return None
        return FetchResult(
            url=request.url,
            final_url=meta["final_url"],
            status=meta["status"],
            headers=meta["headers"],
            body=body,
            elapsed_s=0.0,
            redirects=tuple(meta["redirects"]),
            fetcher=meta["fetcher"],
            fetched_at=meta["fetched_at"],
        )

    def store(
        self, request: CrawlRequest, truncate_at_bytes: int | None, result: FetchResult
    ) -> None:
        """Write ``result`` for ``request``, replacing any older entry whole."""
        path = self.path_of(request, truncate_at_bytes)
        meta: dict[str, Any] = {
            "url": request.url,
            "final_url": result.final_url,
            "status": result.status,
            "headers": result.headers,
            "redirects": list(result.redirects),
            "fetcher": result.fetcher,
            "fetched_at": result.fetched_at,
            "body_bytes": len(result.body),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as handle:
                handle.write(orjson.dumps(meta) + b"\n")
                handle.write(result.body)
            os.replace(partial, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()


class CachingFetcher:
    """A fetcher answering from a ``ResponseCache`` first; misses go to ``inner``.

    ``truncate_at_bytes`` (robots.txt reads) is passed on, so give it only when ``inner``
    takes it (an ``HttpFetcher``).
    """

    def __init__(self, inner: Fetcher, cache: ResponseCache, keep: CachePolicy) -> None:
        self._inner = inner
        self._cache = cache
        self._keep = keep

    async def fetch(
        self, request: CrawlRequest, *, truncate_at_bytes: int | None = None
    ) -> FetchResult:
        cached = await asyncio.to_thread(self._cache.load, request, truncate_at_bytes)
        if cached is not None:
            return cached
        if truncate_at_bytes is None:
            result = await self._inner.fetch(request)
        else:
            inner = cast(TruncatingFetcher, self._inner)
            result = await inner.fetch(request, truncate_at_bytes=truncate_at_bytes)
        if self._keep(result):
            await asyncio.to_thread(self._cache.store, request, truncate_at_bytes, result)
        return result

    async def close(self) -> None:
        await self._inner.close()


def cache_policy(*, only_200: bool, retried: Callable[[FetchResult], bool]) -> CachePolicy:
    """What a cache keeps: with ``only_200`` only 200s, else every response ``retried`` refuses.

    ``retried`` tells a response the crawl would fetch again (429, 5xx, a block page): caching
    one would replay the failure on every retry.
    """

    def keep(result: FetchResult) -> bool:
        if only_200:
            return result.status == 200
        return not retried(result)

    return keep

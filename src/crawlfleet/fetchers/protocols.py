"""The fetcher port: turn one request into a ``FetchResult`` or a ``FetchError``."""

from __future__ import annotations

from typing import Protocol

from crawlfleet.models import CrawlRequest, FetchResult


class Fetcher(Protocol):
    """Fetches one URL.

    Returns a ``FetchResult`` for every HTTP response, whatever its status (4xx and 5xx
    included): deciding what a status means is the crawl loop's job. Raises ``FetchError``
    (or a subclass) when no response was had: connect error, timeout, too large, forbidden
    address, redirect loop. ``FetchError.transient`` tells whether a retry may help.
    """

    async def fetch(self, request: CrawlRequest) -> FetchResult: ...

    async def close(self) -> None: ...

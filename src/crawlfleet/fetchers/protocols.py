"""The fetcher ports: turn one request into a ``FetchResult`` or a ``FetchError``; send it
the way a crawl session says (``Via``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class Via:
    """How one request is sent for a crawl session (``runtime/fetching/proxy_link.py``).

    ``proxy`` is an ``http://host:port`` URL without userinfo (None: direct), ``proxy_auth``
    its Basic credentials; ``headers`` replace the fetcher's own profile, in their order.
    ``session`` (the crawl session's id) and ``cookies`` (its jar) are for a fetcher that
    keeps state per session itself (the browser: a context per session); an HTTP fetcher
    gets the jar as the request's ``Cookie`` header instead.
    """

    proxy: str | None = None
    proxy_auth: tuple[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    session: str | None = None
    cookies: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Via(proxy={self.proxy!r})"


class ViaFetcher(Protocol):
    """A fetcher a crawl session can send through (``runtime/fetching/proxy_link.py``): the same
    contract as ``Fetcher``, with the session's proxy and headers in ``via`` (None: its own).
    """

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult: ...

    async def close(self) -> None: ...

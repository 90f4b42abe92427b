"""robots.txt and sitemap reads through the crawl's sessions (with ``[crawl.proxies]``).

A side read goes through a crawl session of its URL's domain (``UrlRules.politeness_key``)
like a page: its proxy, header profile and jar, judged by the same ``SessionFetcher``, so a
site reachable only through the crawl's proxies is reachable for its robots.txt too, and a
proxy that fails it is quarantined like for a page. When the read failed because its proxy
was quarantined for it, it is tried again through another session (at most once per proxy
of the crawl, since each such failure quarantines one): a dead proxy must not make a
domain's robots.txt "unreachable" (everything disallowed for ``robots_error_ttl_s``).
"""

from __future__ import annotations

from dataclasses import replace

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.runtime.fetching.chain import SessionLink
from crawlfleet.runtime.fetching.proxy_link import SessionFetcher
from crawlfleet.urls import UrlRules


class _Cut:
    """``HttpFetcher`` as a ``ViaFetcher`` keeping the first ``at_bytes`` of each body."""

    def __init__(self, http: HttpFetcher, at_bytes: int | None) -> None:
        self._http = http
        self._at_bytes = at_bytes

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult:
        return await self._http.fetch(request, via=via, truncate_at_bytes=self._at_bytes)

    async def close(self) -> None:
        await self._http.close()


class SessionSideFetcher:
    """A ``TruncatingFetcher`` sending each read through a session of its domain."""

    def __init__(self, http: HttpFetcher, link: SessionLink, rules: UrlRules) -> None:
        self._http = http
        self._link = link
        self._rules = rules
        self._by_cut: dict[int | None, SessionFetcher] = {}
        self._proxies = sum(len(tier) for tier in link.pool.tiers)

    async def fetch(
        self, request: CrawlRequest, *, truncate_at_bytes: int | None = None
    ) -> FetchResult:
        sessions = self._by_cut.get(truncate_at_bytes)
        if sessions is None:
            sessions = self._by_cut[truncate_at_bytes] = self._link(
                _Cut(self._http, truncate_at_bytes)
            )
        domain = request.domain or self._rules.politeness_key(request.url)
        tries = 0
        while True:
            try:
                return await sessions.fetch(replace(request, domain=domain))
            except FetchError as exc:
                tries += 1
                route = exc.route
                if tries >= self._proxies or route is None:
                    raise
                if await self._link.pool.usable(route.proxy_id):
                    raise  # not the proxy's fault: another session would fail alike

    async def close(self) -> None:
        await self._http.close()

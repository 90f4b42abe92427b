"""A crawl's fetchers: the crawl step's by kind, and the side fetch of robots.txt and sitemaps.

Both HTTP fetchers go over one transport (``build_transport``: one connection pool for pages,
robots.txt and sitemaps). The robots.txt cache is built here too, over the side fetch. ``runtime.wiring`` puts them
in a crawl's object graph; the wrappers of the HTTP chain, in their order, are
``runtime.fetching.chain``'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import TYPE_CHECKING

from crawlfleet.archive.protocols import ResponseKeeper
from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.addresses import is_forbidden_address
from crawlfleet.fetchers.cache import TruncatingFetcher
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.files import FileFetcher
from crawlfleet.fetchers.http import HttpFetcher, wire_for
from crawlfleet.fetchers.protocols import Fetcher, ViaFetcher
from crawlfleet.fetchers.target import target_of
from crawlfleet.fetchers.transport import Transport
from crawlfleet.frontier.robots import ROBOTS_MAX_BYTES, FetchFn, ReadFn, RobotsCache
from crawlfleet.frontier.robots_txt import path_and_query
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.runtime.choice.kinds import BASE_KINDS, IMPERSONATE
from crawlfleet.runtime.fetching.chain import SessionLink, cached, hooked
from crawlfleet.runtime.fetching.side_fetch import SessionSideFetcher
from crawlfleet.runtime.options import fetch_options
from crawlfleet.settings import Settings
from crawlfleet.urls import UrlRules, fingerprint

if TYPE_CHECKING:
    from crawlfleet.fetchers.impersonate import ImpersonateFetcher


def build_transport(settings: Settings, stack: AsyncExitStack) -> Transport:
    """The crawl's one HTTP connection pool (pages, robots.txt, sitemaps; direct and through
    proxies), guarded unless ``allow_private_addresses``; closed by ``stack`` (after the
    fetchers over it, when they are pushed later)."""
    forbidden = None if settings.allow_private_addresses else is_forbidden_address
    transport = wire_for(fetch_options(settings), forbidden)
    stack.push_async_callback(transport.close)
    return transport


def build_fetchers(
    settings: Settings,
    clock: Clock,
    credentials: Credentials,
    logged_in: Callable[[Fetcher], Fetcher] = lambda fetcher: fetcher,
    routed: Callable[[ViaFetcher], Fetcher] = lambda fetcher: fetcher,
    keeper: ResponseKeeper | None = None,
    transport: Transport | None = None,
) -> dict[str, Fetcher]:
    """The crawl's fetchers by kind; redirects become queued links (``Crawler``).

    The HTTP chain, top to bottom: hooks, cache, ``logged_in``, ``routed`` (crawl sessions)
    (``runtime.fetching.chain``); the ``impersonate`` fetcher (when servable) sits in the same
    chain. ``keeper`` (the archive) gets every response of the HTTP and impersonate fetchers.
    ``transport`` (``build_transport``; None: the HTTP fetcher's own) carries the HTTP
    fetcher's requests.
    """
    options = fetch_options(settings)
    http = HttpFetcher(
        options,
        clock=clock,
        follow_redirects=False,
        credentials=credentials,
        keeper=keeper,
        transport=transport,
    )
    fetchers: dict[str, Fetcher] = {
        "http": hooked(cached(logged_in(routed(http)), settings, clock), settings),
        "file": FileFetcher(options, clock=clock),
    }
    if IMPERSONATE in BASE_KINDS:
        browser_like = impersonate_fetcher()(
            options, clock=clock, credentials=credentials, keeper=keeper
        )
        fetchers[IMPERSONATE] = hooked(
            cached(logged_in(routed(browser_like)), settings, clock), settings
        )
    return fetchers


def impersonate_fetcher() -> type[ImpersonateFetcher]:
    """The impersonate fetcher's class, imported on first use: the stealth extra's
    ``curl_cffi`` takes ~30 ms to import, which only a crawl's fetchers need (a worker
    imports it when it starts: ``runtime.celery.worker.assemble``). ``ConfigError`` when it is
    installed but broken (its libcurl, cffi)."""
    try:
        from crawlfleet.fetchers.impersonate import ImpersonateFetcher
    except ImportError as exc:
        raise ConfigError(
            f"the impersonate fetcher cannot be loaded ({exc}); "
            "reinstall it: pip install 'crawlfleet[stealth]'"
        ) from None
    return ImpersonateFetcher


def robots_fetch(
    fetcher: TruncatingFetcher, *, truncate_at_bytes: int | None = None
) -> Callable[[str], Awaitable[FetchResult]]:
    """A URL -> FetchResult function (redirects followed), for robots.txt and sitemaps.

    ``truncate_at_bytes`` keeps the first bytes of a larger body instead of failing (robots.txt:
    RFC 9309 §2.5 asks a crawler to parse at least 500 KiB and may ignore the rest).
    """

    async def fetch(url: str) -> FetchResult:
        request = CrawlRequest(url=url, fingerprint=fingerprint(url), domain="", fetcher="http")
        return await fetcher.fetch(request, truncate_at_bytes=truncate_at_bytes)

    return fetch


ROBOTS_MIN_REDIRECTS = 5
"""Redirects the side fetch follows whatever ``max_redirects`` says (RFC 9309 2.3.1.2)."""


def request_target(url: str) -> str:
    """The request target the HTTP fetcher sends for ``url`` (what robots.txt rules match)."""
    try:
        return target_of(url).path_qs
    except ValueError:  # never fetched either; robots.txt still answers for it
        return path_and_query(url)


def build_robots(
    settings: Settings,
    clock: Clock,
    stack: AsyncExitStack,
    credentials: Credentials,
    link: SessionLink | None = None,
    on_read: ReadFn | None = None,
    keeper: ResponseKeeper | None = None,
    transport: Transport | None = None,
) -> tuple[RobotsCache | None, FetchFn]:
    """The robots.txt cache (None when robots are not obeyed) and the side fetch it and the
    sitemap reader use (redirects followed, at least ``ROBOTS_MIN_REDIRECTS``; through a
    session of the URL's domain when the crawl has proxies: ``link``). ``on_read`` hears each
    robots.txt read (``Frontier.robots_delay``); the archive (``keeper``) gets their
    responses; ``transport`` (the pages' pool, ``build_transport``; None: one of its own)
    carries them. ``ConfigError`` when no product token can be told from ``user_agent`` and
    ``robots_token``."""
    hops = max(settings.max_redirects, ROBOTS_MIN_REDIRECTS)
    side_options = replace(fetch_options(settings), max_redirects=hops)
    http = HttpFetcher(
        side_options, clock=clock, credentials=credentials, keeper=keeper, transport=transport
    )
    side: TruncatingFetcher = http
    if link is not None:
        rules = UrlRules(settings.strip_query_params, settings.politeness_key)
        side = SessionSideFetcher(http, link, rules)
    side_fetcher = cached(side, settings, clock)
    stack.push_async_callback(side_fetcher.close)
    fetch_url = robots_fetch(side_fetcher)
    if not settings.obey_robots:
        return None, fetch_url
    robots = RobotsCache(
        robots_fetch(side_fetcher, truncate_at_bytes=ROBOTS_MAX_BYTES),
        user_agent=settings.user_agent,
        clock=clock,
        ttl_s=settings.robots_ttl_s,
        error_ttl_s=settings.robots_error_ttl_s,
        robots_token=settings.robots_token,
        request_target=request_target,
        on_read=on_read,
    )
    return robots, fetch_url

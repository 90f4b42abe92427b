"""The browser lane of a crawl process: the pool, its fetcher, and the adaptive wrapper.

Playwright is imported only when the lane fetches its first page (``BrowserOnFirstFetch``): a
crawl builds the lane wherever its strategy ladder keeps the ``browser`` rung, and most never
climb it; loading Playwright cost ~37 ms of every such crawl's start-up CPU (decision 0058).
Chromium starts with the first page too (the pool launches it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crawlfleet.archive.protocols import ResponseKeeper
from crawlfleet.clock import Clock
from crawlfleet.fetchers.addresses import is_forbidden_address
from crawlfleet.fetchers.browser.slots import PoolStats
from crawlfleet.fetchers.protocols import Fetcher, Via
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.choice.adaptive import AdaptiveFetcher
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.fetchers.browser.fetcher import BrowserFetcher
    from crawlfleet.models import CrawlRequest, FetchResult

SCREENSHOTS_DIR = "screenshots"
"""Under the state directory: the failed pages' screenshots (``browser_screenshots``)."""


class BrowserOnFirstFetch:
    """A ``BrowserFetcher`` built by ``build`` on the first fetch; its pool counts in
    ``stats`` from the start (the crawl's metrics hold them before any page)."""

    def __init__(self, build: Callable[[PoolStats], BrowserFetcher]) -> None:
        self.stats = PoolStats()
        self._build = build
        self._fetcher: BrowserFetcher | None = None

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult:
        if self._fetcher is None:
            self._fetcher = self._build(self.stats)
        return await self._fetcher.fetch(request, via=via)

    async def close(self) -> None:
        """Close the fetcher, if one was built."""
        if self._fetcher is not None:
            await self._fetcher.close()


def build_browser(
    settings: Settings, clock: Clock, router: Router, keeper: ResponseKeeper | None = None
) -> BrowserOnFirstFetch:
    """The crawl's browser fetcher, built on its first fetch (``BrowserOnFirstFetch``).
    ``keeper``: the archive its rendered pages go to."""
    return BrowserOnFirstFetch(
        lambda stats: _browser_fetcher(settings, clock, router, keeper, stats)
    )


def _browser_fetcher(
    settings: Settings,
    clock: Clock,
    router: Router,
    keeper: ResponseKeeper | None,
    stats: PoolStats,
) -> BrowserFetcher:
    """A ``BrowserFetcher`` over a new (not yet launched) ``BrowserPool`` counting in
    ``stats``."""
    from crawlfleet.fetchers.browser.fetcher import BrowserFetcher
    from crawlfleet.fetchers.browser.guard import RequestGuard
    from crawlfleet.fetchers.browser.pool import BrowserPool
    from crawlfleet.fetchers.browser.slots import PoolLimits

    forbidden = None if settings.allow_private_addresses else is_forbidden_address
    pool = BrowserPool(
        settings.browser_executable,
        PoolLimits(
            pages=settings.browser_pages,
            sessions=settings.browser_sessions,
            context_pages=settings.browser_context_pages,
            browser_pages=settings.browser_max_pages,
            memory_cap_bytes=settings.browser_memory_cap_bytes,
        ),
        RequestGuard(forbidden, settings.browser_block),
        user_agent_token=settings.user_agent,
        stats=stats,
    )
    screenshots = settings.state_dir / SCREENSHOTS_DIR if settings.browser_screenshots else None
    return BrowserFetcher(
        pool,
        wait_for=router.wait_for,
        timeout_s=settings.page_timeout_s,
        max_body_bytes=settings.max_body_bytes,
        clock=clock,
        screenshots=screenshots,
        keeper=keeper,
    )


def browser_lane(
    browser: Fetcher,
    http: Fetcher,
    *,
    router: Router,
    registry: ParserRegistry,
    budget: ParseBudget,
    frontier: Frontier,
) -> AdaptiveFetcher:
    """What fetches the browser lane's requests: ``browser``, or ``http`` where learned."""
    return AdaptiveFetcher(
        browser, http, router=router, registry=registry, budget=budget, frontier=frontier
    )

"""The browser lane of a crawl process: the pool, its fetcher, and the adaptive wrapper.

Playwright is imported here only when a browser lane is built (a process that serves no
browser work never imports it, nor starts a Chromium: the pool launches one on its first
page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawlfleet.archive.protocols import ResponseKeeper
from crawlfleet.clock import Clock
from crawlfleet.fetchers.addresses import is_forbidden_address
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.choice.adaptive import AdaptiveFetcher
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.fetchers.browser.fetcher import BrowserFetcher

SCREENSHOTS_DIR = "screenshots"
"""Under the state directory: the failed pages' screenshots (``browser_screenshots``)."""


def build_browser(
    settings: Settings, clock: Clock, router: Router, keeper: ResponseKeeper | None = None
) -> BrowserFetcher:
    """The crawl's ``BrowserFetcher`` over a new (not yet launched) ``BrowserPool``;
    ``keeper``: the archive its rendered pages go to."""
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

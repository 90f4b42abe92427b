"""A pool of browser pages: one Chromium per process, one context per session slot.

``pages`` slots hold one page each, so at most ``pages`` pages are open at once. A slot keeps
its browser context (cookies, cache: one session) and that context's page, navigated fetch
after fetch, for ``context_pages`` pages, then gets fresh ones; a page whose fetch failed is
closed and replaced. The browser itself is recycled after ``browser_pages`` pages, when the
summed RSS of its processes passes ``memory_cap_bytes`` (read from ``/proc`` at most every
``memory_check_s``), and when it crashed or disconnected: the next page launches a new one.
A recycled browser finishes the pages it holds before it is closed; a crashed one fails them
(the fetcher turns that into a transient ``FetchError``, so the pages are retried).

Chromium is launched lazily, by the first page: a process that never fetches with the
browser never starts one.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route, async_playwright
from playwright.async_api import Error as PlaywrightError

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.browser.guard import RequestGuard
from crawlfleet.fetchers.browser.launch import CHROMIUM_FLAGS, MARKER_FLAG
from crawlfleet.fetchers.browser.memory import tree_pids, tree_rss_bytes

log = logging.getLogger(__name__)

RESTART_REASONS = ("start", "pages", "memory", "crash")
"""Why a browser was launched: the first page, the page limit, the memory cap, a crash."""


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """How many pages run at once and when contexts and the browser are recycled."""

    pages: int = 4
    context_pages: int = 50
    browser_pages: int = 1000
    memory_cap_bytes: int = 2 * 1024**3
    memory_check_s: float = 1.0


@dataclass(slots=True)
class PoolStats:
    """What a pool did: pages opened, browsers launched by reason, memory at the last check."""

    pages: int = 0
    launches: Counter[str] = field(default_factory=Counter)
    rss_bytes: int = 0
    in_use: int = 0


@dataclass(eq=False, slots=True)
class _Browser:
    """One launched Chromium and what it served."""

    browser: Browser
    marker: str
    user_agent: str
    served: int = 0
    in_use: int = 0
    retired: bool = False


@dataclass(eq=False, slots=True)
class Slot:
    """One session slot: a context reused page after page, and what its guard refused."""

    index: int
    context: BrowserContext | None = None
    owner: _Browser | None = None
    page: Page | None = None
    """The context's one page, navigated fetch after fetch (a new page costs ~5 gotos)."""
    pages: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    """URL -> why the guard aborted it, for the page in this slot."""


@dataclass(frozen=True, slots=True)
class LeasedPage:
    """A page of the pool, with its slot (the guard's refusals for this page)."""

    page: Page
    slot: Slot


class BrowserPool:
    """Pages of one Chromium (``executable``) under ``limits``, requests through ``guard``.

    ``user_agent_token`` is appended to Chromium's own User-Agent (the crawler names itself).
    Create, use and ``close`` it in one event loop.
    """

    def __init__(
        self,
        executable: Path,
        limits: PoolLimits,
        guard: RequestGuard,
        *,
        user_agent_token: str = "",
    ) -> None:
        self.executable = executable
        self.limits = limits
        self.stats = PoolStats()
        self._guard = guard
        self._token = user_agent_token
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        for index in range(limits.pages):
            self._free.put_nowait(Slot(index))
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._current: _Browser | None = None
        self._checked_at = 0.0
        self._closed = False
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def browser_pids(self) -> list[int]:
        """The pid of the running browser process (empty before the first page)."""
        return [] if self._current is None else tree_pids(self._current.marker)

    @asynccontextmanager
    async def page(self) -> AsyncIterator[LeasedPage]:
        """The page of a free slot (its context's, reused page after page) for one fetch.

        A block that raises leaves the page closed (the next fetch of the slot gets a new
        one). ``FetchError`` (transient) when no browser can be launched or the context is
        gone.
        """
        slot = await self._free.get()
        browser: _Browser | None = None
        failed = True
        try:
            browser = await self._browser()
            browser.in_use += 1
            self.stats.in_use += 1
            page = await self._page_of(slot, browser)
            self.stats.pages += 1
            yield LeasedPage(page, slot)
            failed = False
        finally:
            slot.refused.clear()
            if failed and slot.page is not None:
                page, slot.page = slot.page, None
                await _quietly(page.close())
            if browser is not None:
                browser.in_use -= 1
                self.stats.in_use -= 1
                if browser.retired and browser.in_use == 0:
                    await _quietly(browser.browser.close())
            self._free.put_nowait(slot)

    def forget(self, slot: Slot) -> None:
        """Drop the slot's context (after a crash or an error of its page): the next is fresh."""
        context, slot.context, slot.owner, slot.page = slot.context, None, None, None
        if context is not None:
            self._background(context.close())

    async def _page_of(self, slot: Slot, browser: _Browser) -> Page:
        stale = slot.owner is not browser or slot.pages >= self.limits.context_pages
        if slot.context is None or stale:
            if slot.context is not None and slot.owner is browser:
                await _quietly(slot.context.close())
            slot.page = None
            slot.context, slot.owner, slot.pages = (
                await self._new_context(slot, browser),
                browser,
                0,
            )
        slot.pages += 1
        browser.served += 1
        if slot.page is not None and not slot.page.is_closed():
            return slot.page
        try:
            slot.page = await slot.context.new_page()
        except PlaywrightError as exc:
            self.forget(slot)
            raise FetchError(f"browser context lost: {_first_line(exc)}") from None
        return slot.page

    async def _new_context(self, slot: Slot, browser: _Browser) -> BrowserContext:
        try:
            context = await browser.browser.new_context(
                user_agent=browser.user_agent, service_workers="block"
            )
            if self._guard.active:
                await context.route("**/*", self._router(slot))
        except PlaywrightError as exc:
            raise FetchError(f"cannot open a browser context: {_first_line(exc)}") from None
        return context

    def _router(self, slot: Slot) -> Callable[[Route], Awaitable[None]]:
        guard = self._guard

        async def route(route: Route) -> None:
            request = route.request
            reason = await guard.refusal(request.url, request.resource_type)
            try:
                if reason is not None:
                    slot.refused[request.url] = reason
                    await route.abort("blockedbyclient")
                elif guard.forbidden is None:
                    await route.continue_()
                else:
                    await self._guarded_hop(route, slot)
            except PlaywrightError:  # the page closed meanwhile
                return

        return route

    async def _guarded_hop(self, route: Route, slot: Slot) -> None:
        """Fetch one hop for the page and check where a redirect leads before the page may
        follow it: Playwright routes a redirect's target no more (decision 0012)."""
        request = route.request
        response = await route.fetch(max_redirects=0)
        location = response.headers.get("location")
        if 300 <= response.status < 400 and location:
            target = urljoin(request.url, location)
            reason = await self._guard.refusal(target, request.resource_type)
            if reason is not None:
                slot.refused[target] = reason
                await route.abort("blockedbyclient")
                return
        await route.fulfill(response=response)

    async def _browser(self) -> _Browser:
        """The browser new pages go to; launches or recycles one when it is due."""
        async with self._lock:
            if self._closed:
                raise FetchError("the browser pool is closed", transient=True)
            current = self._current
            reason = await self._recycle_reason(current)
            if reason is None and current is not None:
                return current
            if current is not None:
                self._retire(current)
            self._current = await self._launch(reason or "start")
            return self._current

    async def _recycle_reason(self, current: _Browser | None) -> str | None:
        if current is None:
            return "start"
        if not current.browser.is_connected():
            return "crash"
        if current.served >= self.limits.browser_pages:
            return "pages"
        now = time.monotonic()
        if now - self._checked_at >= self.limits.memory_check_s:
            self._checked_at = now
            self.stats.rss_bytes = await asyncio.to_thread(tree_rss_bytes, current.marker)
            if self.stats.rss_bytes > self.limits.memory_cap_bytes:
                return "memory"
        return None

    def _retire(self, browser: _Browser) -> None:
        browser.retired = True
        if browser.in_use == 0:
            self._background(browser.browser.close())

    def _background(self, closing: Awaitable[object]) -> None:
        """Close something without waiting; ``close`` waits for what is still closing."""
        task = asyncio.get_running_loop().create_task(_quietly(closing))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _launch(self, reason: str) -> _Browser:
        marker = uuid.uuid4().hex
        try:
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=self.executable,
                args=[*CHROMIUM_FLAGS, f"{MARKER_FLAG}{marker}"],
            )
            session = await browser.new_browser_cdp_session()
            version = await session.send("Browser.getVersion")
            await session.detach()
        except PlaywrightError as exc:
            raise FetchError(f"cannot launch {self.executable}: {_first_line(exc)}") from None
        agent = str(version["userAgent"])
        if self._token:
            agent = f"{agent} {self._token}"
        self.stats.launches[reason] += 1
        if reason != "start":
            log.warning("browser relaunched (%s)", reason)
        return _Browser(browser, marker, agent)

    async def close(self) -> None:
        """Close the browser and Playwright's driver; pages still open fail."""
        async with self._lock:
            self._closed = True
            current, self._current = self._current, None
            if current is not None:
                await _quietly(current.browser.close())
            await asyncio.gather(*self._closing)
            if self._playwright is not None:
                playwright, self._playwright = self._playwright, None
                await _quietly(playwright.stop())


async def _quietly(closing: Awaitable[object]) -> None:
    """Close something that may already be gone (a crashed browser, a closed page)."""
    try:
        await closing
    except PlaywrightError:
        return


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

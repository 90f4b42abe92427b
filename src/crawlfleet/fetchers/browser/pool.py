"""A pool of browser pages: one Chromium per process, one context per session slot.

``pages`` slots hold one page each, so at most ``pages`` pages are open at once; the slots
share ``sessions`` browser contexts (cookies, cache: one session each; slot i uses session
i mod ``sessions``). A session's context serves ``context_pages`` pages, then a fresh one
replaces it (the old closes with its last page); a slot's page is navigated fetch after
fetch while its context lasts, and a page whose fetch failed is closed and replaced. The
browser under them is ``chromium.py``'s: launched by the first page, recycled after
``browser_pages`` pages, past its memory cap or after a crash; a crashed one fails the pages
it holds (the fetcher turns that into a transient ``FetchError``, so the pages are retried).

A page asked for a crawl session (``page(identity)``, with ``[crawl.proxies]``) gets that
session's own context instead (its proxy, User-Agent: ``identity.py``), recycled after
``context_pages`` pages like the shared ones; at most ``pages`` session contexts are kept, the
least recently used idle one closed to make room (each costs a renderer: decision 0012).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from crawlfleet.errors import BrowserFault
from crawlfleet.fetchers.browser.chromium import Chromium, first_line, quietly
from crawlfleet.fetchers.browser.guard import RequestGuard
from crawlfleet.fetchers.browser.identity import BrowserIdentity
from crawlfleet.fetchers.browser.interception import Interceptor
from crawlfleet.fetchers.browser.slots import (
    LaunchedBrowser,
    LeasedPage,
    PoolContext,
    PoolLimits,
    PoolStats,
    Slot,
)


class BrowserPool:
    """Pages of one Chromium (``executable``) under ``limits``, requests through ``guard``.

    ``user_agent_token`` is appended to Chromium's own User-Agent (the crawler names itself);
    ``stats``: where it counts (None: counts of its own). Create, use and ``close`` it in one
    event loop.
    """

    def __init__(
        self,
        executable: Path,
        limits: PoolLimits,
        guard: RequestGuard,
        *,
        user_agent_token: str = "",
        stats: PoolStats | None = None,
    ) -> None:
        self.executable = executable
        self.limits = limits
        self.stats = PoolStats() if stats is None else stats
        self._chromium = Chromium(executable, limits, self.stats, user_agent_token)
        self._requests = Interceptor(guard)
        self._free = [Slot(index) for index in range(limits.pages)]
        self._slots = asyncio.Semaphore(limits.pages)
        self._sessions: list[PoolContext | None] = [None] * max(
            1, min(limits.sessions, limits.pages)
        )
        self._rotating = [asyncio.Lock() for _ in self._sessions]
        self._keyed: OrderedDict[str, PoolContext] = OrderedDict()
        """Crawl session id -> its context, least recently used first."""
        self._keying = asyncio.Lock()

    @property
    def browser_pids(self) -> list[int]:
        """The pid of the running browser process (empty before the first page)."""
        return self._chromium.pids

    @asynccontextmanager
    async def page(self, identity: BrowserIdentity | None = None) -> AsyncIterator[LeasedPage]:
        """The page of a free slot (its context's, reused page after page) for one fetch;
        in ``identity``'s own context when given (a crawl session's).

        A block that raises leaves the page closed (the next fetch of the slot gets a new
        one). ``BrowserFault`` (transient) when no browser can be launched or the context is
        gone.
        """
        await self._slots.acquire()
        slot = self._free_slot(identity)
        browser: LaunchedBrowser | None = None
        held: PoolContext | None = None
        failed = True
        try:
            browser = await self._chromium.lease()
            self.stats.in_use += 1
            page = await self._page_of(slot, browser, identity)
            held = slot.context
            self.stats.pages += 1
            yield LeasedPage(page, slot)
            failed = False
        finally:
            slot.refused.clear()
            if failed and slot.page is not None:
                await self._drop_page(slot)
            if held is not None:
                self._release(held)
            if browser is not None:
                self.stats.in_use -= 1
                await self._chromium.release(browser)
            self._free.append(slot)
            self._slots.release()

    def _free_slot(self, identity: BrowserIdentity | None) -> Slot:
        """A free slot: for a session, one whose page is in its context, else an empty one,
        else the least recently freed; without, one with a page, else an empty one. A page
        reused costs a navigation, a new one ~5 (decision 0012)."""
        own = self._keyed.get(identity.id) if identity is not None else None
        if own is not None:
            wanted = [slot for slot in self._free if slot.context is own]
        elif identity is None:
            wanted = [slot for slot in self._free if slot.page is not None]
        else:
            wanted = []
        empty = [slot for slot in self._free if slot.page is None]
        chosen = (wanted or empty or self._free)[0]
        self._free.remove(chosen)
        return chosen

    def forget(self, slot: Slot) -> None:
        """Retire the slot's context (its page crashed or lost it): the next is fresh."""
        if slot.context is not None:
            slot.context.retired = True
            self._sessions = [None if c is slot.context else c for c in self._sessions]
            self._keyed = OrderedDict(
                (k, c) for k, c in self._keyed.items() if c is not slot.context
            )

    async def _page_of(
        self, slot: Slot, browser: LaunchedBrowser, identity: BrowserIdentity | None
    ) -> Page:
        if identity is None:
            current = await self._shared_context(slot, browser)
        else:
            current = await self._session_context(browser, identity)
        if slot.page is not None and (slot.context is not current or slot.page.is_closed()):
            await self._drop_page(slot)
        current.pages += 1
        current.in_use += 1
        slot.context = current
        browser.served += 1
        if slot.page is not None:
            return slot.page
        try:
            slot.page = await current.context.new_page()
        except PlaywrightError as exc:
            self.forget(slot)
            self._release(current)
            slot.context = None
            raise BrowserFault(f"browser context lost: {first_line(exc)}") from None
        self._requests.watch(slot.page, slot.refused)
        return slot.page

    async def _shared_context(self, slot: Slot, browser: LaunchedBrowser) -> PoolContext:
        session = slot.index % len(self._sessions)
        async with self._rotating[session]:  # one new context per session, not one per slot
            current = self._sessions[session]
            if (
                current is not None
                and current.owner is browser
                and not current.retired
                and current.pages >= self.limits.context_pages
            ):
                current.retired = True
                self._release(current, 0)
            if current is None or current.owner is not browser or current.retired:
                current = PoolContext(await self._new_context(browser), browser)
                self._sessions[session] = current
        return current

    async def _session_context(
        self, browser: LaunchedBrowser, identity: BrowserIdentity
    ) -> PoolContext:
        """The context of crawl session ``identity`` (opened, or renewed when it is due)."""
        async with self._keying:
            current = self._keyed.get(identity.id)
            if current is not None and not current.retired and current.owner is browser:
                if current.pages < self.limits.context_pages:
                    self._keyed.move_to_end(identity.id)
                    return current
                current.retired = True
                self._release(current, 0)
            self._keyed.pop(identity.id, None)
            self._make_room(browser)
            current = PoolContext(await self._new_context(browser, identity), browser)
            self._keyed[identity.id] = current
            return current

    def _make_room(self, browser: LaunchedBrowser) -> None:
        """Close idle session contexts (stale ones first, then the least recently used)
        until fewer than ``pages`` are kept."""
        for key, context in list(self._keyed.items()):
            if context.retired or context.owner is not browser:
                del self._keyed[key]
        for key, context in list(self._keyed.items()):
            if len(self._keyed) < self.limits.pages:
                return
            if context.in_use == 0:
                context.retired = True
                self._release(context, 0)
                del self._keyed[key]

    async def _drop_page(self, slot: Slot) -> None:
        page, slot.page = slot.page, None
        if page is not None:
            self._requests.forget(page)
            await quietly(page.close())

    def _release(self, context: PoolContext, pages: int = 1) -> None:
        """``pages`` of ``context`` ended; a retired context is closed with its last one."""
        context.in_use -= pages
        if context.retired and context.in_use == 0 and context.owner.browser.is_connected():
            self._chromium.close_later(context.context.close())

    async def _new_context(
        self, browser: LaunchedBrowser, identity: BrowserIdentity | None = None
    ) -> BrowserContext:
        options = (
            {"user_agent": browser.user_agent} if identity is None else identity.context_options()
        )
        try:
            context = await browser.browser.new_context(service_workers="block", **options)
            if self._requests.guard.active:
                await context.route("**/*", self._requests.route)
        except PlaywrightError as exc:
            raise BrowserFault(f"cannot open a browser context: {first_line(exc)}") from None
        return context

    async def close(self) -> None:
        """Close the browser and Playwright's driver; pages still open fail."""
        await self._chromium.close()

"""The browser pool's Chromium: launched lazily, recycled when due, closed with what it holds.

The first page leased launches it: a process that never fetches with the browser never starts
one. It is recycled after ``browser_pages`` pages, when the summed RSS of its processes passes
``memory_cap_bytes`` (read from ``/proc`` at most every ``memory_check_s``), and when it
crashed or disconnected: the next page launches a new one. A recycled browser finishes the
pages it holds before it is closed; a crashed one fails them.

Kept apart from ``pool.py`` (the slots and contexts that run on it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Playwright, async_playwright

from crawlfleet.errors import BrowserFault
from crawlfleet.fetchers.browser.launch import CHROMIUM_FLAGS, MARKER_FLAG
from crawlfleet.fetchers.browser.memory import tree_pids, tree_rss_bytes
from crawlfleet.fetchers.browser.slots import LaunchedBrowser, PoolLimits, PoolStats

log = logging.getLogger(__name__)


class Chromium:
    """The Chromium (``executable``) a pool's pages go to, recycled under ``limits``.

    Launches and the memory it read are counted in ``stats``; ``user_agent_token`` is
    appended to Chromium's own User-Agent. Create, use and ``close`` it in one event loop.
    """

    def __init__(
        self, executable: Path, limits: PoolLimits, stats: PoolStats, user_agent_token: str
    ) -> None:
        self._executable = executable
        self._limits = limits
        self._stats = stats
        self._token = user_agent_token
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._current: LaunchedBrowser | None = None
        self._checked_at = 0.0
        self._closed = False
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def pids(self) -> list[int]:
        """The pid of the running browser process (empty before the first page)."""
        return [] if self._current is None else tree_pids(self._current.marker)

    async def lease(self) -> LaunchedBrowser:
        """The browser a new page goes to, holding one more page; launches or recycles one
        when it is due. ``BrowserFault`` (transient) when none can be launched."""
        async with self._lock:
            if self._closed:
                raise BrowserFault("the browser pool is closed", transient=True)
            current = self._current
            reason = await self._recycle_reason(current)
            if reason is not None or current is None:
                if current is not None:
                    self._retire(current)
                current = self._current = await self._launch(reason or "start")
        current.in_use += 1
        return current

    async def release(self, browser: LaunchedBrowser) -> None:
        """A page of ``browser`` ended; a retired browser is closed with its last one."""
        browser.in_use -= 1
        if browser.retired and browser.in_use == 0:
            await quietly(browser.browser.close())

    def close_later(self, closing: Awaitable[object]) -> None:
        """Close something without waiting; ``close`` waits for what is still closing."""
        task = asyncio.get_running_loop().create_task(quietly(closing))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _recycle_reason(self, current: LaunchedBrowser | None) -> str | None:
        if current is None:
            return "start"
        if not current.browser.is_connected():
            return "crash"
        if current.served >= self._limits.browser_pages:
            return "pages"
        now = time.monotonic()
        if now - self._checked_at >= self._limits.memory_check_s:
            self._checked_at = now
            self._stats.rss_bytes = await asyncio.to_thread(tree_rss_bytes, current.marker)
            if self._stats.rss_bytes > self._limits.memory_cap_bytes:
                return "memory"
        return None

    def _retire(self, browser: LaunchedBrowser) -> None:
        browser.retired = True
        if browser.in_use == 0:
            self.close_later(browser.browser.close())

    async def _launch(self, reason: str) -> LaunchedBrowser:
        marker = uuid.uuid4().hex
        try:
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=self._executable,
                args=[*CHROMIUM_FLAGS, f"{MARKER_FLAG}{marker}"],
            )
            session = await browser.new_browser_cdp_session()
            version = await session.send("Browser.getVersion")
            await session.detach()
        except PlaywrightError as exc:
            raise BrowserFault(f"cannot launch {self._executable}: {first_line(exc)}") from None
        agent = str(version["userAgent"])
        if self._token:
            agent = f"{agent} {self._token}"
        self._stats.launches[reason] += 1
        if reason != "start":
            log.warning("browser relaunched (%s)", reason)
        return LaunchedBrowser(browser, marker, agent)

    async def close(self) -> None:
        """Close the browser and Playwright's driver; pages still open fail."""
        async with self._lock:
            self._closed = True
            current, self._current = self._current, None
            if current is not None:
                await quietly(current.browser.close())
            await asyncio.gather(*self._closing)
            if self._playwright is not None:
                playwright, self._playwright = self._playwright, None
                await quietly(playwright.stop())


async def quietly(closing: Awaitable[object]) -> None:
    """Close something that may already be gone (a crashed browser, a closed page)."""
    try:
        await closing
    except PlaywrightError:
        return


def first_line(exc: BaseException) -> str:
    """The first line of a Playwright error (its call log follows), for a ``BrowserFault``."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

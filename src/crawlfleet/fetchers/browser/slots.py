"""The browser pool's records: its limits and counts, a launched browser, a context, a slot.

Kept apart from ``pool.py`` and ``chromium.py`` (what the pool does with them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # PoolStats is built before Playwright is loaded (browser_lane.py)
    from playwright.async_api import Browser, BrowserContext, Page

RESTART_REASONS = ("start", "pages", "memory", "crash")
"""Why a browser was launched: the first page, the page limit, the memory cap, a crash."""


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """How many pages run at once and when contexts and the browser are recycled."""

    pages: int = 4
    sessions: int = 1
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
class LaunchedBrowser:
    """One launched Chromium and what it served."""

    browser: Browser
    marker: str
    user_agent: str
    served: int = 0
    in_use: int = 0
    retired: bool = False


@dataclass(eq=False, slots=True)
class PoolContext:
    """A browser context (one session: cookies, cache), the pages it ran and runs."""

    context: BrowserContext
    owner: LaunchedBrowser
    pages: int = 0
    in_use: int = 0
    retired: bool = False


@dataclass(eq=False, slots=True)
class Slot:
    """One page slot: its page, navigated fetch after fetch, and what the guard refused it.

    The slot's session is ``index % sessions``: its page lives in that session's context.
    """

    index: int
    page: Page | None = None
    """The slot's page, reused while its context is its session's (a new page costs ~5
    navigations, decision 0012)."""
    context: PoolContext | None = None
    refused: dict[str, str] = field(default_factory=dict)
    """URL -> why the guard aborted it, for the fetch in this slot."""


@dataclass(frozen=True, slots=True)
class LeasedPage:
    """A page of the pool, with its slot (the guard's refusals for this page)."""

    page: Page
    slot: Slot

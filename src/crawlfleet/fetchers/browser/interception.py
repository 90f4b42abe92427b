"""The guard applied to every request a pooled page makes, through Playwright's routes.

A request the guard refuses is aborted (``blockedbyclient``) and its reason kept in the
refusals of its page (``watch``), for the fetch to tell a refused page from a failed one.
"""

from __future__ import annotations

from contextlib import suppress
from urllib.parse import urljoin

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route

from crawlfleet.fetchers.browser.guard import RequestGuard


class Interceptor:
    """Routes the requests of the pages it watches through ``guard``."""

    def __init__(self, guard: RequestGuard) -> None:
        self.guard = guard
        self._refused_of: dict[Page, dict[str, str]] = {}

    def watch(self, page: Page, refused: dict[str, str]) -> None:
        """Keep what the guard refuses ``page`` in ``refused`` (URL -> why)."""
        self._refused_of[page] = refused

    def forget(self, page: Page) -> None:
        """Stop keeping ``page``'s refusals (it is closed)."""
        self._refused_of.pop(page, None)

    async def route(self, route: Route) -> None:
        """Let a request of a page through, or abort it with the guard's reason."""
        request = route.request
        guard = self.guard
        try:
            refused = self._refused_of.get(request.frame.page, {})
            reason = await guard.refusal(request.url, request.resource_type)
            if reason is not None:
                refused[request.url] = reason
                await route.abort("blockedbyclient")
            elif guard.forbidden is None:
                await route.continue_()
            else:
                await self._guarded_hop(route, refused)
        except PlaywrightError:  # the hop failed (the page sees a network error) or it closed
            with suppress(PlaywrightError):  # the page is gone
                await route.abort("failed")

    async def _guarded_hop(self, route: Route, refused: dict[str, str]) -> None:
        """Fetch one hop for the page and check where a redirect leads before the page may
        follow it: Playwright routes a redirect's target no more (decision 0012)."""
        request = route.request
        response = await route.fetch(max_redirects=0)
        location = response.headers.get("location")
        if 300 <= response.status < 400 and location:
            target = urljoin(request.url, location)
            reason = await self.guard.refusal(target, request.resource_type)
            if reason is not None:
                refused[target] = reason
                await route.abort("blockedbyclient")
                return
        await route.fulfill(response=response)

"""The browser fetcher: a page of the pool loads the URL; its rendered DOM is the response.

The final URL, status and headers come from the main frame's last navigation (a page that
reloads itself by script, like a cookie challenge, answers with the document it ends on);
the body is the DOM serialized after the wait rule, UTF-8 encoded, for an HTML document, or
the bytes as sent for anything else. A timeout, a crashed page or browser, and a network
error are transient ``FetchError``s (retried, then dead-lettered); a page or redirect to a
refused address is a ``ForbiddenAddress``; a method other than GET is refused.

A ``ViaFetcher``: sent through a crawl session (``via``, with ``[crawl.proxies]``), the page
runs in the session's context (its proxy and User-Agent), starts with the session's cookies
and returns the jar it ends with in ``FetchResult.cookies``.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from pathlib import Path

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import Response as PageResponse
from playwright.async_api import TimeoutError as PlaywrightTimeout

from crawlfleet.archive.protocols import ResponseKeeper, Sent
from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import BrowserFault, FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers.browser.identity import BrowserIdentity, load_jar, read_jar
from crawlfleet.fetchers.browser.pool import BrowserPool
from crawlfleet.fetchers.browser.slots import LeasedPage
from crawlfleet.fetchers.browser.wait import WaitRule
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest, FetchResult

HTML_TYPES = ("text/html", "application/xhtml+xml")
SERIALIZE = (
    "(document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '')"
    " + document.documentElement.outerHTML"
)
"""The rendered DOM as markup, read in the page's world (``page.content`` costs ~10x)."""
WAIT_FOR_SELECTOR = """selector => new Promise(resolve => {
  if (document.querySelector(selector)) return resolve(true);
  const watch = new MutationObserver(() => {
    if (document.querySelector(selector)) { watch.disconnect(); resolve(true); }
  });
  watch.observe(document, {childList: true, subtree: true, attributes: true});
})"""
NAVIGATION_POLL_S = 0.02
_REPLACED = ("Execution context was destroyed", "navigat", "Target closed")
SCREENSHOT_TIMEOUT_S = 5.0
_CRASHED = ("crash", "has been closed", "browser closed", "target closed", "disconnected")


class BrowserFetcher:
    """Fetches GET pages with a ``BrowserPool``; a ``Fetcher``.

    ``wait_for(url)`` names the wait rule of a URL (its parser's, else the crawl's);
    ``timeout_s`` bounds the navigation and the wait together. ``screenshots``: a directory
    where a failed page's screenshot is saved (its path goes to the attempt log), or None.
    ``keeper`` (the crawl's archive) gets every rendered page before ``fetch`` returns it.
    """

    def __init__(
        self,
        pool: BrowserPool,
        *,
        wait_for: Callable[[str], str],
        timeout_s: float,
        max_body_bytes: int,
        clock: Clock | None = None,
        screenshots: Path | None = None,
        keeper: ResponseKeeper | None = None,
    ) -> None:
        self.pool = pool
        self._keeper = keeper
        self._wait_for = wait_for
        self._timeout_s = timeout_s
        self._max_body_bytes = max_body_bytes
        self._clock = clock or SystemClock()
        self._screenshots = screenshots

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult:
        if request.method != "GET" or request.body:
            raise FetchError(
                f"{request.url}: the browser fetcher loads GET pages only, not {request.method}",
                transient=False,
            )
        rule = WaitRule.parse(self._wait_for(request.url))
        started = time.perf_counter()
        identity = BrowserIdentity.from_via(via) if via is not None else None
        async with self.pool.page(identity) as leased:
            try:
                result = await self._render(leased, request, rule, started, identity)
            except FetchError as exc:
                exc.screenshot = await self._screenshot(leased.page, request)
                raise
            if result.status >= 400:
                result.screenshot = await self._screenshot(leased.page, request)
            return result

    async def _render(
        self,
        leased: LeasedPage,
        request: CrawlRequest,
        rule: WaitRule,
        started: float,
        identity: BrowserIdentity | None,
    ) -> FetchResult:
        page = leased.page
        jar: dict[str, str] | None = None
        navigations: list[PageResponse] = []

        def on_response(response: PageResponse) -> None:
            if response.request.is_navigation_request() and response.frame == page.main_frame:
                navigations.append(response)

        page.on("response", on_response)
        deadline = time.monotonic() + self._timeout_s
        try:
            if request.headers:
                await page.set_extra_http_headers(dict(request.headers))
            if identity is not None:
                await load_jar(page.context, request.url, identity.cookies)
            first = await page.goto(request.url, wait_until=rule.event, timeout=_ms(deadline))
            if rule.selector is not None:
                await _wait_for_selector(page, rule.selector, deadline)
            last = navigations[-1] if navigations else first
            if last is None:
                raise FetchError(f"{request.url}: the page made no navigation")
            body, headers = await self._body(page, last, deadline)
            redirects = _redirects(navigations, last)
            if identity is not None:
                jar = await read_jar(page.context, request.url)
        except (PlaywrightTimeout, TimeoutError):
            raise FetchError(
                f"timeout rendering {request.url} after {self._timeout_s:g}s (wait {rule})"
            ) from None
        except PlaywrightError as exc:
            raise self._describe(exc, request.url, leased) from None
        finally:
            page.remove_listener("response", on_response)
        if request.headers:  # the page is reused: the next request sends none of these
            await page.set_extra_http_headers({})
        if len(body) > self._max_body_bytes:
            raise TooLarge(f"{request.url}: rendered page exceeds {self._max_body_bytes} bytes")
        result = FetchResult(
            url=request.url,
            final_url=page.url,
            status=last.status,
            headers=headers,
            body=body,
            elapsed_s=time.perf_counter() - started,
            redirects=redirects,
            fetcher="browser",
            fetched_at=self._clock.now(),
            request=request,
            cookies=jar,
        )
        if self._keeper is not None:  # the rendered DOM, marked as such (archive/keeper.py)
            await self._keeper.keep(result, Sent("GET", dict(request.headers), None, body))
        return result

    async def _body(
        self, page: Page, last: PageResponse, deadline: float
    ) -> tuple[bytes, dict[str, str]]:
        """The serialized DOM (HTML) or the bytes as sent (anything else), and the headers."""
        headers = await last.all_headers()
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in HTML_TYPES and content_type:
            return await last.body(), headers
        try:
            markup = str(await page.evaluate(SERIALIZE))
        except PlaywrightError:  # the page navigated by script meanwhile: read its end state
            await page.wait_for_load_state("load", timeout=_ms(deadline))
            markup = str(await page.evaluate(SERIALIZE))
        headers["content-type"] = f"{content_type or 'text/html'}; charset=utf-8"
        headers.pop("content-length", None)
        headers.pop("content-encoding", None)
        return markup.encode("utf-8"), headers

    def _describe(self, exc: PlaywrightError, url: str, leased: LeasedPage) -> FetchError:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        refused = [
            reason for target, reason in leased.slot.refused.items() if "resource" not in reason
        ]
        if "ERR_BLOCKED_BY_CLIENT" in message and refused:
            return ForbiddenAddress(f"{url}: {refused[0]}")
        if any(word in message.lower() for word in _CRASHED):
            self.pool.forget(leased.slot)
            return BrowserFault(f"{url}: browser page crashed or closed ({message})")
        return FetchError(f"{url}: {message}")

    async def _screenshot(self, page: Page, request: CrawlRequest) -> str | None:
        """Save a picture of ``page``; its path, or None (not asked for, or the page is gone)."""
        if self._screenshots is None:
            return None
        path = self._screenshots / f"{request.fingerprint[:20]}-{request.attempt}.png"
        try:
            # CDP's capture takes the frame as it is; page.screenshot would wait for a page
            # still loading (the very page that timed out).
            async with asyncio.timeout(SCREENSHOT_TIMEOUT_S):
                session = await page.context.new_cdp_session(page)
                shot = await session.send("Page.captureScreenshot", {"format": "png"})
            png = base64.b64decode(str(shot["data"]))
            path.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(path.write_bytes, png)
        except (PlaywrightError, TimeoutError, OSError, KeyError, ValueError):
            return None
        return str(path)

    async def close(self) -> None:
        """Close the pool (its browser and Playwright's driver)."""
        await self.pool.close()


async def _wait_for_selector(page: Page, selector: str, deadline: float) -> None:
    """Until an element matches ``selector`` in the page's current document, or ``deadline``.

    Runs in the page's own world (Playwright's ``wait_for_selector`` first injects its
    utility script into every new document: ~200 ms a page, measured in decision 0012). A
    document replaced meanwhile (a script reloading the page) is waited for and looked in.
    ``TimeoutError`` at the deadline; ``FetchError`` (not transient) for a bad selector.
    """
    while True:
        try:
            async with asyncio.timeout(max(0.001, deadline - time.monotonic())):
                await page.evaluate(WAIT_FOR_SELECTOR, selector)
            return
        except PlaywrightError as exc:
            message = str(exc)
            if "SyntaxError" in message:
                raise FetchError(f"bad wait selector {selector!r}", transient=False) from None
            if not any(word in message for word in _REPLACED):
                raise
        await asyncio.sleep(NAVIGATION_POLL_S)
        await page.wait_for_load_state("domcontentloaded", timeout=_ms(deadline))


def _ms(deadline: float) -> float:
    """Milliseconds left until ``deadline`` (monotonic), at least 1."""
    return max(1.0, (deadline - time.monotonic()) * 1000)


def _redirects(navigations: list[PageResponse], last: PageResponse) -> tuple[str, ...]:
    """The URLs redirected from before the last navigation's document, the first first.

    A hop the address guard fetched itself shows as a 3xx navigation response; one Chromium
    followed alone, in the last response's ``redirected_from`` chain.
    """
    chain: list[str] = []
    request = last.request.redirected_from
    while request is not None:
        chain.append(request.url)
        request = request.redirected_from
    hops = [r.url for r in navigations if 300 <= r.status < 400]
    return tuple(dict.fromkeys([*hops, *reversed(chain)]))

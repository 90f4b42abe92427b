"""The browser fetcher against the demo site's jsapp host, in Debian's real Chromium.

One pool (one Chromium) serves the whole module where a test does not need a pool of its
own: the tests stay fast.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import JS_PER_LIST, item_name, item_price
from crawlfleet.errors import FetchError, ForbiddenAddress
from crawlfleet.fetchers.addresses import IPAddress, parse_ip
from crawlfleet.fetchers.browser.fetcher import BrowserFetcher
from crawlfleet.fetchers.browser.guard import RequestGuard
from crawlfleet.fetchers.browser.pool import BrowserPool
from crawlfleet.fetchers.browser.slots import PoolLimits
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.parsing.response import Response
from crawlfleet.urls import fingerprint

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

CHROMIUM = Path("/usr/bin/chromium")
LAB = "127.0.0.4"  # the demo site's lab host: the address the guard refuses in these tests


def request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint=fingerprint(url), domain="jsapp", fetcher="browser")


def text(page: Response | FetchResult, selector: str) -> str | None:
    """The text of the first element ``selector`` matches, or None."""
    node = (page if isinstance(page, Response) else Response(page)).css_first(selector)
    return None if node is None else node.text()


def attribute(page: Response, selector: str, name: str) -> str | None:
    node = page.css_first(selector)
    return None if node is None else node.attributes.get(name)


def lab_forbidden(address: IPAddress) -> bool:
    return address == parse_ip(LAB)


def fetcher_over(
    pool: BrowserPool,
    *,
    wait: str = "load",
    timeout_s: float = 10.0,
    screenshots: Path | None = None,
) -> BrowserFetcher:
    return BrowserFetcher(
        pool,
        wait_for=lambda url: wait,
        timeout_s=timeout_s,
        max_body_bytes=10 * 1024 * 1024,
        screenshots=screenshots,
    )


@pytest.fixture(scope="module")
def jsapp() -> Iterator[ThreadedDemoSite]:
    with ThreadedDemoSite() as demo:
        yield demo


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    """One pool (one Chromium, launched by the first page) for the module's tests."""
    shared = BrowserPool(
        CHROMIUM,
        PoolLimits(pages=2),
        RequestGuard(lab_forbidden, ("image", "font", "media")),
        user_agent_token="crawlfleet-test",
    )
    yield shared
    await shared.close()


async def test_a_js_page_is_rendered_and_its_injected_links_and_text_are_read(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    result = await fetcher_over(pool).fetch(request(jsapp.url("jsapp", "/items/7")))
    page = Response(result)
    assert (result.status, result.fetcher) == (200, "browser")
    assert text(page, ".name") == item_name(7)
    assert text(page, ".price") == item_price(7)
    listing = Response(await fetcher_over(pool).fetch(request(jsapp.url("jsapp", "/list/1"))))
    assert len(listing.css("a.item")) == JS_PER_LIST
    assert attribute(listing, "a.next", "href") == "/list/2"
    agents = {r.user_agent for r in jsapp.log if r.path == "/items/7"}
    assert len(agents) == 1
    (agent,) = agents
    assert "HeadlessChrome" in agent
    assert agent.endswith("crawlfleet-test")


async def test_plain_http_sees_no_content_on_a_js_page(jsapp: ThreadedDemoSite) -> None:
    http = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        result = await http.fetch(request(jsapp.url("jsapp", "/items/7")))
    finally:
        await http.close()
    assert text(Response(result), ".name") is None


async def test_the_js_challenge_is_passed_by_the_browser_and_not_by_http(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    url = jsapp.url("jsapp", "/challenge/q/3")
    http = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        plain = await http.fetch(request(url))
    finally:
        await http.close()
    assert plain.status == 403
    assert b"Guarded words" not in plain.body
    rendered = await fetcher_over(pool, wait="css:.quote").fetch(request(url))
    assert rendered.status == 200
    assert text(Response(rendered), ".quote") == "Guarded words number 3."


async def test_a_selector_wait_rule_waits_for_an_element_added_after_load(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    url = jsapp.url("jsapp", "/late")
    on_load = await fetcher_over(pool).fetch(request(url))
    assert Response(on_load).css_first(".late") is None
    waited = await fetcher_over(pool, wait="css:.late").fetch(request(url))
    assert text(Response(waited), ".late") == "arrived late"


async def test_images_fonts_and_media_are_blocked_stylesheets_are_not(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    jsapp.clear_log()
    result = await fetcher_over(pool).fetch(request(jsapp.url("jsapp", "/heavy")))
    assert result.status == 200
    await asyncio.sleep(0.2)
    paths = {r.path for r in jsapp.log}
    assert "/heavy/style.css" in paths
    assert not paths & {"/heavy/img.png", "/heavy/font.woff2", "/heavy/clip.webm"}


async def test_nothing_the_page_asks_for_reaches_a_refused_address(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    target = jsapp.url("lab", "/page/1")
    jsapp.clear_log()
    reach = jsapp.url("jsapp", f"/reach?to={target}")
    result = await fetcher_over(pool, wait="networkidle").fetch(request(reach))
    assert Response(result).css_first(".reached") is not None
    with pytest.raises(ForbiddenAddress, match="not allowed"):
        await fetcher_over(pool).fetch(request(jsapp.url("jsapp", f"/redirect?to={target}")))
    with pytest.raises(ForbiddenAddress):
        await fetcher_over(pool).fetch(request(target))
    await asyncio.sleep(0.2)
    assert [r.path for r in jsapp.log if r.address == LAB] == []


async def test_a_timeout_is_a_transient_error_with_a_screenshot(
    jsapp: ThreadedDemoSite, pool: BrowserPool, tmp_path: Path
) -> None:
    fetcher = fetcher_over(pool, timeout_s=0.5, screenshots=tmp_path / "shots")
    hang = request(jsapp.url("jsapp", "/hang"))
    with pytest.raises(FetchError, match=r"timeout rendering .*/hang after 0.5s") as caught:
        await fetcher.fetch(hang)
    assert caught.value.transient
    shot = caught.value.screenshot
    assert shot is not None
    assert (await asyncio.to_thread(Path(shot).read_bytes))[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(shot).name == f"{hang.fingerprint[:20]}-0.png"


async def test_a_killed_browser_fails_its_page_transiently_and_the_pool_relaunches(
    jsapp: ThreadedDemoSite, pool: BrowserPool
) -> None:
    fetcher = fetcher_over(pool, timeout_s=10)
    await fetcher.fetch(request(jsapp.url("jsapp", "/items/1")))
    launches = dict(pool.stats.launches)
    (pid,) = pool.browser_pids
    hanging = asyncio.ensure_future(fetcher.fetch(request(jsapp.url("jsapp", "/hang"))))
    await asyncio.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(FetchError) as caught:
        await hanging
    assert caught.value.transient
    again = await fetcher.fetch(request(jsapp.url("jsapp", "/items/2")))
    assert text(Response(again), ".name") == item_name(2)
    assert pool.stats.launches["crash"] == launches.get("crash", 0) + 1
    assert pool.browser_pids != [pid]


async def test_contexts_and_the_browser_are_recycled_after_their_page_limits(
    jsapp: ThreadedDemoSite,
) -> None:
    pool = BrowserPool(
        CHROMIUM,
        PoolLimits(pages=1, context_pages=2, browser_pages=3),
        RequestGuard(None, ()),
    )
    try:
        fetcher = fetcher_over(pool)
        for number in range(1, 5):
            result = await fetcher.fetch(request(jsapp.url("jsapp", f"/items/{number}")))
            assert text(Response(result), ".name") == item_name(number)
        assert pool.stats.launches == {"start": 1, "pages": 1}
        assert pool.stats.pages == 4
    finally:
        await pool.close()


async def test_the_memory_cap_recycles_the_browser(jsapp: ThreadedDemoSite) -> None:
    pool = BrowserPool(
        CHROMIUM,
        PoolLimits(pages=1, memory_cap_bytes=1, memory_check_s=0),
        RequestGuard(None, ()),
    )
    try:
        fetcher = fetcher_over(pool)
        await fetcher.fetch(request(jsapp.url("jsapp", "/items/1")))
        await fetcher.fetch(request(jsapp.url("jsapp", "/items/2")))
        assert pool.stats.launches["memory"] == 1
        assert pool.stats.rss_bytes > 50 * 1024 * 1024  # Chromium's processes, summed
    finally:
        await pool.close()


async def test_a_post_is_refused_for_good(jsapp: ThreadedDemoSite, pool: BrowserPool) -> None:
    posted = CrawlRequest(
        url=jsapp.url("jsapp", "/"), fingerprint="f" * 32, domain="jsapp", method="POST"
    )
    with pytest.raises(FetchError, match="GET pages only") as caught:
        await fetcher_over(pool).fetch(posted)
    assert not caught.value.transient


async def test_a_hop_the_guard_cannot_fetch_fails_the_page_at_once(pool: BrowserPool) -> None:
    with pytest.raises(FetchError) as caught:
        async with asyncio.timeout(5):
            await fetcher_over(pool).fetch(request("http://127.0.0.14:1/closed"))
    assert caught.value.transient

"""The fetch, robots.txt and parse path against a hostile server on loopback.

Each test checks that nothing is lost (the good part of the host stays crawlable), that
nothing hangs or stalls the event loop, and that the failure is a clear one-line error.
"""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from crawlfleet.errors import FetchError, ParseBudgetExceeded
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.frontier.robots import ROBOTS_MAX_BYTES, RobotsCache
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.default import default_parser
from crawlfleet.runtime.options import parse_limits
from crawlfleet.settings import Settings
from tests.fixtures.clock import FakeClock

HUGE_ROBOTS_BYTES = 20 * 1024 * 1024
ROBOTS_HEAD = b"User-agent: *\nDisallow: /early/\n"
PAGE = b"<!doctype html><title>fine</title><a href='/next'>next</a>"


async def huge_robots(request: web.Request) -> web.StreamResponse:
    """20 MB: one rule at the top, padding, then a rule that would shut the host."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.content_length = HUGE_ROBOTS_BYTES
    await response.prepare(request)
    line = b"# " + b"p" * 1021 + b"\n"
    tail = b"Disallow: /\n"
    padding = HUGE_ROBOTS_BYTES - len(ROBOTS_HEAD) - len(tail)
    try:
        await response.write(ROBOTS_HEAD)
        for _ in range(padding // len(line)):
            await response.write(line)
        await response.write(b"#" * (padding % len(line)) + tail)
    except ConnectionResetError:
        pass  # the crawler read what it needed and hung up
    return response


async def stacked(request: web.Request) -> web.Response:
    body = PAGE
    for _ in range(50):
        body = gzip.compress(body, mtime=0)
    return web.Response(body=body, headers={"Content-Encoding": ", ".join(["gzip"] * 50)})


async def nested(request: web.Request) -> web.Response:
    """100,000 unclosed ``<div>``: 500 KB of HTML, 1.5 KB of gzip."""
    body = gzip.compress(b"<html><body>" + b"<div>" * 100_000, mtime=0)
    return web.Response(
        body=body, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"}
    )


async def junk(request: web.Request) -> web.Response:
    return web.Response(body=os.urandom(64 * 1024), headers={"Content-Type": "text/html"})


async def hang(request: web.Request) -> web.Response:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def page(request: web.Request) -> web.Response:
    return web.Response(body=PAGE, content_type="text/html")


@pytest.fixture
async def hostile() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/robots.txt", huge_robots)
    app.router.add_get("/stacked", stacked)
    app.router.add_get("/nested", nested)
    app.router.add_get("/junk", junk)
    app.router.add_get("/hang", hang)
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    http = HttpFetcher(FetchOptions(allow_private_addresses=True, read_timeout_s=0.3))
    yield http
    await http.close()


def request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


async def test_a_20_mb_robots_txt_is_read_to_512_kib_and_the_host_stays_crawlable(
    hostile: str, fetcher: HttpFetcher
) -> None:
    # Before: the whole file was read against max_body_bytes (10 MiB), TooLarge, and the
    # host was "robots.txt unavailable": nothing on it was crawled.
    async def fetch(url: str) -> FetchResult:
        return await fetcher.fetch(request(url), truncate_at_bytes=ROBOTS_MAX_BYTES)

    robots = RobotsCache(
        fetch, user_agent="crawlfleet/0.1", clock=FakeClock(), ttl_s=60, error_ttl_s=60
    )
    assert (await robots.check(f"{hostile}/page")).allowed
    early = await robots.check(f"{hostile}/early/x")
    assert not early.allowed
    assert not early.unavailable


async def test_50_stacked_content_codings_are_refused_in_one_line(
    hostile: str, fetcher: HttpFetcher
) -> None:
    with pytest.raises(FetchError, match="50 content codings, at most 2") as caught:
        await fetcher.fetch(request(f"{hostile}/stacked"))
    assert caught.value.transient is False
    assert "\n" not in str(caught.value)
    assert (await fetcher.fetch(request(f"{hostile}/page"))).body == PAGE


async def test_a_small_gzip_page_of_deep_html_fails_its_parse_budget(
    hostile: str, fetcher: HttpFetcher
) -> None:
    result = await fetcher.fetch(request(f"{hostile}/nested"))
    budget = ParseBudget(parse_limits(Settings()))
    try:
        with pytest.raises(ParseBudgetExceeded, match="/nested: HTML nested deeper than 2000"):
            await budget.parse(default_parser, result)
        fine, _ = await budget.parse(default_parser, await fetcher.fetch(request(f"{hostile}/p")))
    finally:
        budget.close()
    assert [link.url for link in fine.links] == [f"{hostile}/next"]


async def test_junk_bytes_parse_to_an_item_without_error(
    hostile: str, fetcher: HttpFetcher
) -> None:
    result = await fetcher.fetch(request(f"{hostile}/junk"))
    budget = ParseBudget(parse_limits(Settings()))
    try:
        parsed, _ = await budget.parse(default_parser, result)
    finally:
        budget.close()
    assert [item.key for item in parsed.items] == [f"{hostile}/junk"]


async def test_a_hanging_host_is_a_clear_transient_error(
    hostile: str, fetcher: HttpFetcher
) -> None:
    with pytest.raises(FetchError, match=r"timeout reading .*/hang: no data for 0\.3s") as caught:
        await fetcher.fetch(request(f"{hostile}/hang"))
    assert caught.value.transient is True


async def test_a_crawl_of_the_hostile_host_keeps_its_good_pages(
    hostile: str, tmp_path: os.PathLike[str]
) -> None:
    """The whole crawl step, wired: robots.txt cut at 512 KiB (its early rule holds, its
    late ``Disallow: /`` is never read), deep HTML a parse error of its own, the rest fetched."""
    from crawlfleet.api import Crawl

    seeds = [f"{hostile}/page", f"{hostile}/nested", f"{hostile}/early/x"]
    settings = Settings(
        state_dir=tmp_path, allow_private_addresses=True, delay_s=0, max_depth=1, max_retries=0
    )
    result = await asyncio.wait_for(Crawl(settings, seeds=seeds).run_async(), timeout=60)
    assert result.complete
    assert result.stats.pages == 2  # /page and the /next it links to
    assert result.parse_errors == 1
    assert result.stats.get("outcome.skipped") == 1  # /early/x, disallowed by the early rule
    assert "nested deeper than" in result.top_parse_errors[0][0]

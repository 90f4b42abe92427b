"""The crawl's robots.txt cache as wired (``build_robots``): the real HTTP fetcher against a
local aiohttp server, RFC 9309's redirects and the request target the fetcher sends; one
connection pool with the pages' fetcher (``build_transport``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from aiohttp import web

from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.frontier.robots import RobotsCache
from crawlfleet.models import CrawlRequest
from crawlfleet.runtime.fetcher_wiring import build_fetchers, build_robots, build_transport
from crawlfleet.settings import Settings
from tests.fixtures.scripted_server import ScriptedServer, serving

RULES = "User-agent: *\nDisallow: /x\nDisallow: /caf\u00e9\n".encode()


@pytest.fixture
async def base() -> AsyncIterator[str]:
    async def robots(request: web.Request) -> web.StreamResponse:
        hop = int(request.query.get("hop", "0"))
        if hop < 5:
            raise web.HTTPFound(f"/robots.txt?hop={hop + 1}")
        return web.Response(body=RULES, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def wired(stack: AsyncExitStack, **settings: object) -> RobotsCache:
    config = Settings(allow_private_addresses=True, **settings)  # type: ignore[arg-type]
    robots, _fetch = build_robots(config, SystemClock(), stack, Credentials())
    assert robots is not None
    return robots


async def test_five_redirects_are_followed_whatever_max_redirects_says(base: str) -> None:
    async with AsyncExitStack() as stack:
        robots = await wired(stack, max_redirects=0)
        assert not (await robots.check(f"{base}/x")).allowed
        assert (await robots.check(f"{base}/y")).allowed


async def test_a_rule_matches_the_target_the_fetcher_sends(base: str) -> None:
    async with AsyncExitStack() as stack:
        robots = await wired(stack)
        # Sent as /caf%C3%A9, which the rule "Disallow: /café" is read as.
        assert not (await robots.check(f"{base}/caf\u00e9")).allowed
        assert not (await robots.check(f"{base}/caf%c3%a9")).allowed
        assert (await robots.check(f"{base}/cafe")).allowed


async def test_a_browser_user_agent_needs_a_robots_token() -> None:
    browser = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36"
    async with AsyncExitStack() as stack:
        with pytest.raises(ConfigError, match="robots_token"):
            build_robots(Settings(user_agent=browser), SystemClock(), stack, Credentials())


async def test_pages_robots_txt_and_sitemaps_share_one_connection_pool() -> None:
    page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\npage"
    rules = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nUser-agent:*"
    sitemap = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n<x></x>"
    config = Settings(allow_private_addresses=True)
    async with serving(ScriptedServer()) as server, AsyncExitStack() as stack:
        server.replies = [rules, page, sitemap]
        base = f"http://127.0.0.1:{server.port}"
        transport = build_transport(config, stack)
        fetchers = build_fetchers(config, SystemClock(), Credentials(), transport=transport)
        for fetcher in fetchers.values():
            stack.push_async_callback(fetcher.close)
        robots, fetch_url = build_robots(
            config, SystemClock(), stack, Credentials(), transport=transport
        )
        assert robots is not None
        assert (await robots.check(f"{base}/page")).allowed
        request = CrawlRequest(url=f"{base}/page", fingerprint="f", domain="d")
        assert (await fetchers["http"].fetch(request)).body == b"page"
        assert (await fetch_url(f"{base}/sitemap.xml")).body == b"<x></x>"
    assert server.connections == 1

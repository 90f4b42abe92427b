"""The impersonate fetcher through a crawl session's proxy (real tinyproxy): the ladder's
``impersonate`` rung keeps the domain's proxy tier instead of going out directly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from crawlfleet.errors import ForbiddenAddress
from crawlfleet.fetchers.impersonate import ImpersonateFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest
from tests.fixtures.tinyproxy import ProxyFarm


@pytest.fixture
async def origin() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    """A page on 127.0.0.1 that records each client address and its sec-ch-ua header."""
    seen: list[tuple[str, str]] = []

    async def page(request: web.Request) -> web.Response:
        seen.append((request.remote or "", request.headers.get("sec-ch-ua", "")))
        return web.Response(text="<html><body>ok</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/page", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/page", seen
    await runner.cleanup()


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="127.0.0.1", fetcher="impersonate")


async def test_a_session_proxy_with_credentials_carries_the_impersonated_request(
    proxies: ProxyFarm, origin: tuple[str, list[tuple[str, str]]]
) -> None:
    url, seen = origin
    proxy = proxies.start(bind="127.0.1.31", auth=("crawler", "s3cret"))
    fetcher = ImpersonateFetcher(FetchOptions(allow_private_addresses=True))
    try:
        via = Via(f"http://127.0.0.1:{proxy.port}", ("crawler", "s3cret"), {"X-Profile": "no"})
        result = await fetcher.fetch(_request(url), via=via)
    finally:
        await fetcher.close()
    assert result.status == 200
    ((client, ch_ua),) = seen
    assert client == "127.0.1.31"  # through the proxy, not direct
    assert "Chromium" in ch_ua  # the impersonated browser's headers, not the session profile's


async def test_through_a_proxy_a_literal_private_address_is_still_refused(
    proxies: ProxyFarm,
) -> None:
    proxy = proxies.start(bind="127.0.1.32")
    fetcher = ImpersonateFetcher(FetchOptions())
    try:
        with pytest.raises(ForbiddenAddress, match=r"127\.0\.0\.1"):
            await fetcher.fetch(
                _request("http://127.0.0.1:9/page"), via=Via(f"http://127.0.0.1:{proxy.port}")
            )
    finally:
        await fetcher.close()

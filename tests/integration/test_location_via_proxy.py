"""A redirect's ``Location`` read on the proxied path as on the direct one: raw
bytes percent-encoded, two different values refused (issue #35, items 5 and 9).

The scripted server plays the proxy: it answers the proxied request itself, with two
``Location`` headers that a real proxy (tinyproxy) would fold into one before us.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest
from tests.fixtures.scripted_server import ScriptedServer, serving

TARGET = "http://127.0.0.1:9/from"  # never reached: the proxy answers


def _redirect(*locations: bytes) -> bytes:
    lines = b"".join(b"Location: " + location + b"\r\n" for location in locations)
    return b"HTTP/1.1 302 Found\r\n" + lines + b"Content-Length: 0\r\n\r\n"


@pytest.fixture
async def proxy() -> AsyncIterator[ScriptedServer]:
    async with serving(ScriptedServer()) as script:
        yield script


async def _headers(proxy: ScriptedServer) -> dict[str, str]:
    fetcher = HttpFetcher(
        FetchOptions(allow_private_addresses=True, read_timeout_s=5), follow_redirects=False
    )
    try:
        request = CrawlRequest(url=TARGET, fingerprint="f", domain="d")
        result = await fetcher.fetch(request, via=Via(f"http://127.0.0.1:{proxy.port}"))
    finally:
        await fetcher.close()
    assert proxy.requests[0].startswith(f"GET {TARGET} HTTP/1.1\r\n".encode())  # proxied
    return result.headers


async def test_raw_utf8_in_a_location_is_percent_encoded(proxy: ScriptedServer) -> None:
    proxy.replies = [_redirect("/target-raw-\u00e9".encode())]
    assert (await _headers(proxy))["location"] == "/target-raw-%C3%A9"


async def test_two_different_locations_fail_the_response(proxy: ScriptedServer) -> None:
    proxy.replies = [_redirect(b"/a", b"/b")]
    with pytest.raises(FetchError, match="two different Location headers"):
        await _headers(proxy)


async def test_a_repeated_same_location_is_one(proxy: ScriptedServer) -> None:
    proxy.replies = [_redirect(b"/a", b"/a")]
    assert (await _headers(proxy))["location"] == "/a"

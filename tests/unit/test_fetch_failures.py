"""HttpFetcher against broken servers and odd URLs: every failure is a FetchError."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from crawlfleet.errors import FetchError, ForbiddenAddress
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from tests.fixtures.scripted_server import ScriptedServer, serving


@pytest.fixture
async def raw_server() -> AsyncIterator[ScriptedServer]:
    """Answers the one request it expects with the test's reply, then closes."""
    async with serving(ScriptedServer(close_after_reply=True)) as script:
        yield script


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
    yield fetcher
    await fetcher.close()


@pytest.fixture
async def guarded() -> AsyncIterator[HttpFetcher]:
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=False))
    yield fetcher
    await fetcher.close()


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort", "payload is not completed"),
        (b"garbage\r\n\r\n", "malformed response: bad status line"),
        (b"", "Server disconnected"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed response"),
    ],
)
async def test_broken_responses_are_transient_fetch_errors(
    fetcher: HttpFetcher, raw_server: ScriptedServer, reply: bytes, message: str
) -> None:
    raw_server.replies = [reply]
    url = f"http://127.0.0.1:{raw_server.port}/x"
    with pytest.raises(FetchError, match=message) as caught:
        await fetcher.fetch(_request(url))
    assert type(caught.value) is FetchError
    assert caught.value.transient is True
    assert url in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_redirect_without_location_is_a_result(
    fetcher: HttpFetcher, raw_server: ScriptedServer
) -> None:
    raw_server.replies = [b"HTTP/1.1 302 Found\r\nContent-Length: 2\r\n\r\nno"]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{raw_server.port}/"))
    assert (result.status, result.body, result.redirects) == (302, b"no", ())


@pytest.mark.parametrize("url", ["ftp://example.com/", "file:///etc/passwd"])
async def test_non_http_request_urls_are_refused(fetcher: HttpFetcher, url: str) -> None:
    with pytest.raises(FetchError, match="not an http") as caught:
        await fetcher.fetch(_request(url))
    assert caught.value.transient is False


@pytest.mark.parametrize("url", ["http://", "http://[::1/"])
async def test_invalid_urls_are_refused(fetcher: HttpFetcher, url: str) -> None:
    with pytest.raises(FetchError, match="invalid URL") as caught:
        await fetcher.fetch(_request(url))
    assert caught.value.transient is False


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "0", "[::ffff:127.0.0.1]", "[::1]", "localhost"]
)
async def test_disguised_loopback_hosts_never_connect(
    guarded: HttpFetcher, raw_server: ScriptedServer, host: str
) -> None:
    raw_server.replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]
    with pytest.raises(FetchError) as caught:
        await guarded.fetch(_request(f"http://{host}:{raw_server.port}/"))
    assert isinstance(caught.value, ForbiddenAddress) or "invalid URL" in str(caught.value)
    assert caught.value.transient is False
    assert raw_server.requests == []

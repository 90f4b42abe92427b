"""The HTTP fetcher's own connections (``fetchers/wire.py``) against a scripted server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher, wire
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from tests.fixtures.scripted_server import DROP, ScriptedServer, serving

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    async with serving(ScriptedServer()) as script:
        yield script


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True, read_timeout_s=2))
    yield fetcher
    await fetcher.close()


def _request(url: str, method: str = "GET", **fields: object) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d", method=method, **fields)  # type: ignore[arg-type]


async def test_a_kept_alive_connection_carries_the_next_request(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [OK, OK]
    for path in ("/a", "/b"):
        assert (
            await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}{path}"))
        ).body == b"ok"
    assert (scripted.connections, len(scripted.requests)) == (1, 2)
    assert scripted.requests[0].startswith(b"GET /a HTTP/1.1\r\nHost: 127.0.0.1:")


async def test_a_get_the_server_drops_on_a_reused_connection_is_sent_again_once(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [OK, DROP, OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    await fetcher.fetch(_request(url))
    assert (await fetcher.fetch(_request(url))).body == b"ok"
    assert (scripted.connections, len(scripted.requests)) == (2, 3)


async def test_a_post_the_server_drops_is_not_sent_again(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [OK, DROP, OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    await fetcher.fetch(_request(url))
    with pytest.raises(FetchError, match="Server disconnected without a response") as caught:
        await fetcher.fetch(_request(url, "POST", body="x=1"))
    assert caught.value.transient is True
    assert len(scripted.requests) == 2


async def test_bytes_after_a_response_end_its_connection(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [OK + b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    first = await fetcher.fetch(_request(url))
    assert (first.status, first.body) == (200, b"ok")
    assert (await fetcher.fetch(_request(url))).status == 200
    assert scripted.connections == 2


async def test_connection_close_is_honoured(fetcher: HttpFetcher, scripted: ScriptedServer) -> None:
    scripted.replies = [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    await fetcher.fetch(_request(url))
    await fetcher.fetch(_request(url))
    assert scripted.connections == 2


async def test_a_body_without_a_length_is_read_to_the_close(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 100_000]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert result.body == b"x" * 100_000


async def test_interim_responses_are_skipped(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [b"HTTP/1.1 100 Continue\r\n\r\n" + OK]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.status, result.body) == (200, b"ok")


async def test_a_head_response_has_no_body_whatever_its_length(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/", "HEAD"))
    assert (result.status, result.body, result.headers["content-length"]) == (200, b"", "5000")


async def test_a_flood_of_headers_is_a_malformed_response(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    flood = b"".join(b"X-%d: %s\r\n" % (n, b"v" * 100) for n in range(1000))
    scripted.replies = [b"HTTP/1.1 200 OK\r\n" + flood + b"Content-Length: 0\r\n\r\n"]
    with pytest.raises(FetchError, match="malformed response: more than 256 headers") as caught:
        await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb"])
async def test_a_header_with_a_line_break_is_refused_unsent(
    fetcher: HttpFetcher, scripted: ScriptedServer, value: str
) -> None:
    url = f"http://127.0.0.1:{scripted.port}/"
    with pytest.raises(FetchError, match="line break") as caught:
        await fetcher.fetch(_request(url, headers={"X-Token": value}))
    assert caught.value.transient is False
    assert scripted.requests == []


async def test_a_host_header_of_the_request_replaces_the_urls(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    await fetcher.fetch(_request(url, headers={"Host": "shop.test"}))
    assert scripted.requests[0].count(b"Host:") == 1
    assert b"\r\nHost: shop.test\r\n" in scripted.requests[0]


async def test_idle_connections_are_closed_after_the_keepalive(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "KEEPALIVE_S", 0.2)
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        scripted.replies = [OK]
        await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
        for _ in range(50):
            if scripted.closed:
                break
            await asyncio.sleep(0.05)
        assert scripted.closed == 1
    finally:
        await fetcher.close()

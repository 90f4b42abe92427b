"""ImpersonateFetcher against real aiohttp servers on loopback: HttpFetcher's guarantees."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from crawlfleet.archive.protocols import Sent
from crawlfleet.errors import FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers.addresses import AddressPredicate
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.impersonate import ImpersonateFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest, FetchResult
from tests.fixtures.clock import FakeClock
from tests.unit.test_http_fetcher import (  # the same test site
    PAGE,
    Site,
    _options,
    bombs,
    server,
    servers,
    unaccepting_port,
)

__all__ = ["bombs", "server", "servers", "unaccepting_port"]  # fixtures used here


@pytest.fixture
async def fetcher() -> AsyncIterator[ImpersonateFetcher]:
    fetcher = ImpersonateFetcher(_options(), clock=FakeClock(start=1234.5))
    yield fetcher
    await fetcher.close()


def _request(url: str, **fields: object) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d", **fields)  # type: ignore[arg-type]


async def test_page_is_returned_with_lower_case_headers(
    fetcher: ImpersonateFetcher, server: Site
) -> None:
    result = await fetcher.fetch(_request(server.url("/page")))
    assert (result.status, result.body) == (200, PAGE)
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert all(key == key.lower() for key in result.headers)
    assert (result.final_url, result.redirects) == (server.url("/page"), ())
    assert (result.fetcher, result.fetched_at) == ("impersonate", 1234.5)


async def test_sends_a_browsers_headers_and_the_requests_own(
    fetcher: ImpersonateFetcher, server: Site
) -> None:
    result = await fetcher.fetch(_request(server.url("/headers"), headers={"X-Trace": "7"}))
    sent = {k.lower(): v for k, v in json.loads(result.body).items()}
    assert "Chrome/" in sent["user-agent"]
    assert sent["sec-ch-ua"].startswith('"Chromium"')
    assert sent["sec-fetch-mode"] == "navigate"
    assert sent["accept-encoding"] == "gzip, deflate, br, zstd"
    assert sent["x-trace"] == "7"
    assert "upgrade" not in sent  # no h2c upgrade over plain http, as a browser


async def test_basic_auth_goes_to_its_own_origin(servers: dict[str, Site]) -> None:
    mine = servers["127.0.0.1"]
    fetcher = ImpersonateFetcher(_options(), credentials=Credentials.from_urls(
        [mine.url("/").replace("http://", "http://u:p@")]
    ))  # fmt: skip
    try:
        sent = json.loads((await fetcher.fetch(_request(mine.url("/headers")))).body)
        other = servers["127.0.0.2"].url("/headers")
        elsewhere = json.loads((await fetcher.fetch(_request(other))).body)
    finally:
        await fetcher.close()
    assert sent["Authorization"] == "Basic dTpw"
    assert "Authorization" not in elsewhere


async def test_repeated_headers_are_joined(fetcher: ImpersonateFetcher, server: Site) -> None:
    result = await fetcher.fetch(_request(server.url("/dup-headers")))
    assert result.headers["x-seen"] == "one, two"


async def test_statuses_are_results_and_redirects_are_not_followed(
    fetcher: ImpersonateFetcher, server: Site
) -> None:
    assert (await fetcher.fetch(_request(server.url("/status/404")))).status == 404
    limited = await fetcher.fetch(_request(server.url("/status/429")))
    assert (limited.status, limited.headers["retry-after"]) == (429, "7")
    moved = await fetcher.fetch(_request(server.url("/chain/2")))
    assert (moved.status, moved.headers["location"]) == (302, "/chain/1")
    assert server.paths == ["/status/404", "/status/429", "/chain/2"]


async def test_a_post_sends_its_body(fetcher: ImpersonateFetcher, server: Site) -> None:
    request = _request(server.url("/status/500"), method="POST", body="a=1")
    assert (await fetcher.fetch(request)).status == 405  # the route is GET only: it was a POST


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "br,gzip"])
async def test_encoded_bodies_are_decoded(
    fetcher: ImpersonateFetcher, server: Site, coding: str
) -> None:
    assert (await fetcher.fetch(_request(server.url(f"/encoded/{coding}")))).body == PAGE


async def test_chunked_body_is_read_whole(fetcher: ImpersonateFetcher, server: Site) -> None:
    result = await fetcher.fetch(_request(server.url("/streamed-small")))
    assert result.body == b"<html><p>chunked</p></html>"


@pytest.mark.parametrize("path", ["/declared-large", "/streamed-large"])
async def test_a_body_over_the_cap_is_refused(server: Site, path: str) -> None:
    fetcher = ImpersonateFetcher(_options(max_body_bytes=2048))
    try:
        with pytest.raises(TooLarge, match="body exceeds 2048 bytes") as caught:
            await fetcher.fetch(_request(server.url(path)))
    finally:
        await fetcher.close()
    assert caught.value.transient is False


async def test_a_bomb_is_refused_without_inflating(server: Site) -> None:
    cap = 1024 * 1024
    fetcher = ImpersonateFetcher(_options(max_decompressed_bytes=cap))
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match=f"body exceeds {cap} bytes \\(decoded\\)"):
            await fetcher.fetch(_request(server.url("/bomb/gzip")))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await fetcher.close()
    assert peak_bytes < 4 * cap


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fetcher = ImpersonateFetcher(_options())
    try:
        with pytest.raises(FetchError, match="cannot connect") as caught:
            await fetcher.fetch(_request(f"http://127.0.0.1:{port}/"))
    finally:
        await fetcher.close()
    assert (type(caught.value), caught.value.transient) == (FetchError, True)


async def test_connect_timeout(unaccepting_port: int) -> None:
    fetcher = ImpersonateFetcher(_options(connect_timeout_s=0.2, total_timeout_s=5))
    try:
        with pytest.raises(FetchError, match="timeout fetching") as caught:
            await fetcher.fetch(_request(f"http://127.0.0.1:{unaccepting_port}/"))
    finally:
        await fetcher.close()
    assert caught.value.transient is True


async def test_read_timeout(server: Site) -> None:
    fetcher = ImpersonateFetcher(
        _options(connect_timeout_s=1, read_timeout_s=0.2, total_timeout_s=5)
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(FetchError, match=r"timeout fetching .*/hang"):
            await fetcher.fetch(_request(server.url("/hang")))
    finally:
        await fetcher.close()
    assert loop.time() - started < 2.5  # libcurl's low-speed window: whole seconds


async def test_total_timeout(server: Site) -> None:
    fetcher = ImpersonateFetcher(_options(connect_timeout_s=0.1, total_timeout_s=0.3))
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(FetchError, match=r"timeout fetching .*/trickle"):
            await fetcher.fetch(_request(server.url("/trickle")))
    finally:
        await fetcher.close()
    assert loop.time() - started < 0.9


def _forbid(*addresses: str) -> AddressPredicate:
    refused = {ipaddress.ip_address(a) for a in addresses}
    return lambda address: address in refused


async def test_private_addresses_are_refused_before_connecting(server: Site) -> None:
    port = server.base.rsplit(":", 1)[1]
    fetcher = ImpersonateFetcher(_options(allow_private_addresses=False))
    try:
        with pytest.raises(ForbiddenAddress, match=r"127\.0\.0\.1") as caught:
            await fetcher.fetch(_request(server.url("/page")))
        with pytest.raises(ForbiddenAddress, match=r"localhost resolves to .*127\.0\.0\.1"):
            await fetcher.fetch(_request(f"http://localhost:{port}/page"))
    finally:
        await fetcher.close()
    assert caught.value.transient is False
    assert server.paths == []


async def test_a_name_is_pinned_to_the_addresses_that_passed(server: Site) -> None:
    port = server.base.rsplit(":", 1)[1]
    fetcher = ImpersonateFetcher(
        FetchOptions(allow_private_addresses=False), forbidden=_forbid("::1", "127.0.0.2")
    )
    try:
        result = await fetcher.fetch(_request(f"http://localhost:{port}/page"))
    finally:
        await fetcher.close()
    assert (result.status, server.paths) == (200, ["/page"])


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///nohost"])
async def test_non_http_urls_are_refused(fetcher: ImpersonateFetcher, url: str) -> None:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(_request(url))
    assert caught.value.transient is False


async def test_concurrent_fetches_and_a_fetch_after_close(server: Site) -> None:
    fetcher = ImpersonateFetcher(_options())
    try:
        results = await asyncio.gather(
            *(fetcher.fetch(_request(server.url(f"/page?n={i}"))) for i in range(20))
        )
        await fetcher.close()
        again = await fetcher.fetch(_request(server.url("/page")))
    finally:
        await fetcher.close()
    assert {r.status for r in results} == {200}
    assert again.body == PAGE


class Kept:
    """A ``ResponseKeeper`` that remembers what it was given."""

    def __init__(self) -> None:
        self.kept: list[tuple[FetchResult, Sent]] = []

    async def keep(self, result: FetchResult, sent: Sent) -> None:
        self.kept.append((result, sent))


async def test_the_archive_gets_each_response_with_the_headers_libcurl_sent(server: Site) -> None:
    keeper = Kept()
    fetcher = ImpersonateFetcher(_options(), keeper=keeper)
    try:
        plain = await fetcher.fetch(_request(server.url("/page")))
        coded = await fetcher.fetch(_request(server.url("/encoded/br,gzip")))
    finally:
        await fetcher.close()
    [(result, sent), (coded_result, coded_sent)] = keeper.kept
    assert result is plain
    assert coded_result is coded
    assert (sent.method, sent.body, sent.decoded, sent.address) == ("GET", PAGE, False, "127.0.0.1")
    headers = {name.lower(): value for name, value in sent.request_headers.items()}
    assert "Chrome/" in headers["user-agent"]
    assert headers["sec-ch-ua"].startswith('"Chromium"')
    assert headers["accept-encoding"] == "gzip, deflate, br, zstd"
    assert (coded_sent.body, coded_sent.decoded) == (PAGE, True)  # libcurl decoded it: said so

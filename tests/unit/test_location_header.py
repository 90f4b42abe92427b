"""A redirect's ``Location`` read as browsers read it (issue #35, items 5 and 9)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from crawlfleet.urls import join
from tests.fixtures.scripted_server import ScriptedServer, serving

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def _redirect(*locations: bytes) -> bytes:
    lines = b"".join(b"Location: " + location + b"\r\n" for location in locations)
    return b"HTTP/1.1 302 Found\r\n" + lines + b"Content-Length: 0\r\n\r\n"


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    async with serving(ScriptedServer()) as script:
        yield script


async def _fetch(url: str, *, follow: bool) -> tuple[int, dict[str, str], str]:
    fetcher = HttpFetcher(
        FetchOptions(allow_private_addresses=True, read_timeout_s=2), follow_redirects=follow
    )
    try:
        result = await fetcher.fetch(CrawlRequest(url=url, fingerprint="f", domain="d"))
    finally:
        await fetcher.close()
    return result.status, result.headers, result.final_url


async def test_raw_utf8_in_a_location_is_requested_percent_encoded(
    scripted: ScriptedServer,
) -> None:
    scripted.replies = [_redirect("/target-raw-\u00e9".encode()), OK]
    base = f"http://127.0.0.1:{scripted.port}"
    status, _, final = await _fetch(f"{base}/from", follow=True)
    assert (status, final) == (200, f"{base}/target-raw-%C3%A9")
    assert scripted.requests[1].startswith(b"GET /target-raw-%C3%A9 HTTP/1.1\r\n")


async def test_a_queued_redirect_keeps_the_location_escaped(scripted: ScriptedServer) -> None:
    scripted.replies = [_redirect("/target-raw-\u00e9".encode())]
    base = f"http://127.0.0.1:{scripted.port}"
    status, headers, _ = await _fetch(f"{base}/from", follow=False)
    assert (status, headers["location"]) == (302, "/target-raw-%C3%A9")
    assert join(f"{base}/from", headers["location"]) == f"{base}/target-raw-%C3%A9"


async def test_two_different_locations_fail_the_response(scripted: ScriptedServer) -> None:
    scripted.replies = [_redirect(b"/a", b"/b")]
    with pytest.raises(FetchError, match="two different Location headers"):
        await _fetch(f"http://127.0.0.1:{scripted.port}/from", follow=False)


async def test_a_repeated_same_location_is_one(scripted: ScriptedServer) -> None:
    scripted.replies = [_redirect(b"/a", b"/a")]
    _, headers, _ = await _fetch(f"http://127.0.0.1:{scripted.port}/from", follow=False)
    assert headers["location"] == "/a"


async def test_backslashes_in_a_location_are_slashes(scripted: ScriptedServer) -> None:
    port = scripted.port
    scripted.replies = [_redirect(f"\\\\127.0.0.1:{port}\\next\\page".encode()), OK]
    status, _, final = await _fetch(f"http://127.0.0.1:{port}/from", follow=True)
    assert (status, final) == (200, f"http://127.0.0.1:{port}/next/page")
    assert scripted.requests[1].startswith(b"GET /next/page HTTP/1.1\r\n")

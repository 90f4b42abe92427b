"""The Fetcher contract, run against every fetcher; and the package's public API.

The subjects: ``file``; ``http`` (``HttpFetcher`` on its own wire, direct); ``proxied`` (the
same through a real tinyproxy: absolute-form requests on the wire, decision 0060);
``impersonate`` (libcurl). The network ones also keep the address guard (a literal private
IP refused before a byte is sent, a name only when the fetcher resolves it), the total
deadline, and one-line errors that name the URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

import crawlfleet.fetchers
from crawlfleet.errors import FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers import FileFetcher, HttpFetcher
from crawlfleet.fetchers.impersonate import ImpersonateFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Fetcher, Via
from crawlfleet.models import CrawlRequest, FetchResult
from tests.fixtures.clock import FakeClock
from tests.fixtures.tinyproxy import ProxyFarm

PAGE = b"<html><body>contract</body></html>"
SETTINGS = FetchOptions(allow_private_addresses=True, max_body_bytes=4096)
DEADLINE = FetchOptions(
    allow_private_addresses=True, total_timeout_s=0.6, connect_timeout_s=0.5, read_timeout_s=5.0
)
GUARDED = FetchOptions(allow_private_addresses=False)
NETWORK = ["http", "proxied", "impersonate"]


class _Through:
    """An ``HttpFetcher`` as a ``Fetcher`` that sends every request through one proxy."""

    def __init__(self, http: HttpFetcher, proxy: str) -> None:
        self._http = http
        self._proxy = proxy

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        return await self._http.fetch(request, via=Via(self._proxy))

    async def close(self) -> None:
        await self._http.close()


@dataclass
class Subject:
    """A fetcher, the URL of a path it can reach, and how to make another with other settings
    (closed by the fixture)."""

    fetcher: Fetcher
    url_for: Callable[[str], str]
    make: Callable[[FetchOptions], Fetcher]


@pytest.fixture
async def base(tmp_path: Path) -> AsyncIterator[str]:
    """An origin serving the files of ``tmp_path``, ``/trickle`` (a byte every 0.1 s) and
    ``/cut`` (10 bytes of 1000 announced, then the connection closed)."""

    async def serve(request: web.Request) -> web.StreamResponse:
        path = tmp_path / request.match_info["name"]
        if not path.is_file():
            raise web.HTTPNotFound()
        return web.Response(body=path.read_bytes(), content_type="text/html")

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "100"})
        await response.prepare(request)
        try:
            for _ in range(100):
                await response.write(b"x")
                await asyncio.sleep(0.1)
        except ConnectionError:
            pass
        return response

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "1000"})
        await response.prepare(request)
        await response.write(b"x" * 10)
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_get("/trickle", trickle)
    app.router.add_get("/cut", cut)
    app.router.add_get("/{name}", serve)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/"
    await runner.cleanup()


@pytest.fixture
async def made() -> AsyncIterator[list[Fetcher]]:
    fetchers: list[Fetcher] = []
    yield fetchers
    for fetcher in fetchers:
        await fetcher.close()


def _maker(
    build: Callable[[FetchOptions], Fetcher], made: list[Fetcher]
) -> Callable[[FetchOptions], Fetcher]:
    def make(settings: FetchOptions) -> Fetcher:
        fetcher = build(settings)
        made.append(fetcher)
        return fetcher

    return make


@pytest.fixture
async def http_subject(base: str, made: list[Fetcher]) -> Subject:
    make = _maker(lambda s: HttpFetcher(s, clock=FakeClock(start=7.0)), made)
    return Subject(make(SETTINGS), lambda name: base + name, make)


@pytest.fixture
async def proxied_subject(base: str, made: list[Fetcher], proxies: ProxyFarm) -> Subject:
    proxy = f"http://127.0.0.1:{proxies.start(bind='127.0.1.51').port}"
    make = _maker(lambda s: _Through(HttpFetcher(s, clock=FakeClock(start=7.0)), proxy), made)
    return Subject(make(SETTINGS), lambda name: base + name, make)


@pytest.fixture
async def impersonate_subject(base: str, made: list[Fetcher]) -> Subject:
    make = _maker(lambda s: ImpersonateFetcher(s, clock=FakeClock(start=7.0)), made)
    return Subject(make(SETTINGS), lambda name: base + name, make)


@pytest.fixture
def file_subject(tmp_path: Path, made: list[Fetcher]) -> Subject:
    make = _maker(lambda s: FileFetcher(s, clock=FakeClock(start=7.0)), made)
    return Subject(make(SETTINGS), lambda n: (tmp_path / n).as_uri(), make)


@pytest.fixture(params=["http", "file", "proxied", "impersonate"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    (tmp_path / "page.html").write_bytes(PAGE)
    (tmp_path / "big.html").write_bytes(b"x" * 5000)
    result: Subject = request.getfixturevalue(f"{request.param}_subject")
    return result


@pytest.fixture(params=NETWORK)
def network_subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    (tmp_path / "page.html").write_bytes(PAGE)
    result: Subject = request.getfixturevalue(f"{request.param}_subject")
    return result


@pytest.fixture(params=["http", "impersonate"])
def resolving_subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    """A network subject that resolves the host itself (not through a proxy)."""
    (tmp_path / "page.html").write_bytes(PAGE)
    result: Subject = request.getfixturevalue(f"{request.param}_subject")
    return result


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


async def test_page_is_a_200_result(subject: Subject) -> None:
    url = subject.url_for("page.html")
    result = await subject.fetcher.fetch(_request(url))
    assert (result.status, result.body, result.url, result.final_url) == (200, PAGE, url, url)
    assert result.is_html
    assert result.fetched_at == 7.0
    assert result.elapsed_s >= 0
    assert all(key == key.lower() for key in result.headers)


async def test_missing_is_a_404_result_not_an_error(subject: Subject) -> None:
    result = await subject.fetcher.fetch(_request(subject.url_for("missing.html")))
    assert result.status == 404


async def test_too_large_is_a_permanent_error(subject: Subject) -> None:
    with pytest.raises(TooLarge) as caught:
        await subject.fetcher.fetch(_request(subject.url_for("big.html")))
    assert caught.value.transient is False


async def test_close_twice_is_harmless(subject: Subject) -> None:
    await subject.fetcher.close()
    await subject.fetcher.close()


async def test_a_literal_private_address_is_refused_before_a_byte_is_sent(
    network_subject: Subject,
) -> None:
    guarded = network_subject.make(GUARDED)
    url = network_subject.url_for("page.html")
    with pytest.raises(ForbiddenAddress, match=r"127\.0\.0\.1") as caught:
        await guarded.fetch(_request(url))
    assert caught.value.transient is False
    assert str(caught.value).startswith(url)


async def test_a_name_resolving_to_a_private_address_is_refused(
    resolving_subject: Subject,
) -> None:
    url = resolving_subject.url_for("page.html").replace("127.0.0.1", "localhost")
    with pytest.raises(ForbiddenAddress, match="localhost resolves to"):
        await resolving_subject.make(GUARDED).fetch(_request(url))


async def test_the_total_deadline_ends_a_trickling_response(network_subject: Subject) -> None:
    fetcher = network_subject.make(DEADLINE)
    url = network_subject.url_for("trickle")
    started = asyncio.get_running_loop().time()
    with pytest.raises(FetchError, match=f"timeout fetching {url}") as caught:
        await fetcher.fetch(_request(url))
    assert asyncio.get_running_loop().time() - started < 3.0
    assert caught.value.transient is True
    assert "\n" not in str(caught.value)


async def test_a_body_cut_short_is_a_one_line_transient_error_naming_the_url(
    network_subject: Subject,
) -> None:
    url = network_subject.url_for("cut")
    with pytest.raises(FetchError) as caught:
        await network_subject.fetcher.fetch(_request(url))
    assert caught.value.transient is True
    assert url in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///nohost"])
async def test_a_url_that_is_not_http_with_a_host_is_a_permanent_error(
    network_subject: Subject, url: str
) -> None:
    with pytest.raises(FetchError) as caught:
        await network_subject.fetcher.fetch(_request(url))
    assert caught.value.transient is False
    assert str(caught.value).count(url) == 1


def test_public_api() -> None:
    assert sorted(crawlfleet.fetchers.__all__) == [
        "FetchOptions",
        "Fetcher",
        "FileFetcher",
        "HttpFetcher",
        "default_headers",
        "is_forbidden_address",
    ]
    for name in crawlfleet.fetchers.__all__:
        assert getattr(crawlfleet.fetchers, name) is not None

"""The Fetcher contract, run against every fetcher; and the package's public API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

import crawlfleet.fetchers
from crawlfleet.errors import TooLarge
from crawlfleet.fetchers import FileFetcher, HttpFetcher
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.models import CrawlRequest
from crawlfleet.settings import Settings
from tests.fixtures.clock import FakeClock

PAGE = b"<html><body>contract</body></html>"
SETTINGS = Settings(allow_private_addresses=True, max_body_bytes=4096)


@dataclass
class Subject:
    """A fetcher and the URL of a path it can reach."""

    fetcher: Fetcher
    url_for: Callable[[str], str]


@pytest.fixture
async def http_subject(tmp_path: Path) -> AsyncIterator[Subject]:
    async def serve(request: web.Request) -> web.StreamResponse:
        path = tmp_path / request.match_info["name"]
        if not path.is_file():
            raise web.HTTPNotFound()
        return web.Response(body=path.read_bytes(), content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    fetcher = HttpFetcher(SETTINGS, clock=FakeClock(start=7.0))
    yield Subject(fetcher, lambda name: base + name)
    await fetcher.close()
    await runner.cleanup()


@pytest.fixture
def file_subject(tmp_path: Path) -> Subject:
    return Subject(
        FileFetcher(SETTINGS, clock=FakeClock(start=7.0)), lambda n: (tmp_path / n).as_uri()
    )


@pytest.fixture(params=["http", "file"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    (tmp_path / "page.html").write_bytes(PAGE)
    (tmp_path / "big.html").write_bytes(b"x" * 5000)
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


def test_public_api() -> None:
    assert sorted(crawlfleet.fetchers.__all__) == [
        "Fetcher",
        "FileFetcher",
        "HttpFetcher",
        "default_headers",
        "is_forbidden_address",
    ]
    for name in crawlfleet.fetchers.__all__:
        assert getattr(crawlfleet.fetchers, name) is not None

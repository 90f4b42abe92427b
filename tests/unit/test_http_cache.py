"""The HTTP cache: what it replays, what it keeps, when an entry expires."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.fetchers.cache import CachingFetcher, ResponseCache, cache_policy
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.runtime.fetching.chain import retried
from crawlfleet.urls import fingerprint
from tests.fixtures.clock import FakeClock


class Origin:
    """A fetcher answering with the given statuses in turn, counting its fetches."""

    def __init__(self, *statuses: int, headers: dict[str, str] | None = None) -> None:
        self.statuses = list(statuses)
        self.headers = headers or {"content-type": "text/html"}
        self.fetches = 0

    async def fetch(
        self, request: CrawlRequest, *, truncate_at_bytes: int | None = None
    ) -> FetchResult:
        self.fetches += 1
        status = self.statuses.pop(0)
        body = b"<html>page %d</html>" % self.fetches
        if truncate_at_bytes is not None:
            body = body[:truncate_at_bytes]
        return FetchResult(
            request.url, request.url, status, dict(self.headers), body, 0.1, fetched_at=5.0
        )

    async def close(self) -> None:
        pass


def request(url: str = "http://shop.example/a") -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint=fingerprint(url), domain="shop.example")


def caching(
    origin: Origin, tmp_path: Path, clock: FakeClock, *, only_200: bool = False, **kw: float
) -> CachingFetcher:
    cache = ResponseCache(tmp_path, clock=clock, **kw)
    return CachingFetcher(origin, cache, cache_policy(only_200=only_200, retried=retried))


async def test_replays_the_stored_response_without_fetching(tmp_path: Path) -> None:
    origin = Origin(200)
    fetcher = caching(origin, tmp_path, FakeClock())
    first = await fetcher.fetch(request())
    again = await caching(Origin(), tmp_path, FakeClock()).fetch(request())
    assert origin.fetches == 1
    assert (again.status, again.body, again.headers, again.fetched_at) == (
        first.status,
        first.body,
        first.headers,
        first.fetched_at,
    )


async def test_an_expired_entry_is_fetched_again(tmp_path: Path) -> None:
    clock = FakeClock(start=5.0)
    origin = Origin(200, 200)
    fetcher = caching(origin, tmp_path, clock, expiry_s=60.0)
    await fetcher.fetch(request())
    clock.advance(59)
    await fetcher.fetch(request())
    assert origin.fetches == 1
    clock.advance(2)
    assert (await fetcher.fetch(request())).body == b"<html>page 2</html>"
    assert origin.fetches == 2


@pytest.mark.parametrize("status", [429, 500, 503, 408])
async def test_a_status_the_crawl_retries_is_never_kept(tmp_path: Path, status: int) -> None:
    origin = Origin(status, 200)
    fetcher = caching(origin, tmp_path, FakeClock())
    assert (await fetcher.fetch(request())).status == status
    assert (await fetcher.fetch(request())).status == 200
    assert origin.fetches == 2


async def test_404_and_redirects_are_kept_unless_only_200(tmp_path: Path) -> None:
    origin = Origin(404, 301)
    fetcher = caching(origin, tmp_path / "all", FakeClock())
    await fetcher.fetch(request("http://shop.example/gone"))
    await fetcher.fetch(request("http://shop.example/gone"))
    assert origin.fetches == 1
    strict = Origin(404, 404)
    fetcher = caching(strict, tmp_path / "ok", FakeClock(), only_200=True)
    await fetcher.fetch(request("http://shop.example/gone"))
    await fetcher.fetch(request("http://shop.example/gone"))
    assert strict.fetches == 2


async def test_truncated_reads_are_cached_apart(tmp_path: Path) -> None:
    origin = Origin(200, 200)
    fetcher = caching(origin, tmp_path, FakeClock())
    whole = await fetcher.fetch(request())
    cut = await fetcher.fetch(request(), truncate_at_bytes=4)
    assert (whole.body, cut.body) == (b"<html>page 1</html>", b"<htm")
    assert origin.fetches == 2


async def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    origin = Origin(200, 200)
    cache = ResponseCache(tmp_path, clock=FakeClock())
    fetcher = CachingFetcher(origin, cache, cache_policy(only_200=False, retried=retried))
    await fetcher.fetch(request())
    path = cache.path_of(request(), None)
    path.write_bytes(path.read_bytes()[:-3])
    assert (await fetcher.fetch(request())).body == b"<html>page 2</html>"
    assert not list(tmp_path.rglob("*.partial"))  # noqa: ASYNC240

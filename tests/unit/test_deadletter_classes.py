"""Dead letters grouped by the class of their last error; requeue and purge by class."""

from __future__ import annotations

import socket

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.store_types import LEASE_EXPIRED, Budget, DomainPolicy, Report
from crawlfleet.models import CrawlRequest
from crawlfleet.monitoring.deadletters import (
    by_class,
    error_class,
    purge_class,
    requeue_class,
)
from crawlfleet.records import Attempt, Outcome

# Texts as the crawler writes them (runtime/step/crawler.py, fetchers/http.py,
# fetchers/decoding.py, frontier/robots.py, runtime/step/judge.py), with the class each must
# fall in.
REAL_ERRORS = [
    ("HTTP 500", "HTTP 500"),
    ("HTTP 503", "HTTP 503"),
    ("HTTP 404", "HTTP 404"),
    ("HTTP 429 Retry-After", "HTTP 429"),
    (
        "HTTP 503 Retry-After 86400 s is over max_retry_after_s (3600 s): domain parked for 3600 s",
        "HTTP 503",
    ),
    ("blocked: HTTP 403", "blocked: HTTP 403"),
    ("refused: HTTP 403", "refused: HTTP 403"),
    ("blocked: HTTP 403 to a URL that succeeded before", "blocked: HTTP 403"),
    ("blocked: challenge page (HTTP 200, 'cf-chl' script)", "blocked: challenge page"),
    ("timeout connecting to http://a.test/x after 10.0s", "timeout"),
    ("timeout reading http://a.test/x: no data for 30.0s", "timeout"),
    ("timeout fetching http://a.test/x after 60.0s total", "timeout"),
    ("http://a.test/big: Content-Length 99999999 exceeds 10485760 bytes", "too large"),
    ("http://a.test/big: body exceeds 10485760 bytes", "too large"),
    ("http://a.test/z: gzip body decompresses to more than 10485760 bytes", "too large"),
    ("http://a.test/z: corrupt gzip body: invalid block type", "corrupt body"),
    (LEASE_EXPIRED, "lease expired"),
    ("robots.txt unavailable (503)", "robots unavailable"),
    (
        "robots.txt unavailable (timeout fetching http://a.test/robots.txt after 60.0s total)",
        "robots unavailable",
    ),
    ("parser 'shop': ValueError: no price on http://a.test/p/1", "parse error: ValueError"),
    (
        "parser 'default': ParseBudgetExceeded: nested deeper than 512",
        "parse error: ParseBudgetExceeded",
    ),
    ("http://a.test/x: malformed response: Invalid header", "malformed response"),
    ("redirect loop: http://a.test/a -> http://a.test/b -> http://a.test/a", "redirect loop"),
    ("http://a.test/a: more than 10 redirects", "too many redirects"),
    ("a.test resolves to ['10.0.0.1'], which is not allowed", "forbidden address"),
    (
        "http://a.test/x: ClientOSError: [Errno 104] Connection reset by peer",
        "connection reset",
    ),
    ("http://a.test/x: ServerDisconnectedError: Server disconnected", "ServerDisconnectedError"),
    ("redirect to http://b.test/ skipped: outside allowed domains", "redirect to"),
    ("", "unknown"),
    (
        "mismatch: shop: missing selector '.price'; field 'price' (3 of 3 items)",
        "mismatch: shop",
    ),
    (
        "mismatch: shop: paused by drift on a.test (crawlfleet resume-parser shop a.test)",
        "mismatch: shop",
    ),
]


@pytest.mark.parametrize(("error", "expected"), REAL_ERRORS)
def test_error_texts_of_the_crawler_fall_in_short_stable_classes(error: str, expected: str) -> None:
    assert error_class(error) == expected


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://127.0.0.1:{_closed_port()}/x", "connection refused"),
        ("http://no-such-host.invalid/x", "DNS"),
    ],
)
async def test_errors_of_a_real_fetch_are_classed(url: str, expected: str) -> None:
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True, connect_timeout_s=2))
    try:
        with pytest.raises(FetchError) as caught:
            await fetcher.fetch(CrawlRequest(url, "f", "d"))
    finally:
        await fetcher.close()
    assert error_class(str(caught.value)) == expected


POLICY = DomainPolicy(delay_s=0.0, max_in_flight=100_000)


async def _store_with_dead(errors: dict[str, list[str]]) -> MemoryQueueStore:
    """A store whose dead letters are ``path -> error history`` (the last error buries)."""
    store = MemoryQueueStore()
    requests = [CrawlRequest(f"http://a.test/{path}", path, "a.test") for path in errors]
    await store.add(requests, Budget())
    leases = {lease.request.fingerprint: lease for lease in await store.claim(
        len(requests), 0.0, 60.0, POLICY, ["http"]
    )}  # fmt: skip
    for path, history in errors.items():
        lease = leases[path]
        for error in history[:-1]:
            await store.retry(lease, 0.0, error, _report(lease.request), POLICY)
            (lease,) = await store.claim(1, 10.0, 60.0, POLICY, ["http"])
        await store.bury(lease, history[-1], 1.0, _report(lease.request), POLICY)
    return store


def _report(request: CrawlRequest) -> Report:
    attempt = Attempt(request.url, request.fingerprint, request.domain, "w", Outcome.DEAD,
                      None, 0, 0.0, request.attempt, 1.0)  # fmt: skip
    return Report(attempt)


async def test_the_last_error_decides_the_class_and_groups_are_counted() -> None:
    store = await _store_with_dead(
        {
            "a": ["HTTP 500", "HTTP 500"],
            "b": ["timeout reading http://a.test/b: no data for 30.0s", "HTTP 500"],
            "c": ["HTTP 500", "timeout fetching http://a.test/c after 60.0s total"],
            "d": ["HTTP 404"],
        }
    )
    groups = await by_class(store)
    assert [(g.name, g.count) for g in groups] == [("HTTP 500", 2), ("HTTP 404", 1), ("timeout", 1)]
    assert groups[0].sample_urls == ["http://a.test/a", "http://a.test/b"]


async def test_by_class_pages_through_many_dead_letters_up_to_its_limit() -> None:
    store = await _store_with_dead({f"p{n}": ["HTTP 502"] for n in range(1203)})
    assert [(g.name, g.count) for g in await by_class(store)] == [("HTTP 502", 1203)]
    assert [(g.name, g.count) for g in await by_class(store, limit=1001)] == [("HTTP 502", 1001)]
    assert len((await by_class(store))[0].sample_urls) == 3


async def test_requeue_and_purge_by_class_touch_only_that_class() -> None:
    errors = {f"t{n}": ["timeout reading http://a.test/: no data for 1s"] for n in range(700)}
    errors.update({"x": ["HTTP 500"], "y": ["HTTP 404"]})
    store = await _store_with_dead(errors)
    assert await requeue_class(store, "timeout") == 700
    assert (await store.counts()).queued == 700
    assert [g.name for g in await by_class(store)] == ["HTTP 404", "HTTP 500"]
    assert await purge_class(store, "HTTP 500") == 1
    assert await purge_class(store, "no such class") == 0
    assert [g.name for g in await by_class(store)] == ["HTTP 404"]

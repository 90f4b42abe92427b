"""A hook's ``Dropped`` and a ``LoginFailed`` end their page at once: no retry, no dead letter."""

from __future__ import annotations

from crawlfleet.errors import LoginFailed
from crawlfleet.events import RequestSkipped
from crawlfleet.fetchers.hooks import Dropped
from crawlfleet.records import Outcome
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, make_crawl, seed

A = "http://a.test"


async def test_a_request_a_hook_dropped_is_skipped_with_its_reason() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, {f"{A}/x": Canned(error=Dropped("no PDFs"))})
    crawl = make_crawl(fetcher, seeds=[A], max_retries=2)
    skipped = crawl.collect(RequestSkipped)
    await seed(crawl, f"{A}/x")

    await crawl.run()

    assert len(fetcher.fetches(f"{A}/x")) == 1
    assert await crawl.frontier.dead_letters() == []
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.dead, counts.queued) == (1, 0, 0)
    (attempt,) = await crawl.frontier.pending_attempts(10)
    assert (attempt.outcome, attempt.error) == (Outcome.SKIPPED, "no PDFs")
    assert [(s.url, s.reason) for s in skipped] == [(f"{A}/x", "no PDFs")]


async def test_a_failed_login_fails_the_page_once_with_its_reason() -> None:
    clock = FakeClock(T0)
    refused = Canned(error=LoginFailed("the site refused the credentials"))
    fetcher = CannedFetcher(clock, {f"{A}/members/": refused})
    crawl = make_crawl(fetcher, seeds=[A], max_retries=2)
    await seed(crawl, f"{A}/members/")

    await crawl.run()

    assert len(fetcher.fetches(f"{A}/members/")) == 1
    assert await crawl.frontier.dead_letters() == []
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.dead, counts.queued) == (1, 0, 0)
    (attempt,) = await crawl.frontier.pending_attempts(10)
    assert (attempt.outcome, attempt.error) == (Outcome.FAILED, "the site refused the credentials")

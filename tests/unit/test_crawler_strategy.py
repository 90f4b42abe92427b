"""The crawl step and the strategy ladder, over the memory store with a fake clock: blocks
move a domain to the ``impersonate`` rung and its http requests go to that fetcher."""

from __future__ import annotations

from crawlfleet.events import DomainEscalated, FetchAttempted
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import Canned, CannedFetcher, make_crawl, seed

A = "http://a.test"
PAGES = [f"{A}/{n}" for n in range(8)]
REFUSED = Canned(403, b"<html><title>Access denied</title></html>")


async def test_blocked_http_requests_are_fetched_impersonated_after_the_climb() -> None:
    clock = FakeClock(1000.0)
    http = CannedFetcher(clock, dict.fromkeys(PAGES, REFUSED))
    browser_like = CannedFetcher(clock, dict.fromkeys(PAGES, Canned()), kind="impersonate")
    crawl = make_crawl(
        {"http": http, "impersonate": browser_like},
        seeds=[A],
        obey_robots=False,
        ladder=["impersonate"],
        max_retries=5,
        block_window=4,
        block_min_samples=2,
        block_threshold=0.5,
        block_cooldown_s=1.0,
        block_recover_after=50,
    )
    escalated = crawl.collect(DomainEscalated)
    attempts = crawl.collect(FetchAttempted)
    await seed(crawl, *PAGES)

    result = await crawl.run(concurrency=1)

    assert result.reason == "empty"
    assert len(http.fetched) == 2  # two blocks climb the only rung
    assert sorted(browser_like.urls()) == sorted(PAGES)
    assert [(e.level, e.rung) for e in escalated] == [(1, "impersonate")]
    assert [a.attempt.fetcher for a in attempts] == ["http"] * 2 + ["impersonate"] * 8
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.dead) == (8, 0)

"""The crawl step over the in-memory store and the fake clock: politeness, blocks, outcomes."""

from __future__ import annotations

from itertools import pairwise

from crawlfleet.events import (
    DomainBlocked,
    DomainEscalated,
    DomainRecovered,
    FetchAttempted,
    ParseFailed,
)
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.store_types import DelaySource
from crawlfleet.models import FetchResult, Item, Link, ParseResult
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.records import Outcome
from crawlfleet.settings.domains import DomainOverride
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import (
    T0,
    Canned,
    CannedFetcher,
    html,
    make_crawl,
    seed,
)

A = "http://a.test"


def numbered(count: int, **canned: object) -> dict[str, Canned]:
    """``/1`` .. ``/count`` on host a.test, each a plain page."""
    return {f"{A}/{n}": Canned(**canned) for n in range(1, count + 1)}  # type: ignore[arg-type]


def urls(count: int) -> list[str]:
    return [f"{A}/{n}" for n in range(1, count + 1)]


async def test_gaps_respect_the_delay_from_claim_and_from_response_end() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, numbered(8, latency_s=3.0))
    crawl = make_crawl(fetcher, seeds=[A], delay_s=2.0, per_domain_concurrency=2)
    await seed(crawl, *urls(8))

    await crawl.run()

    fetches = sorted(fetcher.fetched, key=lambda f: f.started)
    assert len(fetches) == 8
    starts = [f.started for f in fetches]
    assert all(b - a >= 2.0 for a, b in pairwise(starts))
    for fetch in fetches:
        ended_before = [f.ended for f in fetches if f.ended <= fetch.started]
        assert all(fetch.started - end >= 2.0 for end in ended_before)


async def test_a_crawl_delay_read_by_one_process_holds_in_another_that_never_read_robots() -> None:
    clock = FakeClock(T0)
    store = MemoryQueueStore()
    robots = Canned(body=b"User-agent: *\nCrawl-delay: 5\n", headers={"content-type": "text/plain"})
    seeder_fetcher = CannedFetcher(clock, {f"{A}/robots.txt": robots})
    seeder = make_crawl(seeder_fetcher, seeds=[A], store=store, delay_s=1.0)
    await seed(seeder, *urls(6))
    assert seeder_fetcher.urls() == []  # it read robots.txt only

    # The worker reads no robots.txt, and sees a 403 (which once wrote its default delay back).
    pages = numbered(6) | {f"{A}/3": Canned(403, b"")}
    worker_fetcher = CannedFetcher(clock, pages)
    worker = make_crawl(
        worker_fetcher, seeds=[A], store=store, delay_s=1.0, obey_robots=False, max_retries=0
    )
    await worker.run()

    starts = [f.started for f in worker_fetcher.fetched]
    assert len(starts) == 6
    assert min(b - a for a, b in pairwise(starts)) >= 5.0
    view = await worker.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (5.0, DelaySource.ROBOTS)


async def test_an_override_beats_robots_and_the_default() -> None:
    clock = FakeClock(T0)
    robots = Canned(body=b"User-agent: *\nCrawl-delay: 5\n", headers={"content-type": "text/plain"})
    fetcher = CannedFetcher(clock, numbered(3) | {f"{A}/robots.txt": robots})
    crawl = make_crawl(
        fetcher, seeds=[A], delay_s=1.0, domains={"A.test": DomainOverride(delay_s=2.5)}
    )
    await seed(crawl, *urls(3))
    await crawl.run()

    starts = [f.started for f in fetcher.fetched]
    assert [round(b - a, 6) for a, b in pairwise(starts)] == [2.5, 2.5]
    view = await crawl.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (2.5, DelaySource.OVERRIDE)


async def test_one_403_does_not_stall_the_other_pages_of_its_domain() -> None:
    clock = FakeClock(T0)
    forbidden = f"{A}/status/403"
    fetcher = CannedFetcher(clock, {forbidden: Canned(403, b""), f"{A}/page/1": html()})
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0, max_retries=0)
    await seed(crawl, forbidden, f"{A}/page/1")

    await crawl.run()

    assert fetcher.urls() == [forbidden, f"{A}/page/1"]
    blocked, page = fetcher.fetched
    assert 1.0 <= page.started - blocked.ended < 1.5  # the delay, not a cooldown
    letters = await crawl.frontier.dead_letters()
    # decision 0044: a plain 403 fails its URL only ("blocked" and a block count before)
    assert [(d.request.url, d.errors) for d in letters] == [(forbidden, ("refused: HTTP 403",))]
    stats = await crawl.frontier.stats()
    assert (stats.get("blocks"), stats.get("outcome.dead"), stats.pages) == (0, 1, 1)


async def test_a_403_is_retried_on_its_own_while_its_domain_goes_on() -> None:
    clock = FakeClock(T0)
    forbidden = f"{A}/status/403"
    fetcher = CannedFetcher(clock, numbered(5) | {forbidden: [Canned(403, b""), html()]})
    crawl = make_crawl(
        fetcher, seeds=[A], delay_s=1.0, max_retries=1, backoff_base_s=100.0, backoff_max_s=100.0
    )
    await seed(crawl, forbidden, *urls(5))

    await crawl.run()

    first, again = fetcher.fetches(forbidden)
    others = [f for f in fetcher.fetched if f.url != forbidden]
    assert len(others) == 5
    # one delay each, no stall (the retry, after a backoff drawn in [0, 100] s, may take a slot)
    assert max(f.started for f in others) < first.ended + 7.0
    assert again.started > first.ended  # retried, after its own backoff
    assert (await crawl.frontier.counts()).done == 6


async def test_the_block_window_escalates_and_recovers_with_events() -> None:
    clock = FakeClock(T0)
    denied = Canned(403, b"<html><title>Access denied</title></html>")  # a ban page, not a refusal
    pages = numbered(8) | {f"{A}/b1": denied, f"{A}/b2": Canned(429, b"")}
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(
        fetcher,
        seeds=[A],
        delay_s=1.0,
        max_retries=0,
        block_window=4,
        block_min_samples=2,
        block_threshold=0.5,
        block_recover_after=3,
        block_cooldown_s=10.0,
    )
    escalated = crawl.collect(DomainEscalated)
    recovered = crawl.collect(DomainRecovered)
    await seed(crawl, f"{A}/b1", f"{A}/b2", *urls(8))

    await crawl.run()

    log = fetcher.fetched
    assert [f.url for f in log[:2]] == [f"{A}/b1", f"{A}/b2"]
    assert len(escalated) == 1
    up = escalated[0]
    assert (up.domain, up.level) == ("a.test", 1)
    assert up.reason == "2 of 2 recent responses blocked; last: HTTP 429"
    assert up.until == log[1].ended + 10.0
    assert log[2].started >= up.until  # the cooldown
    gaps = [round(b.started - a.ended, 6) for a, b in pairwise(log[2:])]
    # Level 1 doubles the delay until three clean responses in a row bring it back (the
    # third was claimed at level 1, so the gap after it is still doubled).
    assert gaps == [2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    assert [(r.domain, r.level, r.reason) for r in recovered] == [
        ("a.test", 0, "3 clean responses in a row")
    ]
    view = await crawl.frontier.domain("a.test")
    assert (view.level, view.block_reason) == (0, "HTTP 429")


async def test_retry_after_holds_the_domain_and_retries_the_request_after_it() -> None:
    clock = FakeClock(T0)
    busy = f"{A}/busy"
    pages = {
        busy: [Canned(503, b"", headers={"retry-after": "30"}), html()],
        f"{A}/other": html(),
    }
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0, max_retries=2)
    blocked = crawl.collect(DomainBlocked)
    await seed(crawl, busy, f"{A}/other")

    await crawl.run()

    first = fetcher.fetches(busy)[0]
    assert [(b.domain, b.until, b.reason) for b in blocked] == [
        ("a.test", first.ended + 30.0, "HTTP 503 Retry-After")
    ]
    later = [f for f in fetcher.fetched if f is not first]
    assert len(later) == 2
    assert all(f.started >= first.ended + 30.0 for f in later)
    view = await crawl.frontier.domain("a.test")
    assert view.retry_after_until == first.ended + 30.0
    assert (await crawl.frontier.counts()).done == 2


async def test_a_parser_error_is_recorded_counted_and_not_retried() -> None:
    clock = FakeClock(T0)

    def broken_parser(response: FetchResult) -> ParseResult:
        raise ValueError(f"no price on {response.url}")

    fetcher = CannedFetcher(clock, {f"{A}/p": html()})
    crawl = make_crawl(fetcher, seeds=[A], parsers=ParserRegistry(default=broken_parser))
    failed = crawl.collect(ParseFailed)
    await seed(crawl, f"{A}/p")

    await crawl.run()

    assert fetcher.urls() == [f"{A}/p"]
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.dead, counts.queued) == (1, 0, 0)
    stats = await crawl.frontier.stats()
    assert stats.get("outcome.parse_error") == 1
    assert stats.errors == 1
    (attempt,) = await crawl.frontier.pending_attempts(10)
    assert attempt.outcome is Outcome.PARSE_ERROR
    assert attempt.error == f"parser 'default': ValueError: no price on {A}/p"
    assert attempt.detail is not None
    assert "Traceback" in attempt.detail
    assert "broken_parser" in attempt.detail
    assert [(f.url, f.error) for f in failed] == [(f"{A}/p", f"ValueError: no price on {A}/p")]


async def test_items_are_counted_by_type_and_fate() -> None:
    clock = FakeClock(T0)

    def shop_parser(response: FetchResult) -> ParseResult:
        same = {"name": "shoe", "price": 10}
        return ParseResult(
            items=[
                Item("product", dict(same), url=response.url),
                Item("product", dict(same), url=response.url),
                Item("review", {"text": "fine"}, url=response.url),
            ]
        )

    fetcher = CannedFetcher(clock, {f"{A}/p": html()})
    crawl = make_crawl(fetcher, seeds=[A], parsers=ParserRegistry(default=shop_parser))
    await seed(crawl, f"{A}/p")

    await crawl.run()

    stats = await crawl.frontier.stats()
    assert stats.items("stored") == {"product": 1, "review": 1}
    assert stats.items("duplicate") == {"product": 1}
    assert (await crawl.frontier.domain("a.test")).stats.items("stored") == {
        "product": 1,
        "review": 1,
    }


async def test_links_are_queued_before_items_are_stored_and_the_lease_completed() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, {f"{A}/": html("/1", "/2"), **numbered(2)})
    crawl = make_crawl(fetcher, seeds=[A])
    attempts = crawl.collect(FetchAttempted)
    await seed(crawl, f"{A}/")

    await crawl.run()

    assert sorted(fetcher.urls()) == [f"{A}/", f"{A}/1", f"{A}/2"]
    assert [a.attempt.outcome for a in attempts] == [Outcome.OK] * 3
    assert len(await crawl.sink.stored("page")) == 3


async def test_a_fetch_error_is_retried_then_buried_with_its_history() -> None:
    from crawlfleet.errors import FetchError

    clock = FakeClock(T0)
    down = Canned(error=FetchError("connect refused"))
    fetcher = CannedFetcher(clock, {f"{A}/x": down})
    crawl = make_crawl(fetcher, seeds=[A], max_retries=2)
    await seed(crawl, f"{A}/x")

    await crawl.run()

    assert len(fetcher.fetches(f"{A}/x")) == 3
    (letter,) = await crawl.frontier.dead_letters()
    assert letter.errors == ("connect refused",) * 3
    outcomes = [a.outcome for a in await crawl.frontier.pending_attempts(10)]
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.DEAD]


async def test_a_browser_request_is_never_fetched_by_an_http_only_process() -> None:
    clock = FakeClock(T0)
    http = CannedFetcher(clock, {f"{A}/plain": html()})
    crawl = make_crawl(http, seeds=[A])
    await crawl.frontier.start(T0)
    await crawl.admitter.seed([Link(f"{A}/app", fetcher="browser"), f"{A}/plain"])

    result = await crawl.run(kinds=("http",))

    assert http.urls() == [f"{A}/plain"]
    assert result.reason == "stranded"
    assert (await crawl.frontier.counts()).queued == 1

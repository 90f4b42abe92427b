"""The one claim loop: how it fills slots, waits, and each way it ends."""

from __future__ import annotations

import asyncio

import pytest

from crawlfleet.clock import FakeClock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import CrawlRequest, FetchResult, Link, ParseResult
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.loop import ClaimLoop
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

A = "http://a.test"
B = "http://b.test"


def pages(host: str, count: int, **canned: object) -> dict[str, Canned]:
    return {f"{host}/{n}": Canned(**canned) for n in range(1, count + 1)}  # type: ignore[arg-type]


async def test_until_empty_runs_every_page_with_slots_across_domains() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 3, latency_s=1.0) | pages(B, 3, latency_s=1.0))
    crawl = make_crawl(fetcher, seeds=[A, B], delay_s=0.0)
    await seed(crawl, *pages(A, 3), *pages(B, 3))

    result = await crawl.run(concurrency=2, until_empty=True)

    assert (result.reason, result.claimed, result.processed, result.errors) == ("empty", 6, 6, 0)
    assert (await crawl.frontier.counts()).pending == 0


async def test_max_leases_stops_claiming_and_drains() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 5) | pages(B, 5))
    crawl = make_crawl(fetcher, seeds=[A, B])
    await seed(crawl, *pages(A, 5), *pages(B, 5))

    result = await crawl.run(concurrency=3, max_leases=4)

    assert (result.reason, result.claimed, result.processed) == ("max_leases", 4, 4)
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.leased, counts.queued) == (4, 0, 6)


async def test_idle_returns_after_idle_s_with_nothing_due() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 2))
    crawl = make_crawl(fetcher, seeds=[A], delay_s=30.0)
    await seed(crawl, *pages(A, 2))

    result = await crawl.run(idle_s=1.0)

    assert (result.reason, result.processed) == ("idle", 1)
    assert clock.now() - T0 == pytest.approx(1.0, abs=0.01)
    assert (await crawl.frontier.counts()).queued == 1


async def test_deadline_stops_claiming() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 10))
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0)
    await seed(crawl, *pages(A, 10))

    result = await crawl.run(deadline_s=3.5)

    assert result.reason == "deadline"
    assert result.processed == 4  # at 0, 1, 2 and 3 s
    assert clock.now() - T0 == pytest.approx(3.5)


async def test_a_set_stop_event_ends_the_loop_after_the_steps_in_flight() -> None:
    clock = FakeClock(T0)
    release = asyncio.Event()
    fetcher = CannedFetcher(clock, pages(A, 2) | pages(B, 2))
    stop = asyncio.Event()

    async def held(request: CrawlRequest) -> FetchResult:
        stop.set()
        await release.wait()
        return await fetcher.fetch_url(request.url)

    fetcher.fetch = held  # type: ignore[method-assign]
    crawl = make_crawl(fetcher, seeds=[A, B])
    await seed(crawl, *pages(A, 2), *pages(B, 2))
    loop = ClaimLoop(crawl.crawler, kinds=frozenset({"http"}), concurrency=2, clock=clock)

    running = asyncio.create_task(loop.run(stop=stop, until_empty=True))
    await asyncio.sleep(0.05)
    assert not running.done()  # draining the two steps in flight
    release.set()
    result = await running

    assert (result.reason, result.claimed, result.processed) == ("stopped", 2, 2)
    assert (await crawl.frontier.counts()).queued == 2


async def test_a_step_that_raises_is_counted_and_its_lease_left_to_expire() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 1) | pages(B, 1))

    async def broken(request: CrawlRequest) -> FetchResult:
        if request.domain == "a.test":
            raise StateError("disk full")
        return await fetcher.fetch_url(request.url)

    fetcher.fetch = broken  # type: ignore[method-assign]
    crawl = make_crawl(fetcher, seeds=[A, B])
    await seed(crawl, f"{A}/1", f"{B}/1")

    result = await crawl.run(idle_s=0.5)

    assert (result.claimed, result.processed, result.errors) == (2, 1, 1)
    assert (await crawl.frontier.counts()).leased == 1


async def test_stop_on_error_reraises_after_the_others_finished() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 1) | pages(B, 1, latency_s=2.0))

    async def broken(request: CrawlRequest) -> FetchResult:
        if request.domain == "a.test":
            raise RuntimeError("bug")
        return await fetcher.fetch_url(request.url)

    fetcher.fetch = broken  # type: ignore[method-assign]
    crawl = make_crawl(fetcher, seeds=[A, B])
    await seed(crawl, f"{A}/1", f"{B}/1")

    with pytest.raises(RuntimeError, match="bug"):
        await crawl.run(until_empty=True, stop_on_error=True)
    assert fetcher.urls() == [f"{B}/1"]


async def test_on_tick_is_called_while_running() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 4))
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0)
    await seed(crawl, *pages(A, 4))
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(clock.now())

    await crawl.run(until_empty=True, on_tick=tick)

    assert len(ticks) >= 6  # every TICK_S over 3 s
    assert ticks[0] == T0


async def test_a_loop_serves_only_its_kinds_and_refuses_kinds_it_cannot_fetch() -> None:
    clock = FakeClock(T0)
    http = CannedFetcher(clock, {f"{A}/plain": html()})
    browser = CannedFetcher(clock, {f"{A}/app": html()}, kind="browser")
    crawl = make_crawl({"http": http, "browser": browser}, seeds=[A])
    await crawl.frontier.start(T0)
    await crawl.admitter.seed([Link(f"{A}/app", fetcher="browser"), f"{A}/plain"])

    result = await crawl.run(kinds=("http",), idle_s=0.5)

    assert (result.processed, http.urls(), browser.urls()) == (1, [f"{A}/plain"], [])
    await crawl.run(kinds=("browser",), idle_s=0.5)
    assert browser.urls() == [f"{A}/app"]

    http_only = make_crawl(http, seeds=[A])
    with pytest.raises(ConfigError, match="no fetcher for kind 'browser'"):
        ClaimLoop(http_only.crawler, kinds=frozenset({"browser"}), concurrency=1, clock=clock)


async def test_a_request_of_a_kind_without_fetcher_is_a_bug_not_an_http_fetch() -> None:
    clock = FakeClock(T0)
    http = CannedFetcher(clock, {})

    def browser_links(response: FetchResult) -> ParseResult:
        return ParseResult(links=[Link(f"{A}/app", fetcher="browser")])

    crawl = make_crawl(http, seeds=[A], parsers=ParserRegistry(default=browser_links))
    await crawl.frontier.start(T0)
    await crawl.admitter.seed([Link(f"{A}/app", fetcher="browser")])
    (lease,) = await crawl.frontier.claim(1, T0, {"browser"})

    with pytest.raises(ConfigError, match="no 'browser' fetcher in this process"):
        await crawl.crawler.process(lease)
    assert http.urls() == []


async def test_while_held_nothing_is_claimed_and_the_step_in_flight_finishes() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 3, latency_s=1.0))
    crawl = make_crawl(fetcher, seeds=[A], delay_s=0.0)
    await seed(crawl, *pages(A, 3))
    resume_at = T0 + 10.0

    async def paused() -> bool:  # from the first page fetched until resume_at
        return bool(fetcher.fetched) and clock.now() < resume_at

    result = await crawl.run(concurrency=1, until_empty=True, hold=paused)

    assert (result.reason, result.processed) == ("empty", 3)
    starts = [fetch.started for fetch in fetcher.fetched]
    assert starts[0] == T0
    assert all(start >= resume_at for start in starts[1:])
    assert starts[1] < resume_at + 1.0  # claimed on the first tick after the hold ends

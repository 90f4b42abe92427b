"""The one claim loop: how it fills slots, waits, and each way it ends."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import CrawlRequest, FetchResult, Link, ParseResult
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.loop.claim import ClaimLoop
from crawlfleet.runtime.step.crawler import Crawler
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, Crawl, html, make_crawl, seed

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


# --- leases of long steps: renewal and the watchdog (real time, a few tenths of a second) --


class Reaper:
    """Reaps expired leases every few milliseconds, as the distributed dispatcher does."""

    def __init__(self, crawl: Crawl) -> None:
        self._frontier = crawl.frontier
        self.reaped = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.reaped += await self._frontier.reap(time.time())
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def real_time_loop(crawl: Crawl, *, concurrency: int = 2, max_step_s: float = 60.0) -> ClaimLoop:
    """A loop over ``crawl`` on the system clock, its steps bounded by ``max_step_s``."""
    parts = replace(crawl.crawler.parts, clock=SystemClock(), max_step_s=max_step_s)
    return ClaimLoop(
        Crawler(parts), kinds=frozenset({"http"}), concurrency=concurrency, clock=SystemClock()
    )


def slow_fetches(fetcher: CannedFetcher, slow_url: str, release: asyncio.Event) -> None:
    """``slow_url`` answers only once ``release`` is set; the other pages at once."""

    async def fetch(request: CrawlRequest) -> FetchResult:
        if request.url == slow_url:
            await release.wait()
        return await fetcher.fetch_url(request.url)

    fetcher.fetch = fetch  # type: ignore[method-assign]


async def one_slow_page() -> tuple[Crawl, ClaimLoop, asyncio.Event]:
    """A real-time loop over a crawl of one page, which answers once the event is set."""
    fetcher = CannedFetcher(FakeClock(T0), pages(A, 1))
    release = asyncio.Event()
    slow_fetches(fetcher, f"{A}/1", release)
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False)
    await seed(crawl, f"{A}/1")
    return crawl, real_time_loop(crawl), release


async def test_on_tick_is_called_while_the_loop_drains() -> None:
    # A worker's heartbeat is written on the tick: a batch that waits for a slow page after
    # it stopped claiming must not look dead to `worker --health` or the dispatcher.
    _, loop, release = await one_slow_page()
    ticks: list[tuple[float, int]] = []

    async def tick() -> None:
        ticks.append((time.monotonic(), loop.in_flight))

    running = asyncio.create_task(loop.run(stop=asyncio.Event(), max_leases=1, on_tick=tick))
    await asyncio.sleep(1.8)  # the loop claimed its one lease and drains
    release.set()
    result = await running

    assert (result.reason, result.processed) == ("max_leases", 1)
    assert len([n for _, n in ticks if n == 1]) >= 2  # ticks with the slow page in flight


async def test_a_tick_that_raises_while_draining_leaves_the_steps_to_finish(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawl, loop, release = await one_slow_page()

    async def tick() -> None:
        if loop.in_flight:
            raise RuntimeError("progress callback broke")

    running = asyncio.create_task(loop.run(stop=asyncio.Event(), max_leases=1, on_tick=tick))
    await asyncio.sleep(1.3)
    release.set()
    with pytest.raises(RuntimeError, match="progress callback broke"):  # raised while claiming
        await running

    assert (await crawl.frontier.counts()).done == 1  # the drain waited for the page anyway
    assert "on_tick raised while the steps in flight finish" in caplog.text


@pytest.mark.parametrize("how", ["claiming", "draining"])
async def test_a_step_longer_than_its_lease_keeps_it_and_is_fetched_once(how: str) -> None:
    fetcher = CannedFetcher(FakeClock(T0), pages(A, 1) | pages(B, 1))
    release = asyncio.Event()
    slow_fetches(fetcher, f"{A}/1", release)
    crawl = make_crawl(fetcher, seeds=[A, B], obey_robots=False, lease_s=0.15)
    await seed(crawl, f"{A}/1", f"{B}/1")
    reaper = Reaper(crawl)
    loop = real_time_loop(crawl)
    run = {"until_empty": True} if how == "claiming" else {"max_leases": 2}
    running = asyncio.create_task(loop.run(stop=asyncio.Event(), **run))  # type: ignore[arg-type]

    await asyncio.sleep(0.5)  # over three lease lengths
    release.set()
    result = await running
    await reaper.stop()

    assert reaper.reaped == 0
    assert fetcher.urls().count(f"{A}/1") == 1
    assert (result.processed, result.errors) == (2, 0)
    assert (await crawl.frontier.counts()).done == 2


async def test_the_watchdog_cancels_a_stuck_step_and_fails_its_lease() -> None:
    fetcher = CannedFetcher(FakeClock(T0), pages(A, 1) | pages(B, 1))
    slow_fetches(fetcher, f"{A}/1", asyncio.Event())  # never answers
    crawl = make_crawl(fetcher, seeds=[A, B], obey_robots=False, max_retries=1, lease_s=0.15)
    await seed(crawl, f"{A}/1", f"{B}/1")
    reaper = Reaper(crawl)
    loop = real_time_loop(crawl, max_step_s=0.2)

    started = time.monotonic()
    result = await loop.run(stop=asyncio.Event(), until_empty=True)
    elapsed_s = time.monotonic() - started
    await reaper.stop()

    assert (result.claimed, result.processed, result.errors) == (3, 3, 0)
    assert 0.4 <= elapsed_s < 0.9  # two attempts of 0.2 s each, then dead
    assert reaper.reaped == 0  # renewed until the watchdog ended it, never left to expire
    (letter,) = await crawl.frontier.dead_letters()
    assert letter.request.url == f"{A}/1"
    assert letter.errors == ("step exceeded max_step_s (0.2 s)",) * 2
    assert (await crawl.frontier.counts()).done == 1


async def test_a_timeout_inside_a_step_is_no_watchdog_stop() -> None:
    fetcher = CannedFetcher(FakeClock(T0), pages(A, 1))

    async def timing_out(request: CrawlRequest) -> FetchResult:
        raise TimeoutError("a bug: a timeout nobody caught")

    fetcher.fetch = timing_out  # type: ignore[method-assign]
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False)
    await seed(crawl, f"{A}/1")

    result = await real_time_loop(crawl).run(stop=asyncio.Event(), idle_s=0.05)

    assert (result.processed, result.errors) == (0, 1)
    assert (await crawl.frontier.counts()).leased == 1  # left to expire, as any raising step


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


async def test_in_flight_and_processed_are_read_on_each_tick_as_a_heartbeat_would() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, pages(A, 3, latency_s=1.0) | pages(B, 3, latency_s=2.5))
    canned = fetcher.fetch
    b_may_end = asyncio.Event()  # B's pages wait until all of A's are processed

    async def held(request: CrawlRequest) -> FetchResult:
        if request.domain == "b.test":
            await b_may_end.wait()
        return await canned(request)

    fetcher.fetch = held  # type: ignore[method-assign]
    crawl = make_crawl(fetcher, seeds=[A, B], delay_s=0.0)
    await seed(crawl, *pages(A, 3), *pages(B, 3))
    loop = ClaimLoop(crawl.crawler, kinds=frozenset({"http"}), concurrency=2, clock=clock)
    seen: list[tuple[int, int]] = []

    async def tick() -> None:
        seen.append((loop.in_flight, loop.processed))
        if loop.processed >= 3:
            b_may_end.set()

    result = await loop.run(stop=asyncio.Event(), until_empty=True, on_tick=tick)

    assert result.processed == 6
    assert (loop.in_flight, loop.processed) == (0, 6)
    assert seen[0] == (0, 0)
    assert 1 in {n for n, _ in seen}  # B's slow page still runs when A's ends
    assert [p for _, p in seen] == sorted(p for _, p in seen)
    assert seen[-1][1] > 0

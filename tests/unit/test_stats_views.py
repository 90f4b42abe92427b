"""Views over the store's statistics (rate, ETA, result, summary) and the attempt copier,
over the in-memory store with fake times."""

from __future__ import annotations

import orjson
import pytest
from rich.console import Console

from crawlfleet.cli.progress import CrawlProgress, progress_line, summary
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.store_types import Budget, DelaySource, Report
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.monitoring.attempt_copier import AttemptCopier
from crawlfleet.monitoring.attempt_log import MemoryAttemptLog
from crawlfleet.monitoring.stats import StatsView
from crawlfleet.monitoring.summary import CrawlResult
from crawlfleet.records import Attempt, Outcome
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings

T0 = 1_000_000.0


def req(name: str, domain: str = "a.test") -> CrawlRequest:
    return CrawlRequest(f"https://{domain}/{name}", f"fp-{domain}-{name}", domain)


def attempt_of(lease: Lease, outcome: Outcome, at: float, **kw: object) -> Attempt:
    r = lease.request
    fields: dict[str, object] = {
        "url": r.url,
        "fingerprint": r.fingerprint,
        "domain": r.domain,
        "worker": "w:1",
        "outcome": outcome,
        "status": 200,
        "bytes": 1000,
        "latency_s": 0.1,
        "retry": r.attempt,
        "at": at,
    } | kw
    return Attempt(**fields)  # type: ignore[arg-type]


SETTINGS = Settings(delay_s=0.0, per_domain_concurrency=100)
"""The crawl of these tests: no delay, 100 requests of a domain in flight."""


def frontier_of(store: MemoryQueueStore) -> Frontier:
    """The frontier (what ``StatsView`` reads) over ``store``."""
    return build_frontier(SETTINGS, store, [])


async def crawl_store(pages: int, domains: tuple[str, ...] = ("a.test",)) -> MemoryQueueStore:
    store = MemoryQueueStore(policy=domain_policy(SETTINGS))
    await store.start(T0)
    await store.add([req(str(i), d) for d in domains for i in range(pages)], Budget())
    return store


async def finish(store: MemoryQueueStore, n: int, at: float, outcome: Outcome = Outcome.OK) -> None:
    for lease in await store.claim(n, at, 60.0, ("http",)):
        report = Report(attempt_of(lease, outcome, at, error=f"{outcome.value}: boom"))
        assert await store.complete(lease, report)


async def test_rate_is_finished_requests_per_second_and_eta_is_pending_over_it() -> None:
    store = await crawl_store(20)
    view = StatsView(frontier_of(store), window_s=10.0)
    first = await view.sample(T0)
    assert (first.rate, first.eta_s, first.counts.pending) == (0.0, None, 20)
    await finish(store, 4, T0 + 1)
    second = await view.sample(T0 + 2)
    assert second.rate == pytest.approx(2.0)
    assert second.eta_s == pytest.approx(8.0)  # 16 pending at 2/s
    assert second.stats.pages == 4
    assert progress_line(second) == "4/20 done · queue 16 · 2.0 pages/s · 0 errors · ETA 00:08"


async def test_rate_forgets_samples_older_than_the_window() -> None:
    store = await crawl_store(100)
    view = StatsView(frontier_of(store), window_s=10.0)
    await view.sample(T0)
    await finish(store, 50, T0 + 1)  # a burst long ago
    await view.sample(T0 + 2)
    for t in range(3, 30):
        await view.sample(T0 + t)  # then nothing
    later = await view.sample(T0 + 30)
    assert later.rate == 0.0
    assert later.eta_s is None


async def test_a_resumed_crawl_does_not_count_earlier_runs_in_its_rate() -> None:
    store = await crawl_store(10)
    await finish(store, 8, T0)
    view = StatsView(frontier_of(store))
    await view.sample(T0 + 100)
    assert (await view.sample(T0 + 101)).rate == 0.0


async def test_attempt_copier_moves_pending_attempts_once_even_when_repeated() -> None:
    store = await crawl_store(7)
    await finish(store, 7, T0 + 1)
    log = MemoryAttemptLog()
    # A copier killed after recording but before acknowledging: the rows come again.
    await log.record(await store.pending_attempts(3))
    assert await AttemptCopier(store, log, batch=2).copy() == 7
    assert await store.pending_attempts(10) == []
    recent = await log.recent()
    assert len(recent) == 7
    assert len({a.fingerprint for a in recent}) == 7


async def test_result_and_summary_come_from_the_store_counters() -> None:
    store = await crawl_store(3, ("a.test", "b.test"))
    await finish(store, 4, T0 + 1)
    await finish(store, 2, T0 + 2, Outcome.PARSE_ERROR)
    log = MemoryAttemptLog()
    await AttemptCopier(store, log).copy()
    views = await store.domains()
    result = CrawlResult(
        crawl_id="c",
        reason="complete",
        counts=await store.counts(),
        stats=await store.stats(),
        domains={v.domain: v.stats for v in views},
        top_parse_errors=tuple(await log.top_errors(Outcome.PARSE_ERROR)),
        elapsed_s=2.0,
    )
    assert result.parse_errors == 2
    assert result.top_parse_errors == (("parse_error: boom", 2),)
    assert result.exit_code() == 3
    assert result.exit_code(max_parse_errors=2) == 0
    assert CrawlResult("c", "interrupted", result.counts, result.stats).exit_code(5) == 130
    data = orjson.loads(orjson.dumps(result.to_dict()))
    assert data["totals"]["fetched"] == 6
    assert sum(d["fetched"] for d in data["domains"].values()) == 6
    console = Console(width=200, record=True)
    console.print(summary(result))
    text = console.export_text()
    assert "fetched 6 responses (4 pages ok)" in text
    assert "2x parse_error: boom" in text
    assert {"a.test", "b.test"} <= set(text.split())


async def test_progress_without_a_terminal_is_a_line_every_interval() -> None:
    store = await crawl_store(10)
    view = StatsView(frontier_of(store))
    console = Console(width=200, record=True)
    with CrawlProgress(console, tty=False, log_every_s=5.0) as progress:
        progress.update(await view.sample(T0))
        await finish(store, 5, T0 + 1)
        progress.update(await view.sample(T0 + 2))
        progress.update(await view.sample(T0 + 5))
    lines = console.export_text().splitlines()
    assert lines == [
        "progress: 0/10 done · queue 10 · 0.0 pages/s · 0 errors · ETA --:--",
        "progress: 5/10 done · queue 5 · 1.0 pages/s · 0 errors · ETA 00:05",
    ]


async def test_the_eta_reads_the_domains_again_once_admissions_grew() -> None:
    store = await crawl_store(1, ("fast.test",))
    view = StatsView(frontier_of(store), refresh_s=60.0)
    await view.sample(T0)
    await store.set_delay("slow.test", 2.0, DelaySource.ROBOTS)
    await store.add([req(str(i), "slow.test") for i in range(50)], Budget())
    later = await view.sample(T0 + 1)  # well within refresh_s: read again for the new work
    assert "slow.test" in {load.domain for load in later.loads}
    assert later.eta.politeness_s == pytest.approx(49 * 2.0)

"""A crawl step over the in-memory store and the fake clock, with canned responses.

``CannedFetcher`` stands in for the HTTP fetcher (the step's unit tests; the e2e tests use
the real demo site): it answers each URL from a table, takes ``latency_s`` of fake time, and
logs when each fetch started and ended on the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from crawlfleet.errors import FetchError
from crawlfleet.events import EventBus
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.robots import FetchFn, RobotsCache
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.monitoring.samples import MismatchSamples
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.pipeline.processors import default_processors
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.choice.strategy import Strategies
from crawlfleet.runtime.loop.claim import ClaimLoop, LoopResult
from crawlfleet.runtime.options import parse_limits
from crawlfleet.runtime.policies import recrawl_policy
from crawlfleet.runtime.step.crawler import Crawler, CrawlerParts
from crawlfleet.runtime.step.drift import DriftWatch
from crawlfleet.runtime.step.freshness import Freshness
from crawlfleet.runtime.wiring import build_frontier, drift_options, sitemap_limits
from crawlfleet.settings import Settings
from tests.fixtures.clock import FakeClock

T0 = 1_000_000.0
HTML = {"content-type": "text/html; charset=utf-8"}
E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class Canned:
    """One canned answer: a response, or a ``FetchError`` when ``error`` is set."""

    status: int = 200
    body: bytes = b"<html><title>ok</title></html>"
    headers: Mapping[str, str] = field(default_factory=lambda: dict(HTML))
    latency_s: float = 0.0
    error: FetchError | None = None


def html(*links: str, title: str = "page") -> Canned:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return Canned(body=f"<html><title>{title}</title><body>{anchors}</body></html>".encode())


NOT_FOUND = Canned(404, b"<html><title>not found</title></html>")


@dataclass(frozen=True, slots=True)
class Fetch:
    url: str
    started: float
    ended: float


class CannedFetcher:
    """Answers from ``pages`` (404 for the rest); logs each fetch with its fake times.

    A list of answers is served in turn, its last one ever after.
    """

    def __init__(
        self, clock: FakeClock, pages: Mapping[str, Canned | list[Canned]], kind: str = "http"
    ) -> None:
        self.clock = clock
        self.pages = {url: a if isinstance(a, list) else [a] for url, a in pages.items()}
        self.kind = kind
        self.log: list[Fetch] = []

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        return await self.fetch_url(request.url)

    async def fetch_url(self, url: str) -> FetchResult:
        answers = self.pages.get(url, [NOT_FOUND])
        canned = answers.pop(0) if len(answers) > 1 else answers[0]
        started = self.clock.now()
        if canned.latency_s:
            await self.clock.sleep(canned.latency_s)
        self.log.append(Fetch(url, started, self.clock.now()))
        if canned.error is not None:
            raise canned.error
        return FetchResult(
            url=url,
            final_url=url,
            status=canned.status,
            headers=dict(canned.headers),
            body=canned.body,
            elapsed_s=canned.latency_s,
            fetcher=self.kind,
            fetched_at=self.clock.now(),
        )

    @property
    def fetched(self) -> list[Fetch]:
        """The fetches of pages (robots.txt left out), in the order they ended."""
        return [f for f in self.log if not f.url.endswith("/robots.txt")]

    def urls(self) -> list[str]:
        return [f.url for f in self.fetched]

    def fetches(self, url: str) -> list[Fetch]:
        return [f for f in self.log if f.url == url]

    async def close(self) -> None:
        """Nothing to release."""


@dataclass
class Crawl:
    """One process's view of a crawl: its crawler, frontier, events and sink."""

    crawler: Crawler
    frontier: Frontier
    admitter: Admitter
    events: EventBus
    sink: MemorySink
    clock: FakeClock

    def collect(self, event_type: type[E]) -> list[E]:
        seen: list[E] = []
        self.events.subscribe(event_type, seen.append)
        return seen

    async def run(
        self, kinds: Iterable[str] = ("http",), concurrency: int = 4, **run: Any
    ) -> LoopResult:
        loop = ClaimLoop(
            self.crawler, kinds=frozenset(kinds), concurrency=concurrency, clock=self.clock
        )
        if not run:
            run = {"until_empty": True}
        return await loop.run(stop=asyncio.Event(), **run)


def make_crawl(
    fetchers: Mapping[str, CannedFetcher] | CannedFetcher,
    *,
    seeds: list[str],
    store: QueueStore | None = None,
    obey_robots: bool = True,
    parsers: ParserRegistry | None = None,
    robots_fetch: FetchFn | None = None,
    samples_dir: Path | None = None,
    **settings: Any,
) -> Crawl:
    """A crawler over ``store`` (a new memory store by default) with ``settings`` on top of
    fast test defaults (no backoff, delay 0). robots.txt is read with ``robots_fetch``
    (default: the canned fetcher); mismatched pages are kept in ``samples_dir`` if given."""
    by_kind = fetchers if isinstance(fetchers, Mapping) else {fetchers.kind: fetchers}
    any_fetcher = next(iter(by_kind.values()))
    clock = any_fetcher.clock
    config = Settings(
        seeds=seeds,
        obey_robots=obey_robots,
        **{"delay_s": 0.0, "backoff_base_s": 0.0, **settings},
    )
    frontier = build_frontier(config, store or MemoryQueueStore(), seeds)
    parse_budget = ParseBudget(parse_limits(config), threads=1)
    events = EventBus()
    side_fetch = robots_fetch or any_fetcher.fetch_url
    robots = (
        RobotsCache(
            side_fetch,
            user_agent=config.user_agent,
            clock=clock,
            ttl_s=config.robots_ttl_s,
            error_ttl_s=config.robots_error_ttl_s,
            robots_token=config.robots_token,
            on_read=frontier.robots_delay,
        )
        if obey_robots
        else None
    )
    admitter = Admitter(
        frontier,
        robots=robots,
        events=events,
        fetch_url=side_fetch,
        clock=clock,
        sitemap_limits=sitemap_limits(config),
    )
    sink = MemorySink(clock=clock)
    pipeline = Pipeline(default_processors(), sink, events=events, clock=clock, tracker=sink)
    strategies = Strategies(frontier, clock)
    parts = CrawlerParts(
        frontier=frontier,
        admitter=admitter,
        fetchers=dict(by_kind),
        robots=robots,
        parsers=parsers if parsers is not None else ParserRegistry(),
        pipeline=pipeline,
        events=events,
        clock=clock,
        worker="test",
        max_retry_after_s=3600.0,
        max_step_s=config.max_step_s,
        parse_budget=parse_budget,
        strategies=strategies,
        freshness=Freshness(frontier, recrawl_policy(config), clock),
        drift=DriftWatch(frontier, strategies, drift_options(config)),
        samples=MismatchSamples(samples_dir) if samples_dir is not None else None,
    )
    return Crawl(Crawler(parts), frontier, admitter, events, sink, clock)


async def seed(crawl: Crawl, *urls: str) -> None:
    """Start the crawl and offer ``urls`` (what a runner does before its loop)."""
    await crawl.frontier.start(crawl.clock.now())
    await crawl.admitter.seed(urls)

"""The one place that picks implementations and builds the object graph of a crawl."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial

from crawlfleet.clock import Clock
from crawlfleet.errors import StateError
from crawlfleet.fetchers.cache import TruncatingFetcher
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.files import FileFetcher
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.frontier import Frontier, RetryPolicy
from crawlfleet.frontier.protocols import BlockRules, Budget, DomainPolicy, QueueStore
from crawlfleet.frontier.robots import ROBOTS_MAX_BYTES, FetchFn, RobotsCache
from crawlfleet.frontier.scope import Scope, TrapLimits
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.monitoring.events import EventBus
from crawlfleet.parsing.budget import ParseBudget, ParseLimits
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.pipeline.custom import FanOutSink, load_processors, load_sinks
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.pipeline.processors import default_processors
from crawlfleet.pipeline.protocols import PageTracker
from crawlfleet.recrawl import RecrawlPolicy, RecrawlRule
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.backends import Backends, open_store
from crawlfleet.runtime.crawler import Crawler, CrawlerParts
from crawlfleet.runtime.fetch_chain import cached, hooked, login_link
from crawlfleet.runtime.freshness import Freshness
from crawlfleet.secretsfile import SiteSecrets
from crawlfleet.settings import Settings
from crawlfleet.urls import UrlRules, fingerprint


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def domain_policy(settings: Settings) -> DomainPolicy:
    """The crawl's default politeness and block rules, from the settings."""
    return DomainPolicy(
        delay_s=settings.delay_s,
        max_in_flight=settings.per_domain_concurrency,
        blocks=BlockRules(
            window=settings.block_window,
            min_samples=settings.block_min_samples,
            threshold=settings.block_threshold,
            recover_after=settings.block_recover_after,
            max_level=settings.block_max_level,
            cooldown_s=settings.block_cooldown_s,
        ),
    )


def recrawl_policy(settings: Settings) -> RecrawlPolicy:
    """The crawl's recrawl rules; its own ``recrawl_after`` is the rule of every other page."""
    default = None
    if settings.recrawl_after is not None:
        default = RecrawlRule(
            pattern="",
            after=settings.recrawl_after,
            adaptive=settings.recrawl_adaptive,
            min=settings.recrawl_min,
            max=settings.recrawl_max,
        )
    return RecrawlPolicy(settings.recrawl, default)


def build_frontier(settings: Settings, store: QueueStore, seeds: list[str]) -> Frontier:
    """The crawl's frontier over ``store``; it owns the store from here on."""
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    scope = Scope.for_seeds(
        seeds,
        allowed_domains=settings.allowed_domains,
        allow=settings.allow,
        deny=settings.deny,
        max_depth=settings.max_depth,
        traps=TrapLimits.from_settings(settings),
    )
    return Frontier(
        store,
        rules=rules,
        scope=scope,
        budget=Budget(settings.max_pages, settings.max_pages_per_domain),
        default_policy=domain_policy(settings),
        retry=RetryPolicy(settings.max_retries, settings.backoff_base_s, settings.backoff_max_s),
        lease_s=settings.lease_s,
        max_redirects=settings.max_redirects,
        overrides=settings.domains,
        rng=random.Random(),
    )


def build_fetchers(
    settings: Settings,
    clock: Clock,
    credentials: Credentials,
    logged_in: Callable[[Fetcher], Fetcher] = lambda fetcher: fetcher,
) -> dict[str, Fetcher]:
    """The crawl's fetchers by kind; redirects become queued links (``Crawler``).

    The HTTP chain, top to bottom: hooks, cache, ``logged_in`` (``runtime.fetch_chain``).
    """
    http = HttpFetcher(settings, clock=clock, follow_redirects=False, credentials=credentials)
    return {
        "http": hooked(cached(logged_in(http), settings, clock), settings),
        "file": FileFetcher(settings, clock=clock),
    }


def robots_fetch(
    fetcher: TruncatingFetcher, *, truncate_at_bytes: int | None = None
) -> Callable[[str], Awaitable[FetchResult]]:
    """A URL -> FetchResult function (redirects followed), for robots.txt and sitemaps.

    ``truncate_at_bytes`` keeps the first bytes of a larger body instead of failing (robots.txt:
    RFC 9309 §2.5 asks a crawler to parse at least 500 KiB and may ignore the rest).
    """

    async def fetch(url: str) -> FetchResult:
        request = CrawlRequest(url=url, fingerprint=fingerprint(url), domain="", fetcher="http")
        return await fetcher.fetch(request, truncate_at_bytes=truncate_at_bytes)

    return fetch


def build_robots(
    settings: Settings, clock: Clock, stack: AsyncExitStack, credentials: Credentials
) -> tuple[RobotsCache | None, FetchFn]:
    """The robots.txt cache (None when robots are not obeyed) and the side fetch it and the
    sitemap reader use (redirects followed)."""
    side_fetcher = cached(
        HttpFetcher(settings, clock=clock, credentials=credentials), settings, clock
    )
    stack.push_async_callback(side_fetcher.close)
    fetch_url = robots_fetch(side_fetcher)
    if not settings.obey_robots:
        return None, fetch_url
    robots = RobotsCache(
        robots_fetch(side_fetcher, truncate_at_bytes=ROBOTS_MAX_BYTES),
        user_agent=settings.user_agent,
        clock=clock,
        ttl_s=settings.robots_ttl_s,
        error_ttl_s=settings.robots_error_ttl_s,
    )
    return robots, fetch_url


def build_admitter(
    settings: Settings,
    frontier: Frontier,
    *,
    events: EventBus,
    clock: Clock,
    stack: AsyncExitStack,
) -> Admitter:
    """What seeds a crawl without fetchers, parsers or sinks (the dispatcher)."""
    robots, fetch_url = build_robots(settings, clock, stack, Credentials())
    return Admitter(frontier, robots=robots, events=events, fetch_url=fetch_url, clock=clock)


@dataclass(slots=True)
class CrawlGraph:
    """Everything one crawl process needs; ``stack`` closes it all."""

    crawler: Crawler
    frontier: Frontier
    stack: AsyncExitStack


async def build_crawl(
    settings: Settings,
    *,
    seeds: list[str],
    backends: Backends,
    events: EventBus,
    clock: Clock,
    stack: AsyncExitStack,
) -> CrawlGraph:
    """Wire a crawl over the given backends (embedded or distributed alike)."""
    if backends.sink is None:
        raise StateError("a crawl step needs an item sink; these backends opened none")
    store, sink, rejects = backends.store, backends.sink, backends.rejects
    registry = load_parsers(
        settings.parsers,
        settings.selector_parsers,
        default=partial(default_parser, max_links=settings.max_links_per_page),
    )
    budget = ParseBudget(ParseLimits.from_settings(settings))
    stack.callback(budget.close)
    credentials = Credentials.from_urls(seeds)  # userinfo of the seeds, per origin
    secrets = SiteSecrets.load(settings.secrets_file)
    secrets.add_basic_auth(credentials, seeds)
    logged_in = await login_link(settings, clock, stack, secrets)
    fetchers = build_fetchers(settings, clock, credentials, logged_in)
    for fetcher in fetchers.values():
        stack.push_async_callback(fetcher.close)
    frontier = build_frontier(settings, store, seeds)
    robots, fetch_url = build_robots(settings, clock, stack, credentials)
    own_sinks = load_sinks(settings.sinks, settings)
    if own_sinks:
        sink = FanOutSink(sink, own_sinks)
        stack.push_async_callback(sink.close)
    processors = default_processors(registry.schemas(), load_processors(settings.processors))
    tracker = backends.sink if isinstance(backends.sink, PageTracker) else None
    pipeline = Pipeline(
        processors, sink, events=events, clock=clock, rejects=rejects, tracker=tracker
    )
    parts = CrawlerParts(
        frontier=frontier,
        admitter=Admitter(frontier, robots=robots, events=events, fetch_url=fetch_url, clock=clock),
        fetchers=fetchers,
        robots=robots,
        parsers=registry,
        pipeline=pipeline,
        events=events,
        clock=clock,
        worker=worker_name(),
        max_retry_after_s=settings.max_retry_after_s,
        max_step_s=settings.max_step_s,
        parse_budget=budget,
        freshness=Freshness(frontier, recrawl_policy(settings), clock),
    )
    return CrawlGraph(Crawler(parts), frontier, stack)


async def open_frontier(
    settings: Settings, stack: AsyncExitStack, seeds: Sequence[str] = ()
) -> Frontier:
    """The frontier of an existing crawl (SQLite state, or Redis), for views and DLQ commands."""
    backends = await open_store(settings, stack)
    return build_frontier(settings, backends.store, list(seeds))

"""The one place that picks implementations and builds the object graph of a crawl.

The fetchers it puts in the graph are built by ``runtime.fetcher_wiring``.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Collection, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlfleet.clock import Clock
from crawlfleet.errors import StateError
from crawlfleet.events import EventBus
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.protocols import Fetcher, ViaFetcher
from crawlfleet.frontier.frontier import Frontier, RetryPolicy
from crawlfleet.frontier.ladder import BROWSER
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.scope import Scope
from crawlfleet.frontier.sitemaps import SitemapLimits
from crawlfleet.frontier.store_types import Budget
from crawlfleet.monitoring.samples import DIRECTORY as SAMPLES_DIR
from crawlfleet.monitoring.samples import MismatchSamples
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.custom import FanOutSink, load_processors, load_sinks
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.pipeline.processors import default_processors
from crawlfleet.pipeline.protocols import PageTracker, Sink
from crawlfleet.pipeline.rejects import RejectStore
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.archiving import open_archive
from crawlfleet.runtime.backends import Backends, open_store
from crawlfleet.runtime.choice.browser_lane import browser_lane, build_browser
from crawlfleet.runtime.choice.kinds import check_kinds, named_kinds, needs_browser, servable_kinds
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.runtime.choice.strategy import Strategies
from crawlfleet.runtime.fetcher_wiring import build_fetchers, build_robots, build_transport
from crawlfleet.runtime.fetching.chain import login_link, session_link
from crawlfleet.runtime.options import parse_limits, sink_options, trap_limits
from crawlfleet.runtime.policies import domain_policy, recrawl_policy
from crawlfleet.runtime.step.body_bytes import BodyBytes
from crawlfleet.runtime.step.crawler import Crawler, CrawlerParts
from crawlfleet.runtime.step.drift import DriftOptions, DriftWatch
from crawlfleet.runtime.step.freshness import Freshness
from crawlfleet.secretsfile import SiteSecrets
from crawlfleet.settings import Settings
from crawlfleet.urls import UrlRules

if TYPE_CHECKING:  # prometheus_client (~45 ms to import) only where metrics are served
    from crawlfleet.monitoring.browser_metrics import PoolFigures


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def build_frontier(
    settings: Settings, store: QueueStore, seeds: list[str], router: Router | None = None
) -> Frontier:
    """The crawl's frontier over ``store``; it owns the store from here on.

    ``router`` picks new requests' fetcher kinds (None: the link's kind, else ``http``).
    """
    policy = domain_policy(settings)
    if store.default_policy != policy:  # a store opened for another crawl's politeness
        raise ValueError(
            f"the store's default domain policy {store.default_policy} is not the crawl's {policy}"
        )
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    scope = Scope.for_seeds(
        seeds,
        allowed_domains=settings.allowed_domains,
        allow=settings.allow,
        deny=settings.deny,
        max_depth=settings.max_depth,
        traps=trap_limits(settings),
    )
    return Frontier(
        store,
        rules=rules,
        scope=scope,
        budget=Budget(settings.max_pages, settings.max_pages_per_domain),
        retry=RetryPolicy(settings.max_retries, settings.backoff_base_s, settings.backoff_max_s),
        lease_s=settings.lease_s,
        max_redirects=settings.max_redirects,
        overrides=settings.domains,
        rng=random.Random(),
        route=router.kind if router is not None else None,
    )


async def build_admitter(
    settings: Settings,
    frontier: Frontier,
    *,
    events: EventBus,
    clock: Clock,
    stack: AsyncExitStack,
) -> Admitter:
    """What seeds a crawl without fetchers, parsers or sinks (the dispatcher, ``add``);
    robots.txt and sitemaps through the crawl's sessions when it has proxies."""
    link = await session_link(settings, clock, stack, frontier)
    robots, fetch_url = build_robots(
        settings, clock, stack, Credentials(), link, on_read=frontier.robots_delay
    )
    return Admitter(
        frontier,
        robots=robots,
        events=events,
        fetch_url=fetch_url,
        clock=clock,
        sitemap_limits=sitemap_limits(settings),
    )


def crawl_parsers(settings: Settings) -> ParserRegistry:
    """The crawl's parsers (plugins and declared), the default parser for the rest."""
    return load_parsers(settings.parsers, settings.selector_parsers, default=default_parser)


def crawl_pipeline(
    settings: Settings,
    registry: ParserRegistry,
    sink: Sink,
    *,
    events: EventBus,
    clock: Clock,
    rejects: RejectStore | None,
    own: Sink | None = None,
) -> Pipeline:
    """The item pipeline into ``sink``: the default processors for ``registry``'s schemas,
    then the crawl's own; pages are tracked by ``own`` (the store's sink under a fan-out,
    else ``sink``) when it tracks them."""
    processors = default_processors(registry.schemas(), load_processors(settings.processors))
    tracked = sink if own is None else own
    tracker = tracked if isinstance(tracked, PageTracker) else None
    return Pipeline(processors, sink, events=events, clock=clock, rejects=rejects, tracker=tracker)


def sitemap_limits(settings: Settings) -> SitemapLimits:
    return SitemapLimits(
        max_urls=settings.sitemap_max_urls,
        max_depth=settings.sitemap_max_depth,
        max_sitemaps=settings.sitemap_max_sitemaps,
        max_bytes=settings.sitemap_max_bytes,
    )


@dataclass(slots=True)
class CrawlGraph:
    """Everything one crawl process needs; ``stack`` closes it all."""

    crawler: Crawler
    frontier: Frontier
    stack: AsyncExitStack
    proxies: ProxyPool | None = None
    browser_pool: PoolFigures | None = None
    """What the browser lane's pool counts (None without a browser lane), for metrics."""


async def build_crawl(
    settings: Settings,
    *,
    seeds: list[str],
    backends: Backends,
    events: EventBus,
    clock: Clock,
    stack: AsyncExitStack,
    kinds: Collection[str] | None = None,
) -> CrawlGraph:
    """Wire a crawl over the given backends (embedded or distributed alike).

    ``kinds``: the fetcher kinds this process serves (a worker's queues); None (embedded):
    every kind this machine can, checked against the kinds the crawl names (``ConfigError``
    naming what is missing). A browser lane is built where ``browser`` is served (embedded:
    where the crawl names ``browser`` or ``auto``, or its ladder keeps the ``browser`` rung;
    Chromium starts with the first page the lane fetches).
    """
    if backends.sink is None:
        raise StateError("a crawl step needs an item sink; these backends opened none")
    store, sink, rejects = backends.store, backends.sink, backends.rejects
    registry = crawl_parsers(settings)
    budget = ParseBudget(parse_limits(settings))
    stack.callback(budget.close)
    router = Router(registry, settings.domains, settings.browser_wait)
    wants_browser = browser_wanted(settings, registry, kinds)
    credentials = Credentials.from_urls(seeds)  # userinfo of the seeds, per origin
    secrets = SiteSecrets.load(settings.secrets_file)
    secrets.add_basic_auth(credentials, seeds)
    logged_in = await login_link(settings, clock, stack, secrets)
    frontier = build_frontier(settings, store, seeds, router)
    link = await session_link(settings, clock, stack, frontier)
    archive = open_archive(settings, stack)  # closed after the fetchers (the stack is LIFO)
    transport = build_transport(settings, stack)  # pages, robots.txt, sitemaps: one pool
    fetchers = build_fetchers(
        settings, clock, credentials, logged_in, link or _direct, archive, transport
    )
    for fetcher in fetchers.values():
        stack.push_async_callback(fetcher.close)
    pool_figures: PoolFigures | None = None
    if wants_browser:
        browser = build_browser(settings, clock, router, archive)
        pool_figures = browser.stats
        stack.push_async_callback(browser.close)
        fetchers["browser"] = browser_lane(
            browser if link is None else link(browser, own_jar=True),
            fetchers["http"],
            router=router,
            registry=registry,
            budget=budget,
            frontier=frontier,
        )
    robots, fetch_url = build_robots(
        settings,
        clock,
        stack,
        credentials,
        link,
        on_read=frontier.robots_delay,
        keeper=archive and archive.side,
        transport=transport,
    )
    own_sinks = load_sinks(settings.sinks, sink_options(settings))
    if own_sinks:
        sink = FanOutSink(sink, own_sinks)
        stack.push_async_callback(sink.close)
    pipeline = crawl_pipeline(
        settings, registry, sink, events=events, clock=clock, rejects=rejects, own=backends.sink
    )
    strategies = Strategies(frontier, clock)
    parts = CrawlerParts(
        frontier=frontier,
        admitter=Admitter(
            frontier,
            robots=robots,
            events=events,
            fetch_url=fetch_url,
            clock=clock,
            sitemap_limits=sitemap_limits(settings),
        ),
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
        strategies=strategies,
        freshness=Freshness(frontier, recrawl_policy(settings), clock),
        drift=DriftWatch(frontier, strategies, drift_options(settings)),
        samples=MismatchSamples(settings.state_dir / SAMPLES_DIR),
        body_bytes=BodyBytes(settings.max_body_bytes_in_flight),
    )
    proxies = link.pool if link is not None else None
    return CrawlGraph(Crawler(parts), frontier, stack, proxies, pool_figures)


def drift_options(settings: Settings) -> DriftOptions:
    return DriftOptions(on_drift=settings.on_drift, threshold=settings.drift_threshold)


def _direct(fetcher: ViaFetcher) -> Fetcher:
    """A fetcher without crawl sessions (no ``[crawl.proxies]``): itself."""
    return fetcher


def browser_wanted(
    settings: Settings, registry: ParserRegistry, kinds: Collection[str] | None
) -> bool:
    """Whether this process builds a browser lane (see ``build_crawl``'s ``kinds``)."""
    if kinds is not None:
        return "browser" in kinds
    named = list(named_kinds(registry, settings.domains))
    executable = settings.browser_executable
    check_kinds(named, servable_kinds(executable), browser_executable=executable)
    return needs_browser(named) or BROWSER in domain_policy(settings).blocks.ladder


async def open_frontier(
    settings: Settings, stack: AsyncExitStack, seeds: Sequence[str] = ()
) -> Frontier:
    """The frontier of an existing crawl (SQLite state, or Redis), for views and DLQ commands."""
    backends = await open_store(settings, stack, domain_policy(settings))
    return build_frontier(settings, backends.store, list(seeds))

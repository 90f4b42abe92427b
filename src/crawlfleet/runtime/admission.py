"""Admission: URLs from seeds, sitemaps and pages into the frontier, robots.txt read first.

The dispatcher seeds a crawl with an ``Admitter`` alone (no fetchers, parsers or sinks); the
crawl step admits each page's links through the same object. Before a domain's first URL is
queued, its robots.txt is read, so that its ``Crawl-delay`` reaches the store (for every
process of the crawl) before any request of that domain is claimed: the robots cache tells
each read, this first one and every refetch after it, to ``Frontier.robots_delay``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from crawlfleet.clock import Clock
from crawlfleet.counters import Counters, Limit, dropped_counter, merge
from crawlfleet.errors import BadUrl
from crawlfleet.events import EventBus, LinksAdded
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of
from crawlfleet.frontier.sitemaps import (
    DEFAULT_SITEMAP_LIMITS,
    SitemapEntry,
    SitemapLimits,
    default_sitemaps,
    sitemap_entries,
)
from crawlfleet.models import CrawlRequest, Link

log = logging.getLogger(__name__)

SITEMAP_BATCH = 1000
ROBOTS_PREFETCH_CONCURRENCY = 16
"""robots.txt files read at once for the new domains of one batch of links: a page linking
as many hosts that never answer holds its step for one robots timeout, not one per host."""


class Admitted(NamedTuple):
    """What one offer of links did: how many were new, and the links refused by reason
    (``dropped.<limit>``, ``filtered.<reason>`` counters)."""

    admitted: int
    refused: Counters


class Admitter:
    """Serializes, scopes and adds URLs; reads each new domain's robots.txt first.

    The domains already prepared are remembered per process only to save robots lookups:
    what robots says is written to the store, never kept here.
    """

    def __init__(
        self,
        frontier: Frontier,
        *,
        robots: RobotsCache | None,
        events: EventBus,
        fetch_url: FetchFn,
        clock: Clock,
        prefetch_concurrency: int = ROBOTS_PREFETCH_CONCURRENCY,
        sitemap_limits: SitemapLimits = DEFAULT_SITEMAP_LIMITS,
    ) -> None:
        self._frontier = frontier
        self._sitemap_limits = sitemap_limits
        self._clock = clock
        self._robots = robots
        self._events = events
        self._fetch_url = fetch_url
        self._prepared: set[str] = set()
        self._prefetch = asyncio.Semaphore(prefetch_concurrency)

    async def seed(self, urls: Iterable[str | Link]) -> int:
        """Offer seed URLs (depth 0); returns how many were new.

        A refused seed is logged and counted under its own domain (a bad URL only logged).
        """
        seeds = list(urls)
        admitted, refused = await self.admit(seeds, None)
        if refused:
            _, rejected = self._frontier.requests_for(seeds, None)
            by_domain: dict[str, Counters] = {}
            for url, refusal in rejected:
                log.warning("seed %s not crawled: %s", url, refusal)
                try:
                    domain = self._frontier.rules.politeness_key(url)
                except BadUrl:
                    continue
                merge(by_domain.setdefault(domain, {}), {dropped_counter(refusal.reason): 1})
            for domain, counted in by_domain.items():
                await self._frontier.add_counters(domain, counted)
        return admitted

    async def seed_sitemaps(self, seeds: Iterable[str]) -> int:
        """Offer the URLs of the seeds' sitemaps (robots.txt ``Sitemap:`` and /sitemap.xml).

        A known URL whose ``<lastmod>`` is after its last visit is due at once
        (``Frontier.expedite``). What the sitemap limits and the scope leave out is counted
        under the seed's domain.
        """
        origins = {origin_of(seed): seed for seed in seeds if not seed.startswith("file:")}
        admitted = 0
        for origin, seed in origins.items():
            if self._robots is not None:
                start = await default_sitemaps(self._robots, seed)
            else:
                start = [f"{origin}/sitemap.xml"]
            batch: list[SitemapEntry] = []
            rules = self._frontier.rules
            domain = rules.politeness_key(rules.target(seed).url)
            dropped: Counter[Limit] = Counter()
            found = sitemap_entries(
                self._fetch_url,
                start,
                in_scope=self._in_scope,
                robots=self._robots,
                delay_s=self._frontier.default_policy.delay_s,
                max_crawl_delay_s=self._frontier.default_policy.max_crawl_delay_s,
                clock=self._clock,
                limits=self._sitemap_limits,
                dropped=dropped,
            )
            async for entry in found:
                batch.append(entry)
                if len(batch) >= SITEMAP_BATCH:
                    admitted += await self._admit_entries(batch, domain)
                    batch = []
            admitted += await self._admit_entries(batch, domain)
            if dropped:
                counted = {dropped_counter(reason): n for reason, n in dropped.items()}
                await self._frontier.add_counters(domain, counted)
        return admitted

    async def _admit_entries(self, entries: list[SitemapEntry], domain: str) -> int:
        admitted, refused = await self.admit([entry.url for entry in entries], None)
        if refused:
            await self._frontier.add_counters(domain, refused)
        now = self._clock.now()
        for entry in entries:
            if entry.lastmod is None:
                continue
            requests, _rejected = self._frontier.requests_for([entry.url], None)
            for request in requests:
                await self._frontier.expedite(request, entry.lastmod, now)
        return admitted

    def _in_scope(self, url: str) -> bool:
        requests, _rejected = self._frontier.requests_for([url], None)
        return bool(requests)

    async def admit(self, links: Iterable[str | Link], parent: CrawlRequest | None) -> Admitted:
        """Offer links found on ``parent`` (seeds when None): how many were new and what was
        refused; the caller counts the refused (a page's in its report)."""
        requests, offered, refused = self._frontier.new_requests(links, parent)
        admitted = await self.add(requests)
        self._events.emit(LinksAdded(offered=offered, admitted=admitted))
        return Admitted(admitted, refused)

    async def add(self, requests: list[CrawlRequest]) -> int:
        """Add requests already made (a redirect's target), new domains prepared first."""
        await self.prepare(requests)
        return await self._frontier.add(requests)

    async def prepare(self, requests: Iterable[CrawlRequest]) -> None:
        """Read the robots.txt of the requests' new domains, a few at once."""
        firsts: dict[str, CrawlRequest] = {}
        for request in requests:
            if request.domain not in self._prepared and request.domain not in firsts:
                firsts[request.domain] = request
        if not firsts:
            return
        self._prepared.update(firsts)
        await asyncio.gather(*(self._prepare(request) for request in firsts.values()))

    async def _prepare(self, request: CrawlRequest) -> None:
        if self._robots is None or request.fetcher == "file":
            return
        async with self._prefetch:
            await self._robots.check(request.url)  # its read is told to robots_delay

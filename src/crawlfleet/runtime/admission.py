"""Admission: URLs from seeds, sitemaps and pages into the frontier, robots.txt read first.

Sitemaps are requests of the frontier too (decision 0052): ``seed_sitemaps`` queues the
seeds' sitemaps, and the crawl step hands each sitemap it fetched to ``read_sitemap``, which
admits its pages and queues the sitemaps an index lists, one level deeper.

The dispatcher seeds a crawl with an ``Admitter`` alone (no fetchers, parsers or sinks); the
crawl step admits each page's links through the same object. Before a domain's first URL is
queued, its robots.txt is read, so that its ``Crawl-delay`` reaches the store (for every
process of the crawl) before any request of that domain is claimed: the robots cache tells
each read, this first one and every refetch after it, to ``Frontier.robots_delay``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

from crawlfleet.clock import Clock
from crawlfleet.counters import Counters, Limit, dropped_counter, merge
from crawlfleet.errors import BadUrl
from crawlfleet.events import EventBus, LinksAdded
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of
from crawlfleet.frontier.sitemaps import (
    DEFAULT_SITEMAP_LIMITS,
    SITEMAP_KEY,
    SitemapEntry,
    SitemapLimits,
    SitemapTally,
    default_sitemaps,
    read_sitemap,
    sitemap_depth,
    sitemap_fingerprint,
)
from crawlfleet.models import CrawlRequest, FetchResult, Link
from crawlfleet.records import Outcome

log = logging.getLogger(__name__)

SITEMAP_PRIORITY = -1
"""A sitemap request's priority: below a page's default (0), so a domain's queued pages are
fetched before its next sitemap is read (decision 0052)."""
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
        """Queue the seeds' sitemaps (robots.txt ``Sitemap:`` and /sitemap.xml) as requests;
        returns how many were new (none on a resumed crawl: they are known)."""
        origins = {origin_of(seed): seed for seed in seeds if not seed.startswith("file:")}
        start: list[str] = []
        for origin, seed in origins.items():
            if self._robots is not None:
                start += await default_sitemaps(self._robots, seed)
            else:
                start.append(f"{origin}/sitemap.xml")
        tally = SitemapTally()
        admitted = await self._queue_sitemaps(start, 0, tally)
        if tally.sitemaps_skipped:
            log.warning("%d start sitemaps out of the crawl's scope", tally.sitemaps_skipped)
        return admitted

    async def fetch_sitemap(self, url: str) -> FetchResult:
        """Fetch a sitemap by the side fetch (redirects followed), as robots.txt is."""
        return await self._fetch_url(url)

    async def read_sitemap(self, request: CrawlRequest, body: bytes) -> SitemapTally:
        """Admit the pages of a sitemap request's body and queue the sitemaps it lists.

        A known page whose ``<lastmod>`` is after its last visit is due at once
        (``Frontier.expedite``). A child sitemap past ``sitemap_max_depth`` levels, past
        ``sitemap_max_sitemaps`` queued in the crawl, or past half the page budget still free is
        left, counted and told in a warning line. ``BadSitemap`` when the body cannot be
        inflated (what came before it is admitted).
        """
        depth = sitemap_depth(request.data) or 0
        tally = SitemapTally(sitemaps_read=1)
        limits = self._sitemap_limits
        room, limit, why = await self._sitemap_room(depth, request.domain)
        urls_left = limits.max_urls - int((await self._frontier.stats()).get("sitemaps.entries"))
        dropped: Counter[Limit] = Counter()
        chunks = read_sitemap(request.url, body, tally, limits.max_bytes)
        with contextlib.closing(chunks):
            for pages, children in chunks:
                if len(pages) > urls_left:
                    dropped[Limit.SITEMAP_MAX_URLS] += len(pages) - max(urls_left, 0)
                    pages = pages[: max(urls_left, 0)]
                urls_left -= len(pages)
                tally.entries += len(pages)
                await self._admit_entries(pages, request.domain)
                kept, left = children[: max(room, 0)], children[max(room, 0) :]
                room -= await self._queue_sitemaps(kept, depth + 1, tally)
                if left:
                    tally.sitemaps_over_limits += len(left)
                    dropped[limit] += len(left)
                    log.warning(
                        "%d sitemaps listed by %s not read (first %s): %s",
                        len(left),
                        request.url,
                        left[0],
                        why,
                    )
                await asyncio.sleep(0)  # a 50 MB sitemap must not stall the event loop
        if dropped[Limit.SITEMAP_MAX_URLS]:
            log.warning(
                "sitemap %s: %d page URLs past sitemap_max_urls (%d) left",
                request.url,
                dropped[Limit.SITEMAP_MAX_URLS],
                limits.max_urls,
            )
        if dropped:
            counted = {dropped_counter(reason): n for reason, n in dropped.items()}
            await self._frontier.add_counters(request.domain, counted)
        return tally

    async def _sitemap_room(self, depth: int, domain: str) -> tuple[int, Limit, str]:
        """How many more sitemaps a sitemap at ``depth`` of ``domain`` may queue, the limit
        that says so and why: ``sitemap_max_depth`` levels, ``sitemap_max_sitemaps`` queued in
        the crawl, and half of what the budget (``max_total``, and ``max_per_domain`` for
        ``domain``) still admits, the rest left for pages."""
        max_depth, max_sitemaps = self._sitemap_limits.max_depth, self._sitemap_limits.max_sitemaps
        if depth >= max_depth:
            why = f"{depth + 1} levels down (sitemap_max_depth {max_depth})"
            return 0, Limit.SITEMAP_MAX_DEPTH, why
        queued = int((await self._frontier.stats()).get("sitemaps.queued"))
        room, limit = max_sitemaps - queued, Limit.SITEMAP_MAX_SITEMAPS
        why = f"past {max_sitemaps} sitemaps in the crawl (sitemap_max_sitemaps)"
        budget = self._frontier.budget
        if budget.max_total is not None:
            free = budget.max_total - (await self._frontier.counts()).seen
            if free // 2 < room:
                room, limit = free // 2, Limit.MAX_PAGES
                why = f"past half of the {free} requests --max-pages leaves"
        if budget.max_per_domain is not None:
            view = await self._frontier.domain(domain)
            ended = sum(
                view.stats.get(f"outcome.{o.value}") for o in Outcome if o is not Outcome.RETRY
            )
            free = budget.max_per_domain - (view.queued + view.in_flight + ended)
            if free // 2 < room:
                room, limit = free // 2, Limit.MAX_PAGES_PER_DOMAIN
                why = f"past half of the {free} requests max_pages_per_domain leaves"
        return room, limit, why

    async def _queue_sitemaps(self, urls: list[str], depth: int, tally: SitemapTally) -> int:
        """Add sitemap requests at ``depth``; how many were new. Out-of-scope ones are
        counted as skipped, with a warning line each."""
        data = {SITEMAP_KEY: depth}
        links = [Link(url, SITEMAP_PRIORITY, "http", data) for url in urls]
        requests, rejected = self._frontier.requests_for(links, None)
        for url, reason in rejected:
            log.warning("skipping sitemap %s: %s", url, reason)
        tally.sitemaps_skipped += len(rejected)
        own = [replace(r, fingerprint=sitemap_fingerprint(r.fingerprint)) for r in requests]
        admitted = await self.add(own)
        tally.sitemaps_queued += admitted
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

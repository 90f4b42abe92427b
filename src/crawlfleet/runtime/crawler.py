"""The crawl step for one leased request: allow, fetch, parse, store, enqueue, complete.

This module knows no backend: the local asyncio runner and the Celery task both call
``Crawler.process`` with a lease from the frontier. Order within a step makes every crash
point recoverable by refetching: discovered links are enqueued, then items stored, then the
lease completed. A crash before completion leaves the lease to expire and come back.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin

from crawlfleet.clock import Clock
from crawlfleet.errors import FetchError
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.politeness import (
    BlockDetector,
    StatusClass,
    classify,
    parse_retry_after,
)
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of
from crawlfleet.frontier.sitemaps import default_sitemaps, sitemap_urls
from crawlfleet.models import Attempt, CrawlRequest, FetchResult, Item, Lease, Link, Outcome
from crawlfleet.monitoring.events import (
    DomainBlocked,
    EventBus,
    FetchAttempted,
    LinksAdded,
    ParseFailed,
    RequestSkipped,
)
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.pipeline import Pipeline

SITEMAP_BATCH = 1000
MAX_CRAWL_DELAY_S = 60.0


@dataclass(frozen=True, slots=True)
class CrawlerParts:
    """The collaborators of a crawl step, built once by ``runtime.wiring``."""

    frontier: Frontier
    fetchers: Mapping[str, Fetcher]
    robots: RobotsCache | None
    parsers: ParserRegistry
    pipeline: Pipeline
    events: EventBus
    clock: Clock
    blocks: BlockDetector
    worker: str
    fetch_url: FetchFn


class Crawler:
    """Runs crawl steps; holds only per-process caches of domain state."""

    def __init__(self, parts: CrawlerParts) -> None:
        self.parts = parts
        self._prepared: set[str] = set()
        self._base_delay: dict[str, float] = {}

    async def seed(self, urls: Iterable[str | Link]) -> int:
        """Offer seed URLs (depth 0); returns how many were new."""
        return await self._admit(urls, None)

    async def seed_sitemaps(self, seeds: Iterable[str]) -> int:
        """Offer the URLs of the seeds' sitemaps (robots.txt ``Sitemap:`` and /sitemap.xml)."""
        p = self.parts
        origins = {origin_of(seed): seed for seed in seeds if not seed.startswith("file:")}
        admitted = 0
        for origin, seed in origins.items():
            if p.robots is not None:
                start = await default_sitemaps(p.robots, seed)
            else:
                start = [f"{origin}/sitemap.xml"]
            batch: list[str] = []
            async for url in sitemap_urls(p.fetch_url, start):
                batch.append(url)
                if len(batch) >= SITEMAP_BATCH:
                    admitted += await self._admit(batch, None)
                    batch = []
            admitted += await self._admit(batch, None)
        return admitted

    async def process(self, lease: Lease) -> None:
        """One crawl step. Never raises for a page-level problem: it is recorded instead."""
        p = self.parts
        request = lease.request
        if p.robots is not None and request.fetcher != "file":
            decision = await p.robots.check(request.url)
            if decision.unavailable:
                await self._failed(lease, p.clock.now(), decision.reason or "", None, 0.0)
                return
            if not decision.allowed:
                await self._skip(lease, decision.reason or "disallowed by robots.txt")
                return
        started = p.clock.now()
        fetcher = p.fetchers.get(request.fetcher) or p.fetchers["http"]
        try:
            result = await fetcher.fetch(request)
        except FetchError as exc:
            await self._rest(request.domain)
            await self._failed(lease, started, str(exc), None, 0.0, retry=exc.transient)
            return
        await self._rest(request.domain)
        await self._fetched(lease, started, result)

    async def _rest(self, domain: str) -> None:
        """Keep the domain quiet for its delay after this response.

        The claim already spaced request *starts*; a start delayed by a robots.txt fetch or a
        new connection would still reach the server early, so the delay also runs from here.
        """
        delay_s = self._delay_of(domain)
        if delay_s > 0:
            await self.parts.frontier.store.block(domain, self.parts.clock.now() + delay_s)

    async def _fetched(self, lease: Lease, started: float, result: FetchResult) -> None:
        p = self.parts
        request = lease.request
        now = p.clock.now()
        kind = classify(result)
        verdict = p.blocks.observe(request.domain, result)
        if verdict.changed:
            await p.frontier.set_delay(request.domain, self._delay_of(request.domain))
        if kind is StatusClass.RETRY_AFTER:
            wait_s = parse_retry_after(result.headers.get("retry-after"), now) or 0.0
            await self._block(
                lease, started, result, now + wait_s, f"HTTP {result.status} Retry-After"
            )
            return
        if verdict.blocked:
            reason = f"blocked: {verdict.reason}"
            await self._block(lease, started, result, now + verdict.cooldown_s, reason)
            return
        if kind is StatusClass.TRANSIENT:
            await self._failed(lease, started, f"HTTP {result.status}", result, 0.0)
            return
        if kind is StatusClass.FINAL:
            await p.frontier.complete(lease)
            self._log(request, Outcome.FAILED, result, started, f"HTTP {result.status}")
            return
        if kind is StatusClass.REDIRECT:
            await self._redirected(lease, started, result)
            return
        links, items = self._parse(request, result)
        await self._admit(links, request)
        await p.pipeline.process(items, request.domain)
        await p.frontier.complete(lease)
        self._log(request, Outcome.OK, result, started, None)

    async def _block(
        self, lease: Lease, started: float, result: FetchResult, until: float, reason: str
    ) -> None:
        """The whole domain rests until ``until``; this request is retried after it."""
        p = self.parts
        await p.frontier.store.block(lease.request.domain, until)
        p.events.emit(DomainBlocked(lease.request.domain, until, reason))
        await self._failed(lease, started, reason, result, until)

    async def _redirected(self, lease: Lease, started: float, result: FetchResult) -> None:
        """Queue the Location like a link: the seen filter makes its page fetched once."""
        p = self.parts
        location = urljoin(result.final_url, result.headers["location"])
        target = p.frontier.redirect(lease.request, location)
        if isinstance(target, str):
            await p.frontier.complete(lease)
            self._log(lease.request, Outcome.FAILED, result, started, target)
            return
        await self._prepare_all([target])
        await p.frontier.add([target])
        await p.frontier.complete(lease)
        self._log(lease.request, Outcome.OK, result, started, None)

    def _parse(self, request: CrawlRequest, result: FetchResult) -> tuple[list[Link], list[Item]]:
        name, parser = self.parts.parsers.select(result.final_url)
        try:
            parsed = parser(result)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.parts.events.emit(ParseFailed(request.url, name, error, traceback.format_exc()))
            return [], []
        return parsed.links, parsed.items

    def _delay_of(self, domain: str) -> float:
        base = self._base_delay.get(domain, self.parts.frontier.default_policy.delay_s)
        return base * self.parts.blocks.multiplier(domain)

    async def _admit(self, links: Iterable[str | Link], parent: CrawlRequest | None) -> int:
        p = self.parts
        requests, _rejected = p.frontier.requests_for(links, parent)
        await self._prepare_all(requests)
        admitted = await p.frontier.add(requests)
        p.events.emit(LinksAdded(offered=len(requests), admitted=admitted))
        return admitted

    async def _prepare_all(self, requests: Iterable[CrawlRequest]) -> None:
        for request in requests:
            if request.domain not in self._prepared:
                await self._prepare(request)

    async def _prepare(self, request: CrawlRequest) -> None:
        """Read a new domain's robots.txt before its first URL is queued (Crawl-delay)."""
        self._prepared.add(request.domain)
        robots = self.parts.robots
        if robots is None or request.fetcher == "file":
            return
        decision = await robots.check(request.url)
        if decision.crawl_delay_s is not None:
            crawl_delay_s = min(decision.crawl_delay_s, MAX_CRAWL_DELAY_S)
            delay_s = max(self.parts.frontier.default_policy.delay_s, crawl_delay_s)
            self._base_delay[request.domain] = delay_s
            await self.parts.frontier.set_delay(request.domain, delay_s)

    async def _skip(self, lease: Lease, reason: str) -> None:
        request = lease.request
        await self.parts.frontier.complete(lease)
        self.parts.events.emit(RequestSkipped(request.url, request.domain, reason))
        self._log(request, Outcome.SKIPPED, None, self.parts.clock.now(), reason)

    async def _failed(
        self,
        lease: Lease,
        started: float,
        error: str,
        result: FetchResult | None,
        not_before: float,
        *,
        retry: bool = True,
    ) -> None:
        p = self.parts
        now = p.clock.now()
        request = lease.request
        if retry:
            retried = await p.frontier.fail(lease, error, now, not_before)
        else:
            await p.frontier.store.bury(lease, error, now)
            retried = False
        self._log(request, Outcome.RETRY if retried else Outcome.DEAD, result, started, error)

    def _log(
        self,
        request: CrawlRequest,
        outcome: Outcome,
        result: FetchResult | None,
        started: float,
        error: str | None,
    ) -> None:
        now = self.parts.clock.now()
        self.parts.events.emit(
            FetchAttempted(
                Attempt(
                    url=request.url,
                    fingerprint=request.fingerprint,
                    domain=request.domain,
                    worker=self.parts.worker,
                    outcome=outcome,
                    status=result.status if result is not None else None,
                    bytes=len(result.body) if result is not None else 0,
                    latency_s=result.elapsed_s if result is not None else now - started,
                    retry=request.attempt,
                    at=now,
                    error=error,
                )
            )
        )

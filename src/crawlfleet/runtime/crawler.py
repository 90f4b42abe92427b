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

from crawlfleet.clock import Clock
from crawlfleet.errors import FetchError
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.politeness import BlockDetector, parse_retry_after
from crawlfleet.frontier.robots import RobotsCache
from crawlfleet.models import Attempt, CrawlRequest, FetchResult, Lease, Link, Outcome
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

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524})


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


class Crawler:
    """Runs crawl steps; holds only per-process caches of domain state."""

    def __init__(self, parts: CrawlerParts) -> None:
        self.parts = parts
        self._prepared: set[str] = set()
        self._base_delay: dict[str, float] = {}
        self._slowed: set[str] = set()

    async def seed(self, urls: Iterable[str | Link]) -> int:
        """Offer seed URLs (depth 0); returns how many were new."""
        return await self._admit(urls, None)

    async def process(self, lease: Lease) -> None:
        """One crawl step. Never raises for a page-level problem: it is recorded instead."""
        p = self.parts
        request = lease.request
        if p.robots is not None:
            decision = await p.robots.check(request.url)
            if not decision.allowed:
                await self._skip(lease, decision.reason or "disallowed by robots.txt")
                return
        fetcher = p.fetchers.get(request.fetcher) or p.fetchers["http"]
        started = p.clock.now()
        try:
            result = await fetcher.fetch(request)
        except FetchError as exc:
            await self._failed(lease, started, str(exc), None, 0, retry=exc.transient)
            return
        await self._fetched(lease, result)

    async def _fetched(self, lease: Lease, result: FetchResult) -> None:
        p = self.parts
        request = lease.request
        now = p.clock.now()
        status = result.status
        verdict = p.blocks.observe(request.domain, result)
        if verdict.delay_multiplier != 1.0 or request.domain in self._slowed:
            await self._adapt_delay(request.domain, verdict.delay_multiplier)
        retry_after = parse_retry_after(result.headers.get("retry-after"), now)
        if status in (429, 503) and retry_after is not None:
            until = now + retry_after
            await p.frontier.store.block(request.domain, until)
            p.events.emit(DomainBlocked(request.domain, until, f"HTTP {status} Retry-After"))
            await self._failed(lease, now - result.elapsed_s, f"HTTP {status}", result, until)
            return
        if status in RETRY_STATUSES or verdict.blocked:
            reason = "blocked (CAPTCHA or ban page)" if verdict.blocked else f"HTTP {status}"
            await self._failed(lease, now - result.elapsed_s, reason, result, 0.0)
            return
        if result.redirects:
            await p.frontier.mark_seen((*result.redirects[1:], result.final_url))
        name, parser = p.parsers.select(result.final_url)
        links: list[Link] = []
        items = []
        try:
            parsed = parser(result)
            links, items = parsed.links, parsed.items
        except Exception as exc:
            p.events.emit(
                ParseFailed(request.url, name, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            )
        await self._admit(links, request)
        await p.pipeline.process(items, request.domain)
        await p.frontier.complete(lease)
        self._log(request, Outcome.OK, result.status, len(result.body), result.elapsed_s, now, None)

    async def _admit(self, links: Iterable[str | Link], parent: CrawlRequest | None) -> int:
        p = self.parts
        requests, _rejected = p.frontier.requests_for(links, parent)
        for request in requests:
            if request.domain not in self._prepared:
                await self._prepare(request)
        admitted = await p.frontier.add(requests)
        p.events.emit(LinksAdded(offered=len(requests), admitted=admitted))
        return admitted

    async def _prepare(self, request: CrawlRequest) -> None:
        """Read a new domain's robots.txt before its first URL is queued (Crawl-delay)."""
        self._prepared.add(request.domain)
        robots = self.parts.robots
        if robots is None or request.fetcher == "file":
            return
        decision = await robots.check(request.url)
        if decision.crawl_delay_s is not None:
            delay_s = max(self.parts.frontier.default_policy.delay_s, decision.crawl_delay_s)
            self._base_delay[request.domain] = delay_s
            await self.parts.frontier.set_delay(request.domain, delay_s)

    async def _adapt_delay(self, domain: str, multiplier: float) -> None:
        base = self._base_delay.get(domain, self.parts.frontier.default_policy.delay_s)
        if multiplier == 1.0:
            self._slowed.discard(domain)
        else:
            self._slowed.add(domain)
        await self.parts.frontier.set_delay(domain, max(base, 0.05) * multiplier)

    async def _skip(self, lease: Lease, reason: str) -> None:
        request = lease.request
        await self.parts.frontier.complete(lease)
        self.parts.events.emit(RequestSkipped(request.url, request.domain, reason))
        self._log(request, Outcome.SKIPPED, None, 0, 0.0, self.parts.clock.now(), reason)

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
        outcome = Outcome.RETRY if retried else Outcome.DEAD
        status = result.status if result is not None else None
        size = len(result.body) if result is not None else 0
        self._log(request, outcome, status, size, now - started, now, error)

    def _log(
        self,
        request: CrawlRequest,
        outcome: Outcome,
        status: int | None,
        size: int,
        latency_s: float,
        at: float,
        error: str | None,
    ) -> None:
        self.parts.events.emit(
            FetchAttempted(
                Attempt(
                    url=request.url,
                    fingerprint=request.fingerprint,
                    domain=request.domain,
                    worker=self.parts.worker,
                    outcome=outcome,
                    status=status,
                    bytes=size,
                    latency_s=latency_s,
                    retry=request.attempt,
                    at=at,
                    error=error,
                )
            )
        )

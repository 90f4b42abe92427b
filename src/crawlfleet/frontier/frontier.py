"""The frontier: URLs in (serialized, in scope, deduplicated by key), due work out, outcomes back.

It wraps a ``QueueStore`` with the crawl's URL rules, scope, budget and retry policy (the
default domain policy is the store's, given when it was opened). Every runtime (the embedded runner, a Celery worker, the dispatcher) talks to
the store through this class only: the store stays private.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from crawlfleet.counters import Counters, CrawlStats
from crawlfleet.errors import ConfigError
from crawlfleet.frontier.backoff import backoff_s
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest
from crawlfleet.frontier.learned import AUTO_PREFIX, lane_for
from crawlfleet.frontier.offered import OfferedUrls
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.requests import (
    LinkRules,
    Route,
    build_requests,
    default_route,
    redirect_request,
    refused_counters,
)
from crawlfleet.frontier.scope import Refusal, Scope
from crawlfleet.frontier.sitemaps import SITEMAP_KEY
from crawlfleet.frontier.store_types import (
    Budget,
    DelaySource,
    DomainPolicy,
    DomainView,
    Ended,
    Report,
    Visit,
)
from crawlfleet.models import CrawlRequest, Lease, Link
from crawlfleet.records import Attempt, DeadLetter, Outcome, QueueCounts
from crawlfleet.urls import UrlRules

logger = logging.getLogger(__name__)

REVISIT_BATCH = 10_000
"""Due known URLs queued again per store call (bounds the memory of one call)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how late a failed request is tried again."""

    max_retries: int
    base_s: float
    max_s: float


class PolitenessOverride(Protocol):
    """A domain's politeness from the config (``[crawl.domains."HOST"]``): its delay and
    concurrency cap; None keeps the crawl's."""

    @property
    def delay_s(self) -> float | None: ...

    @property
    def concurrency(self) -> int | None: ...


class Frontier:
    """URL manager and scheduler for one crawl, over any ``QueueStore``."""

    def __init__(
        self,
        store: QueueStore,
        *,
        rules: UrlRules,
        scope: Scope,
        budget: Budget,
        retry: RetryPolicy,
        lease_s: float,
        max_redirects: int = 10,
        overrides: Mapping[str, PolitenessOverride] | None = None,
        rng: random.Random | None = None,
        route: Route | None = None,
    ) -> None:
        self._store = store
        self.rules = rules
        self.scope = scope
        self.budget = budget
        self.retry_policy = retry
        self.lease_s = lease_s
        self.max_redirects = max_redirects
        self.overrides: Mapping[str, PolitenessOverride] = overrides or {}
        self._rng = rng or random.Random()
        self._rules_of_links = LinkRules(rules, scope, route or default_route)
        unlimited = budget.max_total is None and budget.max_per_domain is None
        self._offered = OfferedUrls() if unlimited else None

    @property
    def default_policy(self) -> DomainPolicy:
        """The crawl's default domain policy: its store's."""
        return self._store.default_policy

    def requests_for(
        self, links: Iterable[Link | str], parent: CrawlRequest | None
    ) -> tuple[list[CrawlRequest], list[tuple[str, Refusal]]]:
        """In-scope requests for the links, and (url, why) for the rest."""
        requests, rejected, _ = build_requests(links, parent, self._rules_of_links, None)
        return requests, rejected

    def new_requests(
        self, links: Iterable[Link | str], parent: CrawlRequest | None
    ) -> tuple[list[CrawlRequest], int, Counters]:
        """``requests_for``'s requests less those this frontier offered its store before
        (the store would refuse them as seen, ``frontier/recent.py``), how many requests
        ``requests_for`` would have returned, and the links refused by reason
        (``dropped.<limit>``, ``filtered.<reason>``)."""
        depth = parent.depth + 1 if parent is not None else 0
        max_depth = self.scope.max_depth
        offered = self._offered if max_depth is None or depth <= max_depth else None
        requests, rejected, known = build_requests(links, parent, self._rules_of_links, offered)
        return requests, len(requests) + known, refused_counters(rejected)

    async def add(self, requests: Sequence[CrawlRequest]) -> int:
        """Admit the new requests within the budget; how many were admitted.

        A request of kind ``auto:<parser>`` joins the lane its domain learned
        (``frontier/learned.py``).
        """
        if not requests:
            return 0
        admitted = await self._store.add(await self._learned_lanes(requests), self.budget)
        if self._offered is not None:
            # A sitemap request has its own fingerprint: its URL stays free for a page.
            plain = (r for r in requests if r.method == "GET" and not r.body)
            plain = (r for r in plain if SITEMAP_KEY not in r.data)
            self._offered.add(r.url for r in plain)
        return admitted

    async def _learned_lanes(self, requests: Sequence[CrawlRequest]) -> Sequence[CrawlRequest]:
        if not any(r.fetcher.startswith(AUTO_PREFIX) for r in requests):
            return requests
        strategies: dict[str, Mapping[str, str]] = {}
        routed = []
        for request in requests:
            if request.fetcher.startswith(AUTO_PREFIX):
                if request.domain not in strategies:
                    strategies[request.domain] = await self.strategy(request.domain)
                lane = lane_for(strategies[request.domain], request.fetcher, request.fingerprint)
                request = replace(request, fetcher=lane)
            routed.append(request)
        return routed

    async def strategy(self, domain: str) -> dict[str, str]:
        """The domain's fetch strategy slot (see the shared contract in ``QueueStore``)."""
        return dict((await self._store.domain(domain)).strategy)

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        """Replace the domain's strategy slot: read it, change your keys, write it all back."""
        await self._store.set_strategy(domain, strategy)

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        """Feed a page to ``parser``'s drift test on ``domain`` (``QueueStore.observe_drift``)."""
        return await self._store.observe_drift(domain, parser, page, rule)

    def redirect(self, parent: CrawlRequest, location: str) -> CrawlRequest | Refusal:
        """The request a redirect leads to (same depth, one more hop), or why it is refused
        (``frontier/requests.py``)."""
        return redirect_request(parent, location, self._rules_of_links, self.max_redirects)

    async def claim(self, limit: int, now: float, kinds: Collection[str]) -> list[Lease]:
        """Due leases of the fetcher ``kinds`` (see ``QueueStore.claim``)."""
        return await self._store.claim(limit, now, self.lease_s, kinds)

    async def move(self, lease: Lease, kind: str) -> bool:
        """Hand the leased request to the ``kind`` lane (see ``QueueStore.move``)."""
        return await self._store.move(lease, kind)

    async def renew(self, lease: Lease, now: float) -> bool:
        """Extend the lease to ``now + lease_s``; False if it is no longer current."""
        return await self._store.renew(lease, now + self.lease_s)

    async def complete(self, lease: Lease, report: Report) -> Ended:
        """The request is done; ``report`` goes to the statistics, attempt log and policy."""
        return await self._store.complete(lease, report)

    async def fail(
        self,
        lease: Lease,
        error: str,
        now: float,
        report: Report,
        *,
        not_before: float = 0.0,
        retry: bool = True,
        outcome: Outcome | None = None,
    ) -> tuple[bool, Ended]:
        """Retry later (backoff with full jitter, or ``not_before`` if later) or bury.

        A request past its retry budget, or one with ``retry`` False, goes to the DLQ. The
        report's attempt is recorded with outcome ``retry`` or ``dead`` to match, or with
        ``outcome`` either way when given (``mismatch``). Returns whether the request will be
        retried, and the lease end.
        """
        attempt = lease.request.attempt
        if not retry or attempt >= self.retry_policy.max_retries:
            dead = _with_outcome(report, outcome or Outcome.DEAD)
            return False, await self._store.bury(lease, error, now, dead)
        wait_s = backoff_s(
            attempt, base_s=self.retry_policy.base_s, max_s=self.retry_policy.max_s, rng=self._rng
        )
        again = _with_outcome(report, outcome or Outcome.RETRY)
        due = max(now + wait_s, not_before)
        return True, await self._store.retry(lease, due, error, again)

    async def reap(self, now: float) -> int:
        """Count leases expired before ``now`` as failed attempts (see ``QueueStore.reap``)."""
        return await self._store.reap(now, self.retry_policy.max_retries)

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        """Add counters that belong to no lease (links of no page, sitemap entries)."""
        await self._store.add_counters(domain, counters)

    async def robots_delay(self, origin: str, crawl_delay_s: float | None) -> None:
        """Record what a read of ``origin``'s robots.txt says of its domain's delay, for every
        process: its ``Crawl-delay`` (never below the default), or, without one, the default
        again where an earlier robots.txt had set the delay.

        A ``Crawl-delay`` over ``max_crawl_delay_s`` is cut to it, with a warning and the
        source ``robots-capped``. An override from the config is kept (the store ignores
        robots over it).
        """
        default = self.default_policy
        domain = self.rules.politeness_key(f"{origin}/")
        if crawl_delay_s is None:
            view = await self._store.domain(domain)
            if view.delay_source.from_robots:
                await self._store.set_delay(domain, default.delay_s, DelaySource.CONFIG)
            return
        source = DelaySource.ROBOTS
        if crawl_delay_s > default.max_crawl_delay_s:
            source = DelaySource.ROBOTS_CAPPED
            logger.warning(
                "%s/robots.txt asks for a Crawl-delay of %g s; waiting %g s "
                "(max_crawl_delay_s: raise it to honour the site's delay)",
                origin,
                crawl_delay_s,
                default.max_crawl_delay_s,
            )
        delay_s = max(default.delay_s, min(crawl_delay_s, default.max_crawl_delay_s))
        await self._store.set_delay(domain, delay_s, source)

    async def apply_overrides(self, overrides: Mapping[str, PolitenessOverride]) -> None:
        """Write per-domain delays and concurrency caps from the config into the store.

        Keys are hosts; with the ``domain`` politeness key two hosts of one registrable
        domain cannot both be given (``ConfigError``).
        """
        by_key: dict[str, str] = {}
        for host, override in overrides.items():
            key = self.rules.politeness_key(f"http://{host}/")
            if key in by_key:
                raise ConfigError(
                    f"bad setting 'domains': {by_key[key]!r} and {host!r} share the "
                    f"politeness key {key!r}"
                )
            by_key[key] = host
            if override.delay_s is not None:
                await self._store.set_delay(key, override.delay_s, DelaySource.OVERRIDE)
            if override.concurrency is not None:
                await self._store.set_concurrency(key, override.concurrency)

    async def start(self, now: float) -> None:
        """Record the crawl's start (once) and apply the config's per-domain overrides."""
        await self._store.start(now)
        await self.apply_overrides(self.overrides)

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        """See ``QueueStore.next_ready_at``."""
        return await self._store.next_ready_at(now, kinds)

    async def counts(self) -> QueueCounts:
        return await self._store.counts()

    async def stats(self) -> CrawlStats:
        return await self._store.stats()

    async def domain(self, domain: str) -> DomainView:
        return await self._store.domain(domain)

    async def domains(self, limit: int = 100) -> list[DomainView]:
        return await self._store.domains(limit)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        """See ``QueueStore.pending_attempts``."""
        return await self._store.pending_attempts(limit)

    async def ack_attempts(self, count: int) -> None:
        await self._store.ack_attempts(count)

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        """See ``QueueStore.remember``."""
        await self._store.remember(request, visit)

    async def visit(self, fingerprint: str) -> Visit | None:
        return await self._store.visit(fingerprint)

    async def revisit(self, now: float) -> int:
        """Queue every known URL due by ``now`` again (``QueueStore.revisit``, in batches of
        ``REVISIT_BATCH``: each batch clears the due times it looked at, so this ends)."""
        total = 0
        while True:
            total += await self._store.revisit(now, REVISIT_BATCH)
            due = await self._store.next_visit_at()
            if due is None or due > now:
                return total

    async def next_visit_at(self) -> float | None:
        return await self._store.next_visit_at()

    async def expedite(self, request: CrawlRequest, modified_at: float, now: float) -> bool:
        """Make a known URL due at ``now`` when its sitemap ``<lastmod>`` (``modified_at``) is
        after its last visit; whether it was moved up."""
        visit = await self._store.visit(request.fingerprint)
        if visit is None or modified_at <= visit.visited_at or visit.next_at <= now:
            return False
        await self._store.remember(request, replace(visit, next_at=now))
        return True

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return await self._store.dead_letters(limit, offset)

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._store.requeue_dead(fingerprints)

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._store.purge_dead(fingerprints)

    async def close(self) -> None:
        await self._store.close()


def _with_outcome(report: Report, outcome: Outcome) -> Report:
    if report.attempt.outcome is outcome:
        return report
    return replace(report, attempt=replace(report.attempt, outcome=outcome))

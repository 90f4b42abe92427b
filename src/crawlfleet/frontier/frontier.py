"""The frontier: URLs in (canonical, in scope, deduplicated), due work out, outcomes back.

It wraps a ``QueueStore`` with the crawl's URL rules, scope, budget and retry policy. Every
runtime (the local asyncio loop, a Celery task) talks to the store through this class.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crawlfleet.errors import BadUrl
from crawlfleet.frontier.politeness import backoff_s
from crawlfleet.frontier.protocols import Budget, DomainPolicy, QueueStore
from crawlfleet.frontier.scope import Scope
from crawlfleet.models import CrawlRequest, Lease, Link
from crawlfleet.urls import UrlRules, fingerprint


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how late a failed request is tried again."""

    max_retries: int
    base_s: float
    max_s: float


@dataclass(frozen=True, slots=True)
class Admission:
    """What became of a batch of URLs offered to the frontier."""

    requests: list[CrawlRequest]
    rejected: list[tuple[str, str]]
    admitted: int


class Frontier:
    """URL manager and scheduler for one crawl, over any ``QueueStore``."""

    def __init__(
        self,
        store: QueueStore,
        *,
        rules: UrlRules,
        scope: Scope,
        budget: Budget,
        default_policy: DomainPolicy,
        retry: RetryPolicy,
        lease_s: float,
        max_redirects: int = 10,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.rules = rules
        self.scope = scope
        self.budget = budget
        self.default_policy = default_policy
        self.retry_policy = retry
        self.lease_s = lease_s
        self.max_redirects = max_redirects
        self._rng = rng or random.Random()

    def requests_for(
        self, links: Iterable[Link | str], parent: CrawlRequest | None
    ) -> tuple[list[CrawlRequest], list[tuple[str, str]]]:
        """Canonical in-scope requests for the links, and (url, reason) for the rest."""
        depth = parent.depth + 1 if parent is not None else 0
        parent_url = parent.url if parent is not None else None
        requests: list[CrawlRequest] = []
        rejected: list[tuple[str, str]] = []
        canonical = self.rules.canonical
        reason_to_skip = self.scope.reason_to_skip
        for link in links:
            raw, priority, kind = (
                (link, 0, None)
                if isinstance(link, str)
                else (link.url, link.priority, link.fetcher)
            )
            try:
                url = canonical(raw)
            except BadUrl as exc:
                rejected.append((raw, str(exc)))
                continue
            reason = reason_to_skip(url, depth)
            if reason is not None:
                rejected.append((url, reason))
                continue
            requests.append(
                CrawlRequest(
                    url=url,
                    fingerprint=fingerprint(url),
                    domain=self.rules.politeness_key(url),
                    depth=depth,
                    priority=priority,
                    fetcher=kind or ("file" if url.startswith("file:") else "http"),
                    parent=parent_url,
                )
            )
        return requests, rejected

    async def add(self, requests: Sequence[CrawlRequest]) -> int:
        return await self.store.add(requests, self.budget) if requests else 0

    def redirect(self, parent: CrawlRequest, location: str) -> CrawlRequest | str:
        """The request a redirect leads to (same depth, one more hop), or why it is refused."""
        if parent.hops >= self.max_redirects:
            return f"too many redirects ({parent.hops + 1})"
        try:
            url = self.rules.canonical(location)
        except BadUrl as exc:
            return f"bad redirect: {exc}"
        reason = self.scope.reason_to_skip(url, parent.depth)
        if reason is not None:
            return f"redirect to {url} skipped: {reason}"
        return CrawlRequest(
            url=url,
            fingerprint=fingerprint(url),
            domain=self.rules.politeness_key(url),
            depth=parent.depth,
            priority=parent.priority,
            fetcher=parent.fetcher,
            parent=parent.url,
            hops=parent.hops + 1,
        )

    async def claim(self, limit: int, now: float) -> list[Lease]:
        return await self.store.claim(limit, now, self.lease_s, self.default_policy)

    async def complete(self, lease: Lease) -> bool:
        return await self.store.complete(lease)

    async def fail(self, lease: Lease, error: str, now: float, not_before: float = 0.0) -> bool:
        """Retry later (backoff with full jitter, or ``not_before`` if later) or bury.

        Returns True when the request will be retried, False when it went to the DLQ.
        """
        attempt = lease.request.attempt
        if attempt >= self.retry_policy.max_retries:
            await self.store.bury(lease, error, now)
            return False
        wait_s = backoff_s(
            attempt, base_s=self.retry_policy.base_s, max_s=self.retry_policy.max_s, rng=self._rng
        )
        await self.store.retry(lease, max(now + wait_s, not_before), error)
        return True

    async def reap(self, now: float) -> int:
        """Count leases expired before ``now`` as failed attempts (see ``QueueStore.reap``)."""
        return await self.store.reap(now, self.retry_policy.max_retries)

    async def set_delay(self, domain: str, delay_s: float) -> None:
        await self.store.set_policy(
            domain, DomainPolicy(delay_s=delay_s, max_in_flight=self.default_policy.max_in_flight)
        )

"""The frontier's storage port: what every request-queue backend must do.

A ``QueueStore`` keeps, for one crawl:

- the **seen filter** (every fingerprint ever admitted; exact or Bloom, per backend),
- **per-domain queues** ordered by priority (higher first) then by admission order,
- a **ready-time index** of domains: a domain is served only when ``now >= ready_at`` and its
  in-flight count is below its concurrency limit,
- **leases**: handed-out requests with an expiry; an expired lease counts as a failed attempt
  (``reap``), so a page that kills every worker ends in the dead-letter queue,
- **retries** (a request back in its queue with a not-before time) and the **dead-letter queue**,
- **budgets**: total and per-domain caps on admissions ever made (done, dead and purged
  requests still count), never on what is queued right now.

A request that goes back to its queue (retried, reaped, or requeued from the DLQ) keeps its
admission order: once due, it is served before requests of its priority admitted after it.

Each state change is atomic in the backend (a transaction in SQLite, a Lua script in Redis), so
every fingerprint is always in exactly one of: queued, leased, done, dead.
The in-memory, SQLite and Redis implementations pass the same contract tests
(``tests/contract/test_queue_store.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from crawlfleet.models import CrawlRequest, DeadLetter, Lease, QueueCounts

LEASE_EXPIRED = "lease expired (worker lost)"
"""The error ``reap`` records in the history of a request whose lease expired."""


@dataclass(frozen=True, slots=True)
class DomainPolicy:
    """How fast one domain may be hit: ``delay_s`` between claims, ``max_in_flight`` leases."""

    delay_s: float
    max_in_flight: int


@dataclass(frozen=True, slots=True)
class Budget:
    """Admission caps; None means unlimited."""

    max_total: int | None = None
    max_per_domain: int | None = None


class QueueStore(Protocol):
    """Request queue, seen filter, leases, retries, DLQ and domain scheduling for one crawl."""

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        """Admit the requests whose fingerprint was never seen, within the budget.

        The seen check-and-set is atomic: of two concurrent adds of one fingerprint exactly one
        admits it. A request refused by the budget is *not* marked seen. Returns how many
        were admitted. Duplicates within ``requests`` count once.
        """
        ...

    async def mark_seen(self, fingerprints: Sequence[str]) -> None:
        """Mark fingerprints seen without queueing them (redirect targets, skipped URLs)."""
        ...

    async def claim(
        self, limit: int, now: float, lease_s: float, default: DomainPolicy
    ) -> list[Lease]:
        """Hand out up to ``limit`` due requests, leased until ``now + lease_s``.

        Only domains with ``ready_at <= now`` and fewer than ``max_in_flight`` leases are
        served, each claim pushing the domain's ``ready_at`` to ``now + delay_s`` (its own
        policy if ``set_policy`` was called, else ``default``). Requests whose not-before time
        is in the future are skipped. An empty list does **not** mean the crawl is finished:
        see ``counts().pending`` and ``next_ready_at``.
        """
        ...

    async def complete(self, lease: Lease) -> bool:
        """Mark the leased request done. False if the lease is no longer current."""
        ...

    async def retry(self, lease: Lease, not_before: float, error: str) -> bool:
        """Put the request back in its queue with ``attempt + 1``, not due before ``not_before``.

        The error joins the request's history (shown when it is dead-lettered). False if the
        lease is no longer current.
        """
        ...

    async def bury(self, lease: Lease, error: str, now: float) -> bool:
        """Move the request to the dead-letter queue. False if the lease is no longer current."""
        ...

    async def reap(self, now: float, max_retries: int) -> int:
        """Count each lease that expired strictly before ``now`` as a failed attempt.

        The error ``LEASE_EXPIRED`` joins the request's history. A request with
        ``attempt >= max_retries`` goes to the dead-letter queue (``died_at`` = its lease's
        expiry), the rule ``Frontier.fail`` applies; any other goes back to its queue with
        ``attempt + 1``, due at once. Returns how many leases were reaped (both kinds); their
        tokens are no longer current.
        """
        ...

    async def set_policy(self, domain: str, policy: DomainPolicy) -> None:
        """Override the default politeness for one domain (robots.txt Crawl-delay, config)."""
        ...

    async def block(self, domain: str, until: float) -> None:
        """Serve nothing from ``domain`` before ``until`` (Retry-After); never shortens a block."""
        ...

    async def next_ready_at(self, now: float) -> float | None:
        """Earliest time a queued request may become claimable, never earlier than ``now``.

        The later of a domain's ``ready_at`` and its request's not-before time counts. Domains
        whose in-flight slots are full (as a claim found or left them) are left out until one
        of their leases ends or their policy changes, so None means nothing can become
        claimable before a lease ends, or nothing is queued: see ``counts().pending``.
        """
        ...

    async def counts(self) -> QueueCounts: ...

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        """A page of dead letters, oldest ``died_at`` first (admission order among equals)."""
        ...

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        """Move dead letters (all when None) back to their queues, due at once; how many.

        Each starts afresh: ``attempt`` 0 and an empty error history. Fingerprints that are
        not dead letters are skipped.
        """
        ...

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        """Forget dead letters (all when None); they stay seen. Returns how many."""
        ...

    async def close(self) -> None: ...

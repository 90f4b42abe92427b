"""The frontier's storage port: what every request-queue backend must do.

A ``QueueStore`` keeps, for one crawl:

- the **seen filter** (every fingerprint ever admitted; exact or Bloom, per backend),
- **per-domain queues** ordered by priority (higher first) then by admission order,
- a **ready-time index** of domains: a domain is served only when ``now >= ready_at`` and its
  in-flight count is below its concurrency limit,
- **leases**: handed-out requests with an expiry; expired leases go back to their queue,
- **retries** (a request back in its queue with a not-before time) and the **dead-letter queue**,
- **budgets**: total and per-domain admission caps.

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

    async def reap(self, now: float) -> int:
        """Return every request whose lease expired before ``now`` to its queue; how many."""
        ...

    async def set_policy(self, domain: str, policy: DomainPolicy) -> None:
        """Override the default politeness for one domain (robots.txt Crawl-delay, config)."""
        ...

    async def block(self, domain: str, until: float) -> None:
        """Serve nothing from ``domain`` before ``until`` (Retry-After); never shortens a block."""
        ...

    async def next_ready_at(self, now: float) -> float | None:
        """Earliest time a queued request may become claimable; None when nothing is queued."""
        ...

    async def counts(self) -> QueueCounts: ...

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]: ...

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        """Move dead letters (all when None) back to their queues with attempt 0; how many."""
        ...

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        """Forget dead letters (all when None); they stay seen. Returns how many."""
        ...

    async def close(self) -> None: ...

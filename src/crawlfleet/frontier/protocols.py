"""The frontier's storage port: what every request-queue backend must do.

A ``QueueStore`` keeps, for one crawl:

- the **seen filter** (every fingerprint ever admitted; exact or Bloom, per backend),
- **per-domain queues** ordered by priority (higher first) then by admission order, split
  into one **lane per fetcher kind** (``models.FETCHER_KINDS``): a claim names the kinds it
  can serve and never receives another kind's request, while the domain's politeness (ready
  time, in-flight count) is shared by all its lanes,
- a **ready-time index** of domains: a domain is served only when ``now >= ready_at`` and its
  in-flight count is below its concurrency limit,
- **leases**: handed-out requests with an expiry, extended (``renew``) while their step runs;
  an expired lease counts as a failed attempt (``reap``), so a page that kills every worker
  ends in the dead-letter queue,
- **retries** (a request back in its queue with a not-before time) and the **dead-letter queue**,
- **budgets**: total and per-domain caps on admissions ever made (done, dead and purged
  requests still count), never on what is queued right now,
- the **domain policy** of every domain (``DomainView``): base delay and where it came from,
  concurrency cap, block state (level, window of recent outcomes, cooldown, reason), the
  last Retry-After block, and the fetch strategy slot. Only the store changes it, in the
  same atomic step as the lease change that caused it, so every process sees one policy and
  nothing a process did not read (a robots ``Crawl-delay``) is ever written back over,
- **known URLs** (``Visit``): for a request that completed, the validators of its last 200
  (ETag, Last-Modified), its content hash and when it is due again. ``revisit`` moves a
  done request whose time has come back to its queue; the seen filter is not touched, so
  discovery of a known URL still admits nothing (decision 0014),
- the **drift tests** of the parsers with expectations, per (parser, domain)
  (``observe_drift``), in the domain's record beside its strategy slot, where a test that
  fires writes its mark,
- **statistics**: the counters of ``crawlfleet.counters``, per crawl and per domain, and the
  **attempt log** rows, both added in the same atomic step as the lease end they describe.

A request that goes back to its queue (retried, reaped, or requeued from the DLQ) keeps its
admission order: once due, it is served before requests of its priority admitted after it.

Each state change is atomic in the backend (a transaction in SQLite, a Lua script in Redis), so
every fingerprint is always in exactly one of: queued, leased, done, dead.
The in-memory, SQLite and Redis implementations pass the same contract tests
(``tests/contract/test_queue_store.py``).

``QueueStore`` is the union of five role protocols: ``RequestQueue`` (lanes and leases),
``DomainPolicies``, ``CrawlRecords`` (records and statistics), ``KnownUrls`` and
``DeadLetters``; what reads or acts on one role (the dead letters by class, for instance)
depends on that role alone.

The effective delay of a domain is ``base_delay_s * 2 ** block_level``; every lease end that
fetched something (any outcome but ``skipped``) also keeps the domain quiet for that delay
after ``attempt.at``, so gaps between responses and the next request are never shorter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest
from crawlfleet.frontier.store_types import (
    Budget,
    DelaySource,
    DomainPolicy,
    DomainView,
    Ended,
    Report,
    Visit,
)
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, DeadLetter, QueueCounts


class RequestQueue(Protocol):
    """Lanes and leases: admission through the seen filter and budgets, claims, lease ends,
    moves, renewals and reaping (the role of the crawl step and the claim loop)."""

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        """Admit the requests whose fingerprint was never seen, within the budget.

        The seen check-and-set is atomic: of two concurrent adds of one fingerprint exactly one
        admits it. A request refused by the budget is *not* marked seen, and is counted in its
        domain's statistics (``accounting.OVER_TOTAL``, ``OVER_DOMAIN``). Returns how many
        were admitted. Duplicates within ``requests`` count once. Each request joins the lane
        of its ``fetcher`` kind.
        """
        ...

    async def claim(
        self,
        limit: int,
        now: float,
        lease_s: float,
        kinds: Collection[str],
    ) -> list[Lease]:
        """Hand out up to ``limit`` due requests of the given fetcher ``kinds``.

        Leased until ``now + lease_s``. Only domains with ``ready_at <= now`` and fewer
        than their ``max_in_flight`` leases are served, each claim pushing the domain's
        ``ready_at`` to ``now + effective delay``. Requests whose not-before time is in the
        future are skipped. An empty list does **not** mean the crawl is finished: see
        ``counts().pending`` and ``next_ready_at``.
        """
        ...

    async def complete(self, lease: Lease, report: Report) -> Ended:
        """Mark the leased request done, recording ``report``; not current: nothing changes."""
        ...

    async def retry(self, lease: Lease, not_before: float, error: str, report: Report) -> Ended:
        """Put the request back in its queue with ``attempt + 1``, not due before ``not_before``.

        The error joins the request's history (shown when it is dead-lettered). Only this
        request waits: its domain's other requests are not delayed (unless ``report`` blocks
        the domain or escalates it).
        """
        ...

    async def bury(self, lease: Lease, error: str, now: float, report: Report) -> Ended:
        """Move the request to the dead-letter queue, recording ``report``."""
        ...

    async def move(self, lease: Lease, kind: str) -> bool:
        """Put the leased request in its domain's ``kind`` lane with fetcher ``kind``, due at
        once, in one atomic step: the lease ends, nothing is counted or logged, its retry
        count and history stay (the domain's strategy names a fetcher this process has not).

        False when the lease is not current (nothing changes).
        """
        ...

    async def renew(self, lease: Lease, expires_at: float) -> bool:
        """Extend a current lease to ``expires_at``; a lease is never shortened.

        False when the lease is no longer current (it ended, or was reaped and perhaps handed
        out again): the step holding it has lost it, and its end will be refused. A lease
        that expired but was not reaped yet is still current and is extended.
        """
        ...

    async def reap(self, now: float, max_retries: int) -> int:
        """Count each lease that expired strictly before ``now`` as a failed attempt.

        The error ``LEASE_EXPIRED`` (``store_types``) joins the request's history and an
        attempt (outcome retry or dead, no status, worker ``"?"``) is recorded with the
        ``lease_expired`` counter. A request with ``attempt >= max_retries`` goes to the
        dead-letter queue (``died_at`` = its lease's expiry), the rule ``Frontier.fail``
        applies; any other goes back to its queue with ``attempt + 1``, due at once. Returns
        how many leases were reaped (both kinds); their tokens are no longer current.
        """
        ...

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        """Earliest time a queued request of ``kinds`` may become claimable, never before ``now``.

        The later of a domain's ``ready_at`` and its request's not-before time counts. Domains
        whose in-flight slots are full (as a claim found or left them) are left out until one
        of their leases ends or their policy changes, so None means nothing can become
        claimable before a lease ends, or nothing is queued: see ``counts().pending``.
        """
        ...


class DomainPolicies(Protocol):
    """The domain policy of every domain: base delay, in-flight cap, fetch strategy, the
    drift tests of its parsers, and the view of a domain with its queue and statistics."""

    @property
    def default_policy(self) -> DomainPolicy:
        """The crawl-wide delay, in-flight cap and block rules of every domain without its
        own value; given when the store is opened (``runtime/backends.py``)."""
        ...

    async def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        """Set the domain's base delay; a ``ROBOTS`` value never replaces an ``OVERRIDE``.

        ``CONFIG`` puts the domain back on the crawl-wide delay (``default_policy.delay_s`` of
        the store reading it): ``delay_s`` is not kept.
        """
        ...

    async def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        """Set the domain's in-flight cap (a per-domain override); a parked domain is freed."""
        ...

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        """Replace the domain's fetch strategy slot (fetcher kind, proxy tier, ...)."""
        ...

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        """Feed ``page`` to ``parser``'s drift test on ``domain`` (``frontier/drift.py``);
        the test as this step left it.

        One atomic step, whichever process calls: the test is created at its first page,
        started over first when it fired and its drift mark is gone from the domain's
        strategy slot since (``resume``), and when this page makes it fire
        (``DriftTest.just_fired``) ``rule.mark`` is written into the strategy slot under
        ``drift.<parser>`` in the same step. The test is part of the domain's record:
        ``DomainView.drift`` shows it, and it lasts as long as the crawl's store.
        """
        ...

    async def domain(self, domain: str) -> DomainView:
        """The domain's policy, queue and statistics (defaults for an unknown domain)."""
        ...

    async def domains(self, limit: int = 100) -> list[DomainView]:
        """The ``limit`` domains with admissions, a policy or statistics; most admitted first."""
        ...


class CrawlRecords(Protocol):
    """Records and statistics: the state counts, the crawl's counters and start time, and the
    attempts waiting to be copied to an external attempt log."""

    async def counts(self) -> QueueCounts: ...

    async def start(self, now: float) -> None:
        """Record the crawl's start time, once (a resumed crawl keeps the first)."""
        ...

    async def stats(self) -> CrawlStats:
        """The crawl's counters (summed over its domains) and start time."""
        ...

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        """Add counters that belong to no lease (e.g. items written outside a crawl step)."""
        ...

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        """The oldest attempts still to be copied to an external attempt log, oldest first.

        A store that keeps its attempt log itself (SQLite) returns ``[]``. Attempts stay
        until ``ack_attempts``: a copier killed in between copies them again, so the copy
        must be idempotent (each attempt's ``(fingerprint, retry, at)`` is unique).
        """
        ...

    async def ack_attempts(self, count: int) -> None:
        """Forget the ``count`` oldest pending attempts (copied)."""
        ...


class KnownUrls(Protocol):
    """Known URLs: what the last visit of each fetched URL found, and revisits when due."""

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        """Keep ``visit`` as what is known of ``request``'s URL (replacing the last one).

        Written before the lease ends, so a crash in between only repeats the visit. The
        URL is due again at ``visit.next_at`` (never when infinite) once its request is done.
        """
        ...

    async def visit(self, fingerprint: str) -> Visit | None:
        """What is known of a fetched URL; None before its first ``remember``."""
        ...

    async def revisit(self, now: float, limit: int) -> int:
        """Queue again up to ``limit`` done requests whose ``next_at <= now``, earliest first.

        Each goes back to its lane with ``attempt`` 0 and its visit's priority, and stays
        known; its due time is cleared until its next ``remember``. A due URL whose request
        is queued, leased or dead is left alone (its due time is cleared too). Budgets are
        not charged: a revisit admits nothing new. Returns how many were queued.
        """
        ...

    async def next_visit_at(self) -> float | None:
        """The earliest due time among known URLs (maybe past), or None when none is due ever."""
        ...


class DeadLetters(Protocol):
    """The dead-letter queue: read a page of it, requeue or forget dead letters."""

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


class QueueStore(RequestQueue, DomainPolicies, CrawlRecords, KnownUrls, DeadLetters, Protocol):
    """Every role of one crawl's request queue (module doc): what ``Frontier`` owns.

    A caller that needs one role takes that role's protocol, not this one.
    """

    async def close(self) -> None: ...

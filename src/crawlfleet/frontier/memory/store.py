"""The in-memory ``QueueStore``: for tests, and the reference model of the contract.

Each request is an ``Entry`` in one ``EntryState`` (queued, leased, done, dead), counted per
state; every method moves entries between states and keeps the counts, the domain schedule
and the statistics in step. Queued entries wait in their lane (``lanes.py``) and
``DomainSchedule`` picks the lanes; current leases and their expiries are in ``Leases``
(``leases.py``), known URLs and their due times in ``Visits`` (``known.py``); attempts wait
in a list for ``pending_attempts``. Lease tokens are ``"{fingerprint}:{n}"`` where ``n``
counts the hand-outs of that fingerprint, so a token from an earlier hand-out is
recognisably stale. Nothing survives the process.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from itertools import islice

from crawlfleet import counters
from crawlfleet.counters import Counters, CrawlStats
from crawlfleet.frontier import policy
from crawlfleet.frontier.accounting import (
    OVER_DOMAIN,
    OVER_TOTAL,
    expired_attempt,
    expired_counters,
    report_counters,
)
from crawlfleet.frontier.domains import DomainSchedule, DomainState
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest, observe_in
from crawlfleet.frontier.memory.known import Visits
from crawlfleet.frontier.memory.lanes import Lanes
from crawlfleet.frontier.memory.leases import Leases
from crawlfleet.frontier.store_types import (
    LEASE_EXPIRED,
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


class EntryState(Enum):
    QUEUED = 0
    LEASED = 1
    DONE = 2
    DEAD = 3


@dataclass(slots=True)
class Entry:
    request: CrawlRequest
    seq: int
    state: EntryState = EntryState.QUEUED
    not_before: float = 0.0
    hand_outs: int = 0
    token: str | None = None
    errors: list[str] = field(default_factory=list)
    died_at: float = 0.0


class MemoryQueueStore:
    """``QueueStore`` in plain Python structures; every method is atomic (no awaits inside).

    ``policy``: the crawl's default domain policy.
    """

    def __init__(self, *, policy: DomainPolicy) -> None:
        self._policy = policy
        self._lanes = Lanes()
        self._schedule = DomainSchedule(self._lanes.earliest)
        self._seen: set[str] = set()
        self._entries: dict[str, Entry] = {}
        self._leases = Leases()
        self._dead: set[str] = set()
        self._counts = dict.fromkeys(EntryState, 0)
        self._admitted = 0
        self._seq = 0
        self._crawl_counters: Counters = {}
        self._started_at: float | None = None
        self._attempts: deque[Attempt] = deque()
        self._known = Visits()

    @property
    def default_policy(self) -> DomainPolicy:
        return self._policy

    def _push(self, entry: Entry, not_before: float) -> None:
        """Queue an entry (already counted nowhere) in its lane, due from ``not_before``."""
        request = entry.request
        entry.not_before = not_before
        self._lanes.push(request, entry.seq, not_before)
        entry.state = EntryState.QUEUED
        self._counts[EntryState.QUEUED] += 1
        domain = self._schedule.get(request.domain)
        self._schedule.enqueued(domain, request.fetcher, 1, not_before)

    def _count(self, domain: str, added: Mapping[str, float]) -> None:
        counters.merge(self._crawl_counters, added)
        counters.merge(self._schedule.get(domain).counters, added)

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        admitted = 0
        over: list[tuple[str, str]] = []  # (domain, counter) of each request the budget refused
        for request in requests:
            fp = request.fingerprint
            if fp in self._seen:
                continue
            if budget.max_total is not None and self._admitted >= budget.max_total:
                over.append((request.domain, OVER_TOTAL))
                continue
            known = self._schedule.domains.get(request.domain)
            in_domain = 0 if known is None else known.admitted
            if budget.max_per_domain is not None and in_domain >= budget.max_per_domain:
                over.append((request.domain, OVER_DOMAIN))
                continue
            domain = self._schedule.get(request.domain)
            self._seen.add(fp)
            self._seq += 1
            self._entries[fp] = Entry(request, self._seq)
            self._push(self._entries[fp], 0.0)
            self._admitted += 1
            domain.admitted += 1
            admitted += 1
        for name, counter in over:
            self._count(name, {counter: 1})
        return admitted

    def _take(self, domain: str, kind: str, now: float) -> tuple[Entry, float] | None:
        fp = self._lanes.take(domain, kind, now, self._priority)
        if fp is None:
            return None
        entry = self._entries[fp]
        return entry, entry.not_before

    def _priority(self, fingerprint: str) -> int:
        return self._entries[fingerprint].request.priority

    async def claim(
        self,
        limit: int,
        now: float,
        lease_s: float,
        kinds: Collection[str],
    ) -> list[Lease]:
        leases: list[Lease] = []
        expires_at = now + lease_s
        picked = self._schedule.claim(limit, now, self._policy, kinds, self._take)
        for _domain, entry in picked:
            entry.hand_outs += 1
            token = f"{entry.request.fingerprint}:{entry.hand_outs}"
            entry.token = token
            entry.state = EntryState.LEASED
            self._leases.grant(token, entry.request.fingerprint, expires_at)
            leases.append(Lease(entry.request, token, expires_at))
        self._counts[EntryState.QUEUED] -= len(leases)
        self._counts[EntryState.LEASED] += len(leases)
        return leases

    def _release(self, token: str) -> tuple[Entry, DomainState] | None:
        """End a current lease (None if stale), freeing its domain slot."""
        fingerprint = self._leases.end(token)
        if fingerprint is None:
            return None
        return self._free(fingerprint)

    def _free(self, fingerprint: str) -> tuple[Entry, DomainState]:
        """The entry of a lease just ended, counted out of the leased, its domain slot freed."""
        entry = self._entries[fingerprint]
        entry.token = None
        self._counts[EntryState.LEASED] -= 1
        domain = self._schedule.get(entry.request.domain)
        self._schedule.lease_ended(domain)
        return entry, domain

    def _record(self, domain: DomainState, report: Report, default: DomainPolicy) -> Ended:
        """Counters, attempt, rest and block window of a current lease's end."""
        self._count(domain.name, report_counters(report))
        self._attempts.append(report.attempt)
        ready_at, change = policy.end_lease(
            domain.record, domain.name, domain.ready_at, report, default
        )
        self._schedule.rest(domain, ready_at)
        return Ended(True, change)

    async def complete(self, lease: Lease, report: Report) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.state = EntryState.DONE
        entry.errors.clear()
        self._counts[EntryState.DONE] += 1
        if report.visit is not None:
            await self.remember(entry.request, report.visit)
        return self._record(domain, report, self._policy)

    async def retry(self, lease: Lease, not_before: float, error: str, report: Report) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.errors.append(error)
        entry.request = replace(entry.request, attempt=entry.request.attempt + 1)
        self._push(entry, not_before)
        return self._record(domain, report, self._policy)

    async def bury(self, lease: Lease, error: str, now: float, report: Report) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.errors.append(error)
        self._kill(entry, now)
        return self._record(domain, report, self._policy)

    def _kill(self, entry: Entry, died_at: float) -> None:
        """Move a released entry (its error already recorded) to the dead-letter queue."""
        entry.state = EntryState.DEAD
        entry.died_at = died_at
        self._dead.add(entry.request.fingerprint)
        self._counts[EntryState.DEAD] += 1

    async def move(self, lease: Lease, kind: str) -> bool:
        released = self._release(lease.token)
        if released is None:
            return False
        entry, _domain = released
        entry.request = replace(entry.request, fetcher=kind)
        self._push(entry, 0.0)
        return True

    async def renew(self, lease: Lease, expires_at: float) -> bool:
        return self._leases.renew(lease.token, expires_at)

    async def reap(self, now: float, max_retries: int) -> int:
        reaped = 0
        while (expired := self._leases.pop_expired(now)) is not None:
            fingerprint, expires_at = expired
            entry, _domain = self._free(fingerprint)
            entry.errors.append(LEASE_EXPIRED)
            dies = entry.request.attempt >= max_retries
            attempt = expired_attempt(entry.request, dies, expires_at)
            self._attempts.append(attempt)
            self._count(attempt.domain, expired_counters(attempt))
            if dies:
                self._kill(entry, expires_at)
            else:
                entry.request = replace(entry.request, attempt=entry.request.attempt + 1)
                self._push(entry, 0.0)
            reaped += 1
        return reaped

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        return self._schedule.next_ready_at(now, kinds)

    async def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        state = self._schedule.get(domain)
        if policy.set_delay(state.record, delay_s, source):
            self._schedule.unpark(state)

    async def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        state = self._schedule.get(domain)
        state.record.max_in_flight = max_in_flight
        self._schedule.unpark(state)

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        self._schedule.get(domain).record.strategy = dict(strategy)

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        record = self._schedule.get(domain).record
        return observe_in(record.drift, record.strategy, parser, page, rule)

    async def domain(self, domain: str) -> DomainView:
        return self._schedule.view(domain, self._policy)

    async def domains(self, limit: int = 100) -> list[DomainView]:
        return self._schedule.views(self._policy, limit)

    async def counts(self) -> QueueCounts:
        c = self._counts
        return QueueCounts(
            queued=c[EntryState.QUEUED],
            leased=c[EntryState.LEASED],
            done=c[EntryState.DONE],
            dead=c[EntryState.DEAD],
            seen=len(self._seen),
        )

    async def start(self, now: float) -> None:
        if self._started_at is None:
            self._started_at = now

    async def stats(self) -> CrawlStats:
        return CrawlStats(dict(self._crawl_counters), self._started_at)

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        if counters:
            self._count(domain, counters)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        return list(islice(self._attempts, limit))

    async def ack_attempts(self, count: int) -> None:
        for _ in range(min(count, len(self._attempts))):
            self._attempts.popleft()

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        self._known.remember(request.fingerprint, visit)

    async def visit(self, fingerprint: str) -> Visit | None:
        return self._known.get(fingerprint)

    async def revisit(self, now: float, limit: int) -> int:
        moved = 0
        while moved < limit and (due := self._known.pop_due(now)) is not None:
            fp, visit = due
            entry = self._entries.get(fp)
            if entry is None or entry.state is not EntryState.DONE:
                continue
            self._counts[EntryState.DONE] -= 1
            entry.request = replace(entry.request, attempt=0, priority=visit.priority)
            self._push(entry, 0.0)
            moved += 1
        return moved

    async def next_visit_at(self) -> float | None:
        return self._known.next_at()

    def _dead_entries(self, fingerprints: Sequence[str] | None) -> list[Entry]:
        chosen = self._dead if fingerprints is None else self._dead.intersection(fingerprints)
        return sorted((self._entries[fp] for fp in chosen), key=lambda e: (e.died_at, e.seq))

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return [
            DeadLetter(e.request, tuple(e.errors), e.died_at)
            for e in self._dead_entries(None)[offset : offset + limit]
        ]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        entries = self._dead_entries(fingerprints)
        for entry in entries:
            self._dead.discard(entry.request.fingerprint)
            self._counts[EntryState.DEAD] -= 1
            entry.errors.clear()
            entry.request = replace(entry.request, attempt=0)
            self._push(entry, 0.0)
        return len(entries)

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        entries = self._dead_entries(fingerprints)
        for entry in entries:
            self._dead.discard(entry.request.fingerprint)
            del self._entries[entry.request.fingerprint]
        self._counts[EntryState.DEAD] -= len(entries)
        return len(entries)

    async def close(self) -> None:
        """Nothing to release; the state is dropped with the object."""

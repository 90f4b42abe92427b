"""The in-memory ``QueueStore``: for tests, and the reference model of the contract.

Every method moves entries between states and keeps the counts, the domain schedule and the
statistics in step. ``MemoryQueueStore`` holds the queue's moves (admission, claims, lease
ends, reaping) and the domain policy (this module) over its base ``MemoryRecords``
(``memory_records.py``: the entries and their states, counts, statistics, attempts, known
URLs and revisits, dead letters). Queued entries wait in their lane (``memory_lanes.py``) and
``DomainSchedule`` picks the lanes; current leases and their expiries are in ``Leases``
(``memory_leases.py``), known URLs and their due times in ``KnownUrls`` (``memory_known.py``).
Lease tokens are ``"{fingerprint}:{n}"`` where ``n`` counts the hand-outs of that
fingerprint, so a token from an earlier hand-out is recognisably stale. Nothing survives the
process.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from crawlfleet.frontier import domains, policy
from crawlfleet.frontier.accounting import (
    OVER_DOMAIN,
    OVER_TOTAL,
    expired_attempt,
    expired_counters,
    report_counters,
)
from crawlfleet.frontier.domains import DomainState
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest, observe_in
from crawlfleet.frontier.memory_records import Entry, EntryState, MemoryRecords
from crawlfleet.frontier.store_types import (
    LEASE_EXPIRED,
    Budget,
    DelaySource,
    DomainPolicy,
    DomainView,
    Ended,
    Report,
)
from crawlfleet.models import CrawlRequest, Lease


class MemoryQueueStore(MemoryRecords):
    """``QueueStore`` in plain Python structures; every method is atomic (no awaits inside)."""

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
        default: DomainPolicy,
        kinds: Collection[str],
    ) -> list[Lease]:
        leases: list[Lease] = []
        expires_at = now + lease_s
        picked = self._schedule.claim(limit, now, default, kinds, self._take)
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

    async def complete(self, lease: Lease, report: Report, default: DomainPolicy) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.state = EntryState.DONE
        entry.errors.clear()
        self._counts[EntryState.DONE] += 1
        if report.visit is not None:
            await self.remember(entry.request, report.visit)
        return self._record(domain, report, default)

    async def retry(
        self, lease: Lease, not_before: float, error: str, report: Report, default: DomainPolicy
    ) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.errors.append(error)
        entry.request = replace(entry.request, attempt=entry.request.attempt + 1)
        self._push(entry, not_before)
        return self._record(domain, report, default)

    async def bury(
        self, lease: Lease, error: str, now: float, report: Report, default: DomainPolicy
    ) -> Ended:
        released = self._release(lease.token)
        if released is None:
            return Ended(False)
        entry, domain = released
        entry.errors.append(error)
        self._kill(entry, now)
        return self._record(domain, report, default)

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

    async def domain(self, domain: str, default: DomainPolicy) -> DomainView:
        state = self._schedule.domains.get(domain)
        if state is None:
            state = DomainState(domain)
        return domains.view(state, default)

    async def domains(self, default: DomainPolicy, limit: int = 100) -> list[DomainView]:
        return [domains.view(state, default) for state in domains.busiest(self._schedule, limit)]

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        return self._schedule.next_ready_at(now, kinds)

    async def close(self) -> None:
        """Nothing to release; the state is dropped with the object."""

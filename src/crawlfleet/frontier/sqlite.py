"""The SQLite ``QueueStore``: the embedded crawl's resumable frontier.

The stdlib ``sqlite3`` runs synchronously inside the async methods: each call is well under a
millisecond, cheaper than a thread hop, and the lack of awaits makes every method atomic
within the event loop. A lease end writes its request row, its attempt row and its domain's
row (ready time, policy record, counters) together; the writes of one event-loop turn are
committed together when it ends (decision 0027), so a killed process loses at most that
turn's writes, as if it had died a turn earlier.

``SqliteQueueStore`` holds the lanes, leases and domain policy (this module) over its two
bases: ``SqliteRecords`` (``sqlite_records.py``: counts, statistics, attempts, known URLs
and revisits, dead letters) and ``SqliteStateFile`` (``sqlite_file.py``: ``open``, the
file's lock and transactions, the in-memory schedule and counts rebuilt from the tables).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from crawlfleet.counters import Counters, merge
from crawlfleet.frontier import domains, policy
from crawlfleet.frontier import sqlite_rows as rows
from crawlfleet.frontier import sqlite_statements as q
from crawlfleet.frontier.accounting import (
    OVER_DOMAIN,
    OVER_TOTAL,
    expired_attempt,
    expired_counters,
    report_counters,
)
from crawlfleet.frontier.domains import DomainState
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest, observe_in
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.sqlite_records import SqliteRecords
from crawlfleet.frontier.sqlite_retention import NEWEST
from crawlfleet.frontier.sqlite_schema import DEAD, DONE, LEASED, QUEUED
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


class SqliteQueueStore(SqliteRecords):
    """``QueueStore`` in one SQLite file; use ``await SqliteQueueStore.open(path)``."""

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        if not requests:
            return 0
        schedule = self._schedule
        prefilter = self._known
        with self._transaction() as db:
            taken = {r.fingerprint for r in requests if prefilter.seen(r.fingerprint)}
            unknown = [r.fingerprint for r in requests if r.fingerprint not in taken]
            if unknown:
                found = db.execute(q.FIND_SEEN, (orjson.dumps(unknown).decode(),))
                taken.update(row[0] for row in found)
            prefilter.add(taken)
            total = self._admitted
            per_domain: dict[str, int] = {}
            per_lane: dict[tuple[str, str], int] = {}
            over: dict[str, Counters] = {}  # what the budget refused, by domain
            new_rows = []
            for r in requests:
                if r.fingerprint in taken:
                    continue
                if budget.max_total is not None and total >= budget.max_total:
                    merge(over.setdefault(r.domain, {}), {OVER_TOTAL: 1})
                    continue
                count = per_domain.get(r.domain)
                if count is None:
                    known = schedule.domains.get(r.domain)
                    count = 0 if known is None else known.admitted
                if budget.max_per_domain is not None and count >= budget.max_per_domain:
                    merge(over.setdefault(r.domain, {}), {OVER_DOMAIN: 1})
                    continue
                taken.add(r.fingerprint)
                per_domain[r.domain] = count + 1
                lane = (r.domain, r.fetcher)
                per_lane[lane] = per_lane.get(lane, 0) + 1
                total += 1
                new_rows.append(rows.request_row(r))
            if not new_rows and not over:
                return 0
            if new_rows:
                db.executemany(q.INSERT_QUEUED, new_rows)
            counted: dict[str, Counters] = {}
            for name in per_domain.keys() | over.keys():
                state = schedule.get(name)
                if name in over:
                    counted[name] = dict(state.counters)
                    merge(counted[name], over[name])
                self._domain_changed(
                    state, admitted=per_domain.get(name), counters=counted.get(name)
                )
        for name, sums in counted.items():
            schedule.get(name).counters = sums
            merge(self._crawl_counters, over[name])
        prefilter.add(row[0] for row in new_rows)
        for name, admitted in per_domain.items():
            schedule.get(name).admitted = admitted
        for (name, kind), count in per_lane.items():
            schedule.enqueued(schedule.get(name), kind, count)
        self._admitted = total
        self._counts[QUEUED] += len(new_rows)
        return len(new_rows)

    async def claim(
        self,
        limit: int,
        now: float,
        lease_s: float,
        default: DomainPolicy,
        kinds: Collection[str],
    ) -> list[Lease]:
        if limit <= 0 or not self._schedule.has_due(now, kinds):
            return []
        expires_at = now + lease_s

        def take(domain: str, kind: str, at: float) -> tuple[Lease, float] | None:
            row = db.execute(q.TAKE, (domain, kind, at)).fetchone()
            if row is None:
                return None
            hand_outs = row[2] + 1
            db.execute(q.LEASE, (hand_outs, expires_at, row[0]))
            request = rows.request(row[3:])
            token = f"{request.fingerprint}:{hand_outs}"
            return Lease(request, token, expires_at), row[1]

        with self._transaction() as db:
            picked = self._schedule.claim(limit, now, default, kinds, take)
            for state, _ in picked:
                self._domain_changed(state)  # its ready_at moved
        leases = [lease for _, lease in picked]
        self._counts[QUEUED] -= len(leases)
        self._counts[LEASED] += len(leases)
        return leases

    def _end_lease(
        self,
        sql: str,
        params: tuple[Any, ...],
        lease: Lease,
        report: Report,
        default: DomainPolicy,
    ) -> tuple[Ended, DomainState]:
        """End a lease, with its report, in one transaction guarded by the token."""
        state = self._schedule.get(lease.request.domain)
        parsed = rows.parse_token(lease.token)
        if parsed is None:
            return Ended(False), state
        record = replace(state.record)
        ready_at, change = policy.end_lease(record, state.name, state.ready_at, report, default)
        added = report_counters(report)
        counted = dict(state.counters)
        merge(counted, added)
        with self._transaction() as db:
            if db.execute(sql, (*params, *parsed)).rowcount != 1:
                return Ended(False), state
            if report.visit is not None and sql == q.COMPLETE:
                db.execute(q.REMEMBER, (parsed[0], *rows.visit_row(report.visit)))
            written = db.execute(q.INSERT_ATTEMPT, rows.attempt_row(report.attempt))
            self._retention.written(db, written.lastrowid)
            self._domain_changed(state, ready_at=ready_at, counters=counted, record=record)
        state.record = record
        state.counters = counted
        merge(self._crawl_counters, added)
        self._counts[LEASED] -= 1
        self._schedule.rest(state, ready_at)
        self._schedule.lease_ended(state)
        return Ended(True, change), state

    async def complete(self, lease: Lease, report: Report, default: DomainPolicy) -> Ended:
        ended, _state = self._end_lease(q.COMPLETE, (), lease, report, default)
        if ended:
            self._counts[DONE] += 1
        return ended

    async def retry(
        self, lease: Lease, not_before: float, error: str, report: Report, default: DomainPolicy
    ) -> Ended:
        ended, state = self._end_lease(q.RETRY, (not_before, error), lease, report, default)
        if ended:
            self._schedule.enqueued(state, lease.request.fetcher, 1, not_before)
            self._counts[QUEUED] += 1
        return ended

    async def bury(
        self, lease: Lease, error: str, now: float, report: Report, default: DomainPolicy
    ) -> Ended:
        ended, _state = self._end_lease(q.BURY, (now, error), lease, report, default)
        if ended:
            self._counts[DEAD] += 1
        return ended

    async def move(self, lease: Lease, kind: str) -> bool:
        parsed = rows.parse_token(lease.token)
        if parsed is None:
            return False
        with self._transaction() as db:
            if db.execute(q.MOVE, (kind, *parsed)).rowcount != 1:
                return False
        state = self._schedule.get(lease.request.domain)
        self._counts[LEASED] -= 1
        self._counts[QUEUED] += 1
        self._schedule.lease_ended(state)
        self._schedule.enqueued(state, kind, 1)
        return True

    async def renew(self, lease: Lease, expires_at: float) -> bool:
        parsed = rows.parse_token(lease.token)
        if parsed is None:
            return False
        return self._execute(q.RENEW, (expires_at, *parsed)) == 1

    async def reap(self, now: float, max_retries: int) -> int:
        params = (now, max_retries, LEASE_EXPIRED)
        with self._transaction() as db:
            expired = [
                (rows.request(row), row[q.REQUEST_COLUMN_COUNT])
                for row in db.execute(q.EXPIRED, params[:1])
            ]
            if not expired:
                return 0
            db.execute(q.REAP_DEAD, params)
            db.execute(q.REAP, params)
            attempts = [expired_attempt(r, r.attempt >= max_retries, at) for r, at in expired]
            db.executemany(q.INSERT_ATTEMPT, [rows.attempt_row(a) for a in attempts])
            self._retention.written(db, db.execute(NEWEST).fetchone()[0], len(attempts))
            counted: dict[str, Counters] = {}
            for attempt in attempts:
                found = counted.get(attempt.domain)
                if found is None:
                    found = dict(self._schedule.get(attempt.domain).counters)
                    counted[attempt.domain] = found
                merge(found, expired_counters(attempt))
            for name, found in counted.items():
                self._domain_changed(self._schedule.get(name), counters=found)
        for attempt in attempts:
            merge(self._crawl_counters, expired_counters(attempt))
        for name, found in counted.items():
            self._schedule.get(name).counters = found
        schedule = self._schedule
        for request, _at in expired:
            state = schedule.get(request.domain)
            schedule.lease_ended(state)
            if request.attempt < max_retries:
                schedule.enqueued(state, request.fetcher, 1)
                self._counts[QUEUED] += 1
            else:
                self._counts[DEAD] += 1
        self._counts[LEASED] -= len(expired)
        return len(expired)

    def _save_policy(self, state: DomainState, record: PolicyRecord) -> None:
        with self._transaction():
            self._domain_changed(state, record=record)
        state.record = record
        self._schedule.unpark(state)

    async def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        state = self._schedule.get(domain)
        record = replace(state.record)
        if policy.set_delay(record, delay_s, source):
            self._save_policy(state, record)

    async def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        state = self._schedule.get(domain)
        self._save_policy(state, replace(state.record, max_in_flight=max_in_flight))

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        state = self._schedule.get(domain)
        self._save_policy(state, replace(state.record, strategy=dict(strategy)))

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        state = self._schedule.get(domain)
        tests = {name: test.copy() for name, test in state.record.drift.items()}
        record = replace(state.record, strategy=dict(state.record.strategy), drift=tests)
        test = observe_in(record.drift, record.strategy, parser, page, rule)
        with self._transaction():
            self._domain_changed(state, record=record)
        state.record = record
        return test

    async def domain(self, domain: str, default: DomainPolicy) -> DomainView:
        state = self._schedule.domains.get(domain)
        if state is None:
            state = DomainState(domain)
        return domains.view(state, default)

    async def domains(self, default: DomainPolicy, limit: int = 100) -> list[DomainView]:
        return [domains.view(state, default) for state in domains.busiest(self._schedule, limit)]

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        return self._schedule.next_ready_at(now, kinds)

"""The SQLite ``QueueStore``: the embedded crawl's resumable frontier.

The stdlib ``sqlite3`` runs synchronously inside the async methods: each call is well under a
millisecond, cheaper than a thread hop, and the lack of awaits makes every method atomic
within the event loop. A lease end writes its request row, its attempt row and its domain's
row (ready time, policy record, counters) together; the writes of one event-loop turn are
committed together when it ends, or with the next turns' within 0.1 s (decisions 0027, 0065),
so a killed process loses at most those writes, as if it had died that much earlier.

The store writes through its ``StateFile`` (``file.py``: the connection, its lock and the
turns) and keeps what the file's lock lets it keep in memory: the per-domain schedule
(``DomainSchedule``: ready times, in-flight and queued counts per lane, policy records,
statistics counters), the state counts and a prefilter of seen fingerprints, rebuilt from
the tables (``schema.py``) by ``open``. ``revisit`` and ``requeue_dead`` put requests back
into their lanes: the rows in one transaction, then the schedule and counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.counters import Counters, CrawlStats, merge
from crawlfleet.errors import StateError
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
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.recent import SEEN_PREFILTER_CAPACITY, RecentSet
from crawlfleet.frontier.sqlite import rows
from crawlfleet.frontier.sqlite import statements as q
from crawlfleet.frontier.sqlite.file import StateFile
from crawlfleet.frontier.sqlite.retention import NEWEST, AttemptRetention
from crawlfleet.frontier.sqlite.schema import DEAD, DONE, LEASED, QUEUED, SEEN, open_queue_db
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
from crawlfleet.sqlite_turns import TurnWriter


class SqliteQueueStore:
    """``QueueStore`` in one SQLite file; use ``await SqliteQueueStore.open(path)``.

    ``policy``: the crawl's default domain policy (the file keeps only each domain's own
    values). ``keep_attempts``: the attempt log keeps its newest rows, this many
    (``retention.py``; None keeps every row).
    """

    def __init__(
        self, file: StateFile, *, policy: DomainPolicy, keep_attempts: int | None = None
    ) -> None:
        self.path = file.path
        self._policy = policy
        self._file = file
        self._db = file.db
        self._retention = AttemptRetention(keep_attempts)
        self._known = RecentSet(SEEN_PREFILTER_CAPACITY)
        self._schedule = DomainSchedule(file.earliest)
        self._counts = dict.fromkeys((QUEUED, LEASED, DONE, DEAD, SEEN), 0)
        self._admitted = 0
        self._crawl_counters: Counters = {}
        self._load()

    @classmethod
    async def open(
        cls, path: Path, *, policy: DomainPolicy, keep_attempts: int | None = None
    ) -> SqliteQueueStore:
        """Open (creating or migrating if needed) the state file.

        StateError if the file is corrupt, foreign, of a newer schema or locked.
        """
        db, lock = open_queue_db(path)
        try:
            return cls(StateFile(path, db, lock), policy=policy, keep_attempts=keep_attempts)
        except sqlite3.Error as exc:
            db.close()
            lock.release()
            raise StateError(f"state file {path} cannot be read: {exc}") from None

    @property
    def default_policy(self) -> DomainPolicy:
        return self._policy

    def _load(self) -> None:
        db, schedule = self._db, self._schedule
        for state, count in db.execute(q.COUNT_BY_STATE):
            self._counts[state] = count
        for name, ready_at, admitted, found, *record in db.execute(q.LOAD_DOMAINS):
            domain = schedule.get(name)
            domain.ready_at = ready_at
            domain.admitted = admitted
            domain.record = rows.record(record)
            domain.counters = orjson.loads(found)
            merge(self._crawl_counters, domain.counters)
            self._admitted += admitted
        for name, count in db.execute(q.LOAD_LEASED):
            schedule.get(name).in_flight = count
        for name, kind, count, delayed, not_before in db.execute(q.LOAD_QUEUED):
            domain = schedule.get(name)
            if count > delayed:
                schedule.enqueued(domain, kind, count - delayed)
            if delayed:
                schedule.enqueued(domain, kind, delayed, not_before)

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        if not requests:
            return 0
        schedule = self._schedule
        prefilter = self._known
        with self._file.transaction() as db:
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
                self._file.domain_changed(
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

        with self._file.transaction() as db:
            picked = self._schedule.claim(limit, now, self._policy, kinds, take)
            for state, _ in picked:
                self._file.domain_changed(state)  # its ready_at moved
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
        with self._file.transaction() as db:
            if db.execute(sql, (*params, *parsed)).rowcount != 1:
                return Ended(False), state
            if report.visit is not None and sql == q.COMPLETE:
                db.execute(q.REMEMBER, (parsed[0], *rows.visit_row(report.visit)))
            written = db.execute(q.INSERT_ATTEMPT, rows.attempt_row(report.attempt))
            self._retention.written(db, written.lastrowid)
            self._file.domain_changed(state, ready_at=ready_at, counters=counted, record=record)
        state.record = record
        state.counters = counted
        merge(self._crawl_counters, added)
        self._counts[LEASED] -= 1
        self._schedule.rest(state, ready_at)
        self._schedule.lease_ended(state)
        return Ended(True, change), state

    async def complete(self, lease: Lease, report: Report) -> Ended:
        ended, _state = self._end_lease(q.COMPLETE, (), lease, report, self._policy)
        if ended:
            self._counts[DONE] += 1
        return ended

    async def retry(self, lease: Lease, not_before: float, error: str, report: Report) -> Ended:
        ended, state = self._end_lease(q.RETRY, (not_before, error), lease, report, self._policy)
        if ended:
            self._schedule.enqueued(state, lease.request.fetcher, 1, not_before)
            self._counts[QUEUED] += 1
        return ended

    async def bury(self, lease: Lease, error: str, now: float, report: Report) -> Ended:
        ended, _state = self._end_lease(q.BURY, (now, error), lease, report, self._policy)
        if ended:
            self._counts[DEAD] += 1
        return ended

    async def move(self, lease: Lease, kind: str) -> bool:
        parsed = rows.parse_token(lease.token)
        if parsed is None:
            return False
        with self._file.transaction() as db:
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
        return self._file.execute(q.RENEW, (expires_at, *parsed)) == 1

    async def reap(self, now: float, max_retries: int) -> int:
        params = (now, max_retries, LEASE_EXPIRED)
        with self._file.transaction() as db:
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
                self._file.domain_changed(self._schedule.get(name), counters=found)
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
        with self._file.transaction():
            self._file.domain_changed(state, record=record)
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
        with self._file.transaction():
            self._file.domain_changed(state, record=record)
        state.record = record
        return test

    async def domain(self, domain: str) -> DomainView:
        return self._schedule.view(domain, self._policy)

    async def domains(self, limit: int = 100) -> list[DomainView]:
        return self._schedule.views(self._policy, limit)

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        return self._schedule.next_ready_at(now, kinds)

    async def counts(self) -> QueueCounts:
        c = self._counts
        return QueueCounts(
            queued=c[QUEUED],
            leased=c[LEASED],
            done=c[DONE],
            dead=c[DEAD],
            seen=sum(c.values()),
        )

    async def start(self, now: float) -> None:
        self._file.execute(q.START, (now,))

    async def stats(self) -> CrawlStats:
        started = self._db.execute(q.STARTED_AT).fetchone()
        return CrawlStats(dict(self._crawl_counters), None if started is None else started[0])

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        if not counters:
            return
        state = self._schedule.get(domain)
        counted = dict(state.counters)
        merge(counted, counters)
        with self._file.transaction():
            self._file.domain_changed(state, counters=counted)
        state.counters = counted
        merge(self._crawl_counters, counters)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        """Nothing: the attempts are already in the state file's ``attempts`` table."""
        return []

    async def ack_attempts(self, count: int) -> None:
        """Nothing to forget: no attempt is ever pending (``pending_attempts``)."""

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        self._file.execute(q.REMEMBER, (request.fingerprint, *rows.visit_row(visit)))

    async def visit(self, fingerprint: str) -> Visit | None:
        row = self._db.execute(q.VISIT, (fingerprint,)).fetchone()
        return None if row is None else rows.visit(row)

    async def revisit(self, now: float, limit: int) -> int:
        if limit <= 0:
            return 0
        per_lane: dict[tuple[str, str], int] = {}
        with self._file.transaction() as db:
            for fp, priority, state, domain, kind in db.execute(q.DUE, (now, limit)).fetchall():
                db.execute(q.CLEAR_DUE, (fp,))
                if state == DONE and db.execute(q.REQUEUE_DONE, (priority, fp)).rowcount:
                    per_lane[(domain, kind)] = per_lane.get((domain, kind), 0) + 1
        for (name, kind), count in per_lane.items():
            self._schedule.enqueued(self._schedule.get(name), kind, count)
        moved = sum(per_lane.values())
        self._counts[DONE] -= moved
        self._counts[QUEUED] += moved
        return moved

    async def next_visit_at(self) -> float | None:
        value: float | None = self._db.execute(q.NEXT_VISIT).fetchone()[0]
        return value

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        found = self._db.execute(q.DEAD_LETTERS, (limit, offset)).fetchall()
        return [rows.dead_letter(row) for row in found]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        selection = (rows.json_or_null(fingerprints),)
        with self._file.transaction() as db:
            by_lane = db.execute(q.DEAD_BY_LANE, selection).fetchall()
            if by_lane:
                db.execute(q.REQUEUE_DEAD, selection)
        for name, kind, count in by_lane:
            self._schedule.enqueued(self._schedule.get(name), kind, count)
        moved: int = sum(row[2] for row in by_lane)
        self._counts[DEAD] -= moved
        self._counts[QUEUED] += moved
        return moved

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        purged = self._file.execute(q.PURGE_DEAD, (rows.json_or_null(fingerprints),))
        self._counts[DEAD] -= purged
        self._counts[SEEN] += purged
        return purged

    def commit_after(self, first: TurnWriter) -> None:
        """Commit each turn only after ``first``'s, and not at all if ``first`` failed (the
        items file's: a lease end is in the file only once its page's items are)."""
        self._file.commit_after(first)

    def commit_now(self) -> None:
        """Commit the writes waiting for their commit (at most 0.1 s of them, decision 0065)
        now, so that another connection of this process reads them; never raises."""
        self._file.commit_now()

    async def close(self) -> None:
        """Commit, close the file and release its lock; the store is unusable afterwards.

        StateError if that last commit fails.
        """
        self._file.close()

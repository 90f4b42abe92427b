"""The SQLite ``QueueStore``: the embedded crawl's resumable frontier.

The stdlib ``sqlite3`` runs synchronously inside the async methods: each call is well under a
millisecond, cheaper than a thread hop, and the lack of awaits makes every method atomic
within the event loop. Every method commits before it returns, so a killed process loses
nothing it was told about. The file is locked to this store (see ``sqlite_schema``), which
lets the per-domain schedule (ready times, in-flight and queued counts) and the state
counters live in memory, rebuilt from the tables by ``open``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawlfleet import sqlitedb
from crawlfleet.errors import StateError
from crawlfleet.frontier import sqlite_schema as q
from crawlfleet.frontier.domains import DomainSchedule, DomainState
from crawlfleet.frontier.protocols import LEASE_EXPIRED, Budget, DomainPolicy
from crawlfleet.models import CrawlRequest, DeadLetter, Lease, QueueCounts


def _request(row: Sequence[Any]) -> CrawlRequest:
    """A request from the ``REQUEST_COLUMNS`` at the start of ``row``."""
    fp, url, domain, depth, priority, attempt, fetcher, parent = row[:8]
    return CrawlRequest(url, fp, domain, depth, priority, attempt, fetcher, parent)


def _row(r: CrawlRequest) -> tuple[Any, ...]:
    """The ``REQUEST_COLUMNS`` of a request."""
    return (r.fingerprint, r.url, r.domain, r.depth, r.priority, r.attempt, r.fetcher, r.parent)


def _parse_token(token: str) -> tuple[str, int] | None:
    fp, _, n = token.rpartition(":")
    return (fp, int(n)) if fp and n.isdigit() else None


def _json_or_null(fingerprints: Sequence[str] | None) -> str | None:
    return None if fingerprints is None else json.dumps(list(fingerprints))


class SqliteQueueStore:
    """``QueueStore`` in one SQLite file; use ``await SqliteQueueStore.open(path)``."""

    def __init__(self, path: Path, db: sqlite3.Connection, lock: q.FileLock) -> None:
        self.path = path
        self._db = db
        self._lock = lock
        self._schedule = DomainSchedule()
        self._counts = dict.fromkeys((q.QUEUED, q.LEASED, q.DONE, q.DEAD, q.SEEN), 0)
        self._admitted = 0
        self._load()

    @classmethod
    async def open(cls, path: Path) -> SqliteQueueStore:
        """Open (creating if needed) the state file; StateError if corrupt, foreign or locked."""
        db, lock = q.open_queue_db(path)
        try:
            return cls(path, db, lock)
        except sqlite3.Error as exc:
            db.close()
            lock.release()
            raise StateError(f"state file {path} cannot be read: {exc}") from None

    def _load(self) -> None:
        db, schedule = self._db, self._schedule
        for state, count in db.execute(q.COUNT_BY_STATE):
            self._counts[state] = count
        for name, ready_at, admitted, delay_s, max_in_flight in db.execute(q.LOAD_DOMAINS):
            domain = schedule.get(name)
            domain.ready_at = ready_at
            domain.admitted = admitted
            self._admitted += admitted
            if delay_s is not None:
                domain.policy = DomainPolicy(delay_s, max_in_flight)
        for name, count in db.execute(q.LOAD_LEASED):
            schedule.get(name).in_flight = count
        for name, count, delayed, not_before in db.execute(q.LOAD_QUEUED):
            domain = schedule.get(name)
            if count > delayed:
                schedule.enqueued(domain, count - delayed)
            if delayed:
                schedule.enqueued(domain, delayed, not_before)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            with sqlitedb.write(self._db) as db:
                yield db
        except sqlite3.Error as exc:
            raise StateError(f"state file {self.path}: {exc}") from exc

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run one statement in its own transaction; how many rows it changed."""
        try:
            return self._db.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise StateError(f"state file {self.path}: {exc}") from exc

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        if not requests:
            return 0
        schedule = self._schedule
        with self._transaction() as db:
            fps = json.dumps([r.fingerprint for r in requests])
            taken = {row[0] for row in db.execute(q.FIND_SEEN, (fps,))}
            total = self._admitted
            per_domain: dict[str, int] = {}
            rows = []
            for r in requests:
                if r.fingerprint in taken:
                    continue
                if budget.max_total is not None and total >= budget.max_total:
                    break
                count = per_domain.get(r.domain)
                if count is None:
                    count = schedule.get(r.domain).admitted
                if budget.max_per_domain is not None and count >= budget.max_per_domain:
                    continue
                taken.add(r.fingerprint)
                per_domain[r.domain] = count + 1
                total += 1
                rows.append(_row(r))
            if not rows:
                return 0
            db.executemany(q.INSERT_QUEUED, rows)
            db.executemany(q.SET_ADMITTED, per_domain.items())
        for name, admitted in per_domain.items():
            domain = schedule.get(name)
            schedule.enqueued(domain, admitted - domain.admitted)
            domain.admitted = admitted
        self._admitted = total
        self._counts[q.QUEUED] += len(rows)
        return len(rows)

    async def mark_seen(self, fingerprints: Sequence[str]) -> None:
        with self._transaction() as db:
            added = db.executemany(q.INSERT_SEEN, ((fp,) for fp in fingerprints)).rowcount
        self._counts[q.SEEN] += added

    async def claim(
        self, limit: int, now: float, lease_s: float, default: DomainPolicy
    ) -> list[Lease]:
        if limit <= 0 or not self._schedule.has_due(now):
            return []
        expires_at = now + lease_s

        def take(domain: str, at: float) -> tuple[Lease, float] | None:
            row = db.execute(q.TAKE, (domain, at)).fetchone()
            if row is None:
                return None
            hand_outs = row[2] + 1
            db.execute(q.LEASE, (hand_outs, expires_at, row[0]))
            request = _request(row[3:])
            token = f"{request.fingerprint}:{hand_outs}"
            return Lease(request, token, expires_at), row[1]

        def earliest(domain: str) -> float | None:
            value: float | None = db.execute(q.EARLIEST, (domain,)).fetchone()[0]
            return value

        with self._transaction() as db:
            picked = self._schedule.claim(limit, now, default, take, earliest)
            touched = {state.name: state.ready_at for state, _ in picked}
            db.executemany(q.SET_READY, touched.items())
        leases = [lease for _, lease in picked]
        self._counts[q.QUEUED] -= len(leases)
        self._counts[q.LEASED] += len(leases)
        return leases

    def _end_lease(self, sql: str, params: tuple[Any, ...], lease: Lease) -> DomainState | None:
        """Run a lease-ending statement guarded by the token; the domain, or None if stale."""
        parsed = _parse_token(lease.token)
        if parsed is None or self._execute(sql, (*params, *parsed)) != 1:
            return None
        self._counts[q.LEASED] -= 1
        domain = self._schedule.get(lease.request.domain)
        self._schedule.lease_ended(domain)
        return domain

    async def complete(self, lease: Lease) -> bool:
        if self._end_lease(q.COMPLETE, (), lease) is None:
            return False
        self._counts[q.DONE] += 1
        return True

    async def retry(self, lease: Lease, not_before: float, error: str) -> bool:
        domain = self._end_lease(q.RETRY, (not_before, error), lease)
        if domain is None:
            return False
        self._schedule.enqueued(domain, 1, not_before)
        self._counts[q.QUEUED] += 1
        return True

    async def bury(self, lease: Lease, error: str, now: float) -> bool:
        if self._end_lease(q.BURY, (now, error), lease) is None:
            return False
        self._counts[q.DEAD] += 1
        return True

    async def reap(self, now: float, max_retries: int) -> int:
        params = (now, max_retries, LEASE_EXPIRED)
        with self._transaction() as db:
            expired = db.execute(q.EXPIRED_BY_DOMAIN, params[:2]).fetchall()
            if expired:
                db.execute(q.REAP_DEAD, params)
                db.execute(q.REAP, params)
        schedule = self._schedule
        for name, requeued, buried in expired:
            domain = schedule.get(name)
            schedule.lease_ended(domain, requeued + buried)
            if requeued:
                schedule.enqueued(domain, requeued)
        requeued_total: int = sum(row[1] for row in expired)
        buried_total: int = sum(row[2] for row in expired)
        self._counts[q.LEASED] -= requeued_total + buried_total
        self._counts[q.QUEUED] += requeued_total
        self._counts[q.DEAD] += buried_total
        return requeued_total + buried_total

    async def set_policy(self, domain: str, policy: DomainPolicy) -> None:
        self._execute(q.SET_POLICY, (domain, policy.delay_s, policy.max_in_flight))
        self._schedule.set_policy(self._schedule.get(domain), policy)

    async def block(self, domain: str, until: float) -> None:
        state = self._schedule.get(domain)
        if until > state.ready_at:
            self._execute(q.SET_READY, (domain, until))
            self._schedule.block(state, until)

    async def next_ready_at(self, now: float) -> float | None:
        return self._schedule.next_ready_at(now)

    async def counts(self) -> QueueCounts:
        c = self._counts
        return QueueCounts(
            queued=c[q.QUEUED],
            leased=c[q.LEASED],
            done=c[q.DONE],
            dead=c[q.DEAD],
            seen=sum(c.values()),
        )

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        rows = self._db.execute(q.DEAD_LETTERS, (limit, offset)).fetchall()
        return [DeadLetter(_request(row), tuple(json.loads(row[8])), row[9]) for row in rows]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        selection = (_json_or_null(fingerprints),)
        with self._transaction() as db:
            by_domain = db.execute(q.DEAD_BY_DOMAIN, selection).fetchall()
            if by_domain:
                db.execute(q.REQUEUE_DEAD, selection)
        for name, count in by_domain:
            self._schedule.enqueued(self._schedule.get(name), count)
        moved: int = sum(count for _, count in by_domain)
        self._counts[q.DEAD] -= moved
        self._counts[q.QUEUED] += moved
        return moved

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        purged = self._execute(q.PURGE_DEAD, (_json_or_null(fingerprints),))
        self._counts[q.DEAD] -= purged
        self._counts[q.SEEN] += purged
        return purged

    async def close(self) -> None:
        """Close the file and release its lock; the store is unusable afterwards."""
        try:
            self._db.close()
        finally:
            self._lock.release()

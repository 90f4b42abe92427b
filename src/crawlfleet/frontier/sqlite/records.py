"""The records the SQLite store keeps beside its queue: counts, statistics, attempts, known
URLs and revisits, dead letters (the ``requests``, ``domains``, ``meta`` and ``known``
tables of ``schema.py``).

``revisit`` and ``requeue_dead`` put requests back into their lanes: the rows in one
transaction, then the in-memory schedule and counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crawlfleet.counters import CrawlStats, merge
from crawlfleet.frontier.sqlite import rows
from crawlfleet.frontier.sqlite import statements as q
from crawlfleet.frontier.sqlite.file import SqliteStateFile
from crawlfleet.frontier.sqlite.schema import DEAD, DONE, LEASED, QUEUED, SEEN
from crawlfleet.frontier.store_types import Visit
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, DeadLetter, QueueCounts


class SqliteRecords(SqliteStateFile):
    """Counts, statistics, attempts, known URLs and dead letters of a crawl, in SQLite."""

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
        self._execute(q.START, (now,))

    async def stats(self) -> CrawlStats:
        started = self._db.execute(q.STARTED_AT).fetchone()
        return CrawlStats(dict(self._crawl_counters), None if started is None else started[0])

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        if not counters:
            return
        state = self._schedule.get(domain)
        counted = dict(state.counters)
        merge(counted, counters)
        with self._transaction():
            self._domain_changed(state, counters=counted)
        state.counters = counted
        merge(self._crawl_counters, counters)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        """Nothing: the attempts are already in the state file's ``attempts`` table."""
        return []

    async def ack_attempts(self, count: int) -> None:
        """Nothing to forget: no attempt is ever pending (``pending_attempts``)."""

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        self._execute(q.REMEMBER, (request.fingerprint, *rows.visit_row(visit)))

    async def visit(self, fingerprint: str) -> Visit | None:
        row = self._db.execute(q.VISIT, (fingerprint,)).fetchone()
        return None if row is None else rows.visit(row)

    async def revisit(self, now: float, limit: int) -> int:
        if limit <= 0:
            return 0
        per_lane: dict[tuple[str, str], int] = {}
        with self._transaction() as db:
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
        with self._transaction() as db:
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
        purged = self._execute(q.PURGE_DEAD, (rows.json_or_null(fingerprints),))
        self._counts[DEAD] -= purged
        self._counts[SEEN] += purged
        return purged

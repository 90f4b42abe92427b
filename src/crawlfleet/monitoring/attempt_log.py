"""The attempt log: one line per fetch attempt, and per-domain totals for the summary.

``SqliteAttemptLog`` keeps its own ``attempts`` table in the crawl's state file
(``<state_dir>/state.sqlite``), through a connection separate from the queue's; WAL lets both
write to the file in turn. ``MemoryAttemptLog`` is its twin for tests.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from crawlfleet import sqlitedb
from crawlfleet.errors import StateError
from crawlfleet.models import Attempt, Outcome


@dataclass(slots=True)
class DomainSummary:
    """Totals of one domain's attempts.

    ``pages`` counts OK attempts, ``statuses`` attempts per HTTP status, ``retries`` attempts
    that will be tried again, ``dead`` requests that were dead-lettered, ``skipped`` requests
    completed without a fetch. ``mean_latency_s`` is over attempts that got a response.
    """

    pages: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    bytes: int = 0
    mean_latency_s: float = 0.0
    retries: int = 0
    dead: int = 0
    skipped: int = 0


class AttemptLog(Protocol):
    """Where every fetch attempt of a crawl is written, in batches."""

    async def record(self, attempts: Sequence[Attempt]) -> None:
        """Append the attempts; durable when this returns."""
        ...

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        """The latest attempts (of one URL when given), newest first."""
        ...

    async def summary(self) -> dict[str, DomainSummary]:
        """Totals per domain, over every attempt recorded."""
        ...

    async def close(self) -> None: ...


class MemoryAttemptLog:
    """``AttemptLog`` in a list."""

    def __init__(self) -> None:
        self._attempts: list[Attempt] = []

    async def record(self, attempts: Sequence[Attempt]) -> None:
        self._attempts.extend(attempts)

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        found: list[Attempt] = []
        for attempt in reversed(self._attempts):
            if len(found) >= limit:
                break
            if url is None or attempt.url == url:
                found.append(attempt)
        return found

    async def summary(self) -> dict[str, DomainSummary]:
        summaries: dict[str, DomainSummary] = defaultdict(DomainSummary)
        latency_s: dict[str, float] = defaultdict(float)
        for a in self._attempts:
            s = summaries[a.domain]
            s.bytes += a.bytes
            if a.status is not None:
                s.statuses[a.status] = s.statuses.get(a.status, 0) + 1
                latency_s[a.domain] += a.latency_s
            s.pages += a.outcome is Outcome.OK
            s.retries += a.outcome is Outcome.RETRY
            s.dead += a.outcome is Outcome.DEAD
            s.skipped += a.outcome is Outcome.SKIPPED
        for domain, s in summaries.items():
            responses = sum(s.statuses.values())
            s.mean_latency_s = latency_s[domain] / responses if responses else 0.0
        return dict(summaries)

    async def close(self) -> None:
        """Nothing to release."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    domain TEXT NOT NULL,
    worker TEXT NOT NULL,
    outcome TEXT NOT NULL,
    status INTEGER,
    bytes INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    retry INTEGER NOT NULL,
    at REAL NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_url ON attempts (url, id);
"""
COLUMNS = "url, fingerprint, domain, worker, outcome, status, bytes, latency_s, retry, at, error"
INSERT = f"INSERT INTO attempts ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
RECENT = f"SELECT {COLUMNS} FROM attempts ORDER BY id DESC LIMIT ?"
RECENT_FOR_URL = f"SELECT {COLUMNS} FROM attempts WHERE url = ? ORDER BY id DESC LIMIT ?"
TOTALS = """
SELECT domain, sum(outcome = 'ok'), sum(bytes),
       avg(CASE WHEN status IS NOT NULL THEN latency_s END),
       sum(outcome = 'retry'), sum(outcome = 'dead'), sum(outcome = 'skipped')
FROM attempts GROUP BY domain
"""
STATUSES = (
    "SELECT domain, status, count(*) FROM attempts WHERE status IS NOT NULL GROUP BY domain, status"
)


def _row(a: Attempt) -> tuple[object, ...]:
    """The ``COLUMNS`` of an attempt."""
    head = (a.url, a.fingerprint, a.domain, a.worker, a.outcome.value, a.status)
    return (*head, a.bytes, a.latency_s, a.retry, a.at, a.error)


class SqliteAttemptLog:
    """``AttemptLog`` in an SQLite file; use ``await SqliteAttemptLog.open(path)``."""

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self.path = path
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> SqliteAttemptLog:
        """Open (creating the table if needed); StateError naming the file if unusable."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(path, sqlitedb.connect(path, SCHEMA, what="attempt log"))

    async def record(self, attempts: Sequence[Attempt]) -> None:
        rows = [_row(a) for a in attempts]
        if not rows:
            return
        try:
            with sqlitedb.write(self._db) as db:
                db.executemany(INSERT, rows)
        except sqlite3.Error as exc:
            raise StateError(f"attempt log {self.path}: {exc}") from exc

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        if url is None:
            rows = self._db.execute(RECENT, (limit,)).fetchall()
        else:
            rows = self._db.execute(RECENT_FOR_URL, (url, limit)).fetchall()
        return [
            Attempt(url, fp, domain, worker, Outcome(outcome), status, size, lat, retry, at, err)
            for url, fp, domain, worker, outcome, status, size, lat, retry, at, err in rows
        ]

    async def summary(self) -> dict[str, DomainSummary]:
        db = self._db
        summaries = {
            domain: DomainSummary(
                pages=pages,
                bytes=size,
                mean_latency_s=latency_s or 0.0,
                retries=retries,
                dead=dead,
                skipped=skipped,
            )
            for domain, pages, size, latency_s, retries, dead, skipped in db.execute(TOTALS)
        }
        for domain, status, count in db.execute(STATUSES):
            summaries[domain].statuses[status] = count
        return summaries

    async def close(self) -> None:
        self._db.close()

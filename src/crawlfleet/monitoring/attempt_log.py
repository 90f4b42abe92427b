"""The attempt log: one line per fetch attempt, read back for ``recent`` and the top errors.

The queue store writes each attempt in the same atomic step as the lease end it describes
(``frontier.protocols.QueueStore``): into the ``attempts`` table of the state file for SQLite,
which ``SqliteAttemptLog`` reads; into a pending list for Redis, which the dispatcher's
``AttemptCopier`` copies to ``PostgresAttemptLog``. ``MemoryAttemptLog`` is the PostgreSQL
log's twin for tests. Counts and sums come from the store's counters, not from here.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from crawlfleet import sqlitedb
from crawlfleet.records import ATTEMPT_COLUMNS as COLUMNS
from crawlfleet.records import Attempt, Outcome, attempt_of


class AttemptReader(Protocol):
    """Reads a crawl's attempt log."""

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        """The latest attempts (of one URL when given), newest first."""
        ...

    async def top_errors(self, outcome: Outcome, limit: int = 5) -> list[tuple[str, int]]:
        """The most frequent errors of attempts with ``outcome``, with their counts, most first.

        Ties are broken by the error text.
        """
        ...

    async def close(self) -> None: ...


class AttemptLog(AttemptReader, Protocol):
    """An attempt log written from outside the store (PostgreSQL, fed by the copier)."""

    async def record(self, attempts: Sequence[Attempt]) -> None:
        """Append the attempts; durable when this returns.

        Idempotent: an attempt whose ``(fingerprint, retry, at)`` is already in the log is
        not added again, so a copy interrupted before its acknowledgement can be repeated.
        """
        ...


def top_of(errors: Counter[str], limit: int) -> list[tuple[str, int]]:
    return sorted(errors.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]


class MemoryAttemptLog:
    """``AttemptLog`` in a list."""

    def __init__(self) -> None:
        self._attempts: list[Attempt] = []
        self._keys: set[tuple[str, int, float]] = set()

    async def record(self, attempts: Sequence[Attempt]) -> None:
        for attempt in attempts:
            key = (attempt.fingerprint, attempt.retry, attempt.at)
            if key not in self._keys:
                self._keys.add(key)
                self._attempts.append(attempt)

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        found: list[Attempt] = []
        for attempt in reversed(self._attempts):
            if len(found) >= limit:
                break
            if url is None or attempt.url == url:
                found.append(attempt)
        return found

    async def top_errors(self, outcome: Outcome, limit: int = 5) -> list[tuple[str, int]]:
        errors = Counter(a.error or "" for a in self._attempts if a.outcome is outcome)
        return top_of(errors, limit)

    async def close(self) -> None:
        """Nothing to release."""


RECENT = f"SELECT {COLUMNS} FROM attempts ORDER BY id DESC LIMIT ?"
RECENT_FOR_URL = f"SELECT {COLUMNS} FROM attempts WHERE url = ? ORDER BY id DESC LIMIT ?"
TOP_ERRORS = (
    "SELECT coalesce(error, ''), count(*) FROM attempts WHERE outcome = ? "
    "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?"
)


class SqliteAttemptLog:
    """Reads the ``attempts`` table the SQLite queue store writes in the state file.

    Use ``await SqliteAttemptLog.open(path)`` after the store has created the file. ``settle``:
    called before each read, to commit what the store of this process wrote and has not
    committed yet (``SqliteQueueStore.commit_now``: the crawl's summary reads every attempt).
    """

    def __init__(
        self, path: Path, db: sqlite3.Connection, settle: Callable[[], None] | None = None
    ) -> None:
        self.path = path
        self._db = db
        self._settle = settle or _nothing

    @classmethod
    async def open(
        cls, path: Path, *, settle: Callable[[], None] | None = None
    ) -> SqliteAttemptLog:
        """Open the state file; ``StateError`` naming it if it is unusable."""
        return cls(path, sqlitedb.connect(path, "", what="state file"), settle)

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        self._settle()
        if url is None:
            rows = self._db.execute(RECENT, (limit,)).fetchall()
        else:
            rows = self._db.execute(RECENT_FOR_URL, (url, limit)).fetchall()
        return [attempt_of(row) for row in rows]

    async def top_errors(self, outcome: Outcome, limit: int = 5) -> list[tuple[str, int]]:
        self._settle()
        rows = self._db.execute(TOP_ERRORS, (outcome.value, limit)).fetchall()
        return [(str(error), int(count)) for error, count in rows]

    async def close(self) -> None:
        self._db.close()


def _nothing() -> None:
    """The ``settle`` of a log no writer of this process holds back."""

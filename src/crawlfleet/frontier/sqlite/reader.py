"""Read an embedded crawl's state file while the crawl runs, without ever writing to it.

The crawl's ``SqliteQueueStore`` holds the file's lock and keeps its domain schedule in
memory, so this reader takes no lock and asks the store nothing: it opens
``state.sqlite`` read-only (a ``mode=ro`` URI; WAL lets it read while the crawl writes) and
reads the tables themselves (``schema.py``; some of the store's statements,
``statements.py``): requests counted by state and, per domain, by lane; the
``domains`` rows with their policy record and ``counters`` JSON column; ``meta`` for the
start time; ``attempts`` for the log, with filters. Each read is one short read
transaction, so it sees one committed state and never holds back the crawl's checkpoints
for long.

The domains' rows do not record the crawl's default delay and in-flight cap (a NULL column
means "the default"): the caller passes them as a ``DomainPolicy`` (from the crawl's
settings).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from crawlfleet.counters import CrawlStats, merge
from crawlfleet.errors import StateError
from crawlfleet.frontier import domains as schedule
from crawlfleet.frontier.domains import DomainState, Lane
from crawlfleet.frontier.sqlite import rows
from crawlfleet.frontier.sqlite import statements as q
from crawlfleet.frontier.sqlite.schema import DEAD, DONE, LEASED, QUEUED, SCHEMA_VERSION
from crawlfleet.frontier.store_types import DomainPolicy, DomainView
from crawlfleet.records import (
    ATTEMPT_COLUMNS,
    Attempt,
    AttemptFilter,
    DeadLetter,
    QueueCounts,
    attempt_of,
)

BUSY_TIMEOUT_S = 2.0

DOMAIN_ROWS = f"SELECT domain, ready_at, admitted, counters, {q.POLICY_COLUMNS} FROM domains"
QUEUED_BY_LANE = "SELECT domain, fetcher, count(*) FROM requests WHERE state = 0 GROUP BY 1, 2"


class SqliteStateReader:
    """Counts, statistics, domains, dead letters and attempts of a state file, read-only.

    Use ``SqliteStateReader.open(path, default)``; ``StateError`` if there is no such file
    or it is not a crawl's state.
    """

    def __init__(self, path: Path, db: sqlite3.Connection, default: DomainPolicy) -> None:
        self.path = path
        self._db = db
        self.default = default

    @classmethod
    def open(cls, path: Path, default: DomainPolicy) -> SqliteStateReader:
        if not path.exists():
            raise StateError(f"no crawl state at {path}")
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        try:
            db = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error as exc:
            raise StateError(f"state file {path} cannot be read: {exc}") from None
        if version != SCHEMA_VERSION:
            db.close()
            raise StateError(
                f"state file {path} has schema version {version}, expected {SCHEMA_VERSION}"
            )
        return cls(path, db, default)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every statement in it sees the same committed state."""
        db = self._db
        try:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StateError(f"state file {self.path}: {exc}") from None

    async def counts(self) -> QueueCounts:
        with self._read() as db:
            by_state = dict(db.execute(q.COUNT_BY_STATE).fetchall())
        return QueueCounts(
            queued=by_state.get(QUEUED, 0),
            leased=by_state.get(LEASED, 0),
            done=by_state.get(DONE, 0),
            dead=by_state.get(DEAD, 0),
            seen=sum(by_state.values()),
        )

    async def stats(self) -> CrawlStats:
        total: dict[str, float] = {}
        with self._read() as db:
            for (found,) in db.execute("SELECT counters FROM domains"):
                merge(total, orjson.loads(found))
            started = db.execute(q.STARTED_AT).fetchone()
        return CrawlStats(total, None if started is None else float(started[0]))

    async def domains(self, limit: int = 100) -> list[DomainView]:
        """The ``limit`` domains with the most admissions, most first, as the store shows them."""
        return [schedule.view(state, self.default) for state in self._states()[:limit]]

    async def domain(self, domain: str) -> DomainView:
        """One domain as the store shows it (a default view when it has no row yet)."""
        for state in self._states():
            if state.name == domain:
                return schedule.view(state, self.default)
        return schedule.view(DomainState(domain), self.default)

    def _states(self) -> list[DomainState]:
        states: dict[str, DomainState] = {}
        with self._read() as db:
            for name, ready_at, admitted, found, *record in db.execute(DOMAIN_ROWS):
                states[name] = DomainState(
                    name, ready_at=ready_at, admitted=admitted, record=rows.record(record),
                    counters=orjson.loads(found),
                )  # fmt: skip
            for name, count in db.execute(q.LOAD_LEASED):
                states.setdefault(name, DomainState(name)).in_flight = count
            for name, kind, count in db.execute(QUEUED_BY_LANE):
                states.setdefault(name, DomainState(name)).lanes[kind] = Lane(queued=count)
        return sorted(states.values(), key=lambda s: (-s.admitted, s.name))

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        """A page of dead letters, oldest first (``QueueStore.dead_letters``)."""
        with self._read() as db:
            found = db.execute(q.DEAD_LETTERS, (limit, offset)).fetchall()
        return [rows.dead_letter(r) for r in found]

    async def attempts(self, where: AttemptFilter, limit: int = 100) -> list[Attempt]:
        """The latest attempts matching ``where``, newest first."""
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("domain", where.domain),
            ("outcome", where.outcome),
            ("status", where.status),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT {ATTEMPT_COLUMNS} FROM attempts"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        with self._read() as db:
            found: Sequence[Sequence[object]] = db.execute(
                f"{sql} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
        return [attempt_of(row) for row in found]

    async def close(self) -> None:
        self._db.close()

"""The state file as one ``SqliteQueueStore`` holds it: connection, lock and in-memory mirror.

The file is locked to this store (``sqlitedb.FileLock``), which lets the per-domain
schedule (ready times, in-flight and queued counts per lane, policy records, statistics
counters) and the state counts live in memory, rebuilt from the tables by ``open``. The
writes of one event-loop turn are one transaction, committed when the turn ends
(``sqlite_turns.TurnWriter``, decision 0027): a killed process loses at most its last
turn's writes, and the pages whose lease ends those were are fetched again.

A domain's row mirrors its memory and is read only by ``open``: a write that changes it
names its new values (``_domain_changed``), and each changed row is written once, just
before the turn's COMMIT (decision 0030), not once a claim, admission and lease end.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import orjson

from crawlfleet.counters import Counters, merge
from crawlfleet.errors import StateError
from crawlfleet.frontier.domains import DomainSchedule, DomainState
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.recent import SEEN_PREFILTER_CAPACITY, RecentSet
from crawlfleet.frontier.sqlite import rows
from crawlfleet.frontier.sqlite import statements as q
from crawlfleet.frontier.sqlite.retention import AttemptRetention
from crawlfleet.frontier.sqlite.schema import (
    DEAD,
    DONE,
    LEASED,
    QUEUED,
    SEEN,
    open_queue_db,
)
from crawlfleet.sqlite_turns import TurnWriter
from crawlfleet.sqlitedb import FileLock


class SqliteStateFile:
    """One locked state file and the store's mirror of it; use ``await cls.open(path)``.

    ``keep_attempts``: the attempt log keeps its newest rows, this many (``retention.py``;
    None keeps every row).
    """

    def __init__(
        self,
        path: Path,
        db: sqlite3.Connection,
        lock: FileLock,
        *,
        keep_attempts: int | None = None,
    ) -> None:
        self.path = path
        self._db = db
        self._lock = lock
        self._retention = AttemptRetention(keep_attempts)
        self._known = RecentSet(SEEN_PREFILTER_CAPACITY)
        self._schedule = DomainSchedule(self._earliest)
        self._counts = dict.fromkeys((QUEUED, LEASED, DONE, DEAD, SEEN), 0)
        self._admitted = 0
        self._crawl_counters: Counters = {}
        self._changed: dict[str, tuple[float, int, Counters, PolicyRecord]] = {}
        self._turns = TurnWriter(db, path, self._error, before_commit=self._write_domains)
        self._load()

    @classmethod
    async def open(cls, path: Path, *, keep_attempts: int | None = None) -> Self:
        """Open (creating or migrating if needed) the state file.

        StateError if the file is corrupt, foreign, of a newer schema or locked.
        """
        db, lock = open_queue_db(path)
        try:
            return cls(path, db, lock, keep_attempts=keep_attempts)
        except sqlite3.Error as exc:
            db.close()
            lock.release()
            raise StateError(f"state file {path} cannot be read: {exc}") from None

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

    def _domain_changed(
        self,
        state: DomainState,
        *,
        ready_at: float | None = None,
        admitted: int | None = None,
        counters: Counters | None = None,
        record: PolicyRecord | None = None,
    ) -> None:
        """Write ``state``'s row when the turn commits: the values given, the others as the
        memory has them. Call inside the write that makes the change (``_transaction``), so
        a write committed at once (another connection writes beside) carries it."""
        self._changed[state.name] = (
            state.ready_at if ready_at is None else ready_at,
            state.admitted if admitted is None else admitted,
            state.counters if counters is None else counters,
            state.record if record is None else record,
        )

    def _write_domains(self, db: sqlite3.Connection) -> None:
        """The rows ``_domain_changed`` named this turn (``TurnWriter``'s ``before_commit``)."""
        if not self._changed:
            return
        written = [
            (*rows.policy_row(name, record), ready_at, admitted, orjson.dumps(counters))
            for name, (ready_at, admitted, counters, record) in self._changed.items()
        ]
        db.executemany(q.WRITE_DOMAIN, written)
        self._changed.clear()

    def _error(self, exc: sqlite3.Error) -> StateError:
        return StateError(f"state file {self.path}: {exc}")

    def _earliest(self, domain: str, kind: str) -> float | None:
        """The earliest not-before time of the lane's queued requests (0: one has none)."""
        value: float | None = self._db.execute(q.EARLIEST, (domain, kind)).fetchone()[0]
        return value

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write in the turn's transaction (``sqlite_turns.TurnWriter``)."""
        with self._turns.transaction() as db:
            yield db

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run one statement in the turn's transaction; how many rows it changed."""
        return self._turns.execute(sql, params)

    def commit_after(self, first: TurnWriter) -> None:
        """Commit each turn only after ``first``'s, and not at all if ``first`` failed (the
        items file's: a lease end is in the file only once its page's items are)."""
        self._turns.first.append(first)

    async def close(self) -> None:
        """Commit, close the file and release its lock; the store is unusable afterwards.

        StateError if that last commit fails.
        """
        try:
            self._turns.close()
        finally:
            self._db.close()
            self._lock.release()

"""The state file as one ``SqliteQueueStore`` holds it: connection, lock and in-memory mirror.

The file is locked to this store (``sqlite_schema.FileLock``), which lets the per-domain
schedule (ready times, in-flight and queued counts per lane, policy records, statistics
counters) and the state counts live in memory, rebuilt from the tables by ``open``. Every
write commits before the store's method returns (``_transaction``, ``_execute``), so a
killed process loses nothing it was told about.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self

import orjson

from crawlfleet import sqlitedb
from crawlfleet.counters import Counters, merge
from crawlfleet.errors import StateError
from crawlfleet.frontier import sqlite_rows as rows
from crawlfleet.frontier import sqlite_statements as q
from crawlfleet.frontier.domains import DomainSchedule
from crawlfleet.frontier.recent import SEEN_PREFILTER_CAPACITY, RecentSet
from crawlfleet.frontier.sqlite_retention import AttemptRetention
from crawlfleet.frontier.sqlite_schema import (
    DEAD,
    DONE,
    LEASED,
    QUEUED,
    SEEN,
    FileLock,
    open_queue_db,
)


class SqliteStateFile:
    """One locked state file and the store's mirror of it; use ``await cls.open(path)``.

    ``keep_attempts``: the attempt log keeps its newest rows, this many (``sqlite_retention``;
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
        self._failure: StateError | None = None
        self._pending: asyncio.Handle | None = None
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

    def _earliest(self, domain: str, kind: str) -> float | None:
        """The earliest not-before time of the lane's queued requests (0: one has none)."""
        value: float | None = self._db.execute(q.EARLIEST, (domain, kind)).fetchone()[0]
        return value

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One store write: a savepoint in the turn's transaction, undone alone if it raises."""
        db, alone = self._turn()
        try:
            db.execute("SAVEPOINT write")
            try:
                yield db
            except sqlite3.Error:
                raise
            except BaseException:
                db.execute("ROLLBACK TO write")
                db.execute("RELEASE write")
                raise
            db.execute("RELEASE write")
        except sqlite3.Error as exc:
            raise self._broken(exc) from exc
        if alone:
            self._commit_now()

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run one statement in the turn's transaction; how many rows it changed."""
        db, alone = self._turn()
        try:
            changed: int = db.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise self._broken(exc) from exc
        if alone:
            self._commit_now()
        return changed

    def _turn(self) -> tuple[sqlite3.Connection, bool]:
        """The connection inside the transaction of this event-loop turn, begun if need be,
        and whether the caller must commit it itself (no event loop runs, or another
        connection of this process is writing the file: ``sqlitedb.writing_beside``).

        The transaction commits in a callback the loop runs after the turn's other callbacks
        (``_commit``), so the writes of every step that ran in one turn cost one COMMIT.
        """
        if self._failure is not None:
            raise self._failure
        db = self._db
        beside = sqlitedb.written_beside(self.path)
        if beside:  # another connection of this process waits for the write lock
            self._commit_now()
        if not db.in_transaction:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._broken(exc) from exc
            if beside:
                return db, True
            try:
                self._pending = asyncio.get_running_loop().call_soon(self._commit)
            except RuntimeError:
                return db, True
        return db, False

    def _commit(self) -> None:
        """Commit the turn's transaction; a failure breaks the store (``_broken``)."""
        if self._failure is None and self._db.in_transaction:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._broken(exc)

    def _commit_now(self) -> None:
        self._commit()
        if self._failure is not None:
            raise self._failure

    def _broken(self, exc: sqlite3.Error) -> StateError:
        """Roll the turn back and refuse every later call: the mirror is ahead of the file."""
        if self._failure is None:
            self._failure = StateError(
                f"state file {self.path}: {exc} (stopped: run again to resume from the file)"
            )
        if self._db.in_transaction:
            with suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
        return self._failure

    async def close(self) -> None:
        """Commit, close the file and release its lock; the store is unusable afterwards.

        StateError if that last commit fails.
        """
        failed = self._failure
        if self._pending is not None:
            self._pending.cancel()
        self._commit()
        last = self._failure
        self._failure = StateError(f"state file {self.path} is closed")
        try:
            self._db.close()
        finally:
            self._lock.release()
        if last is not None and last is not failed:
            raise last

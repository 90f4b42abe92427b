"""The state file as one ``SqliteQueueStore`` writes it: connection, lock and turns.

The file is locked to its store (``sqlitedb.FileLock``), which lets the store keep the
per-domain schedule (ready times, in-flight and queued counts per lane, policy records,
statistics counters) and the state counts in memory, rebuilt from the tables when it opens.
The writes of one event-loop turn are one transaction, committed when the turn ends, or
with the next turns' when the last commit is less than 0.1 s old (``sqlite_turns.TurnWriter``,
decisions 0027, 0065): a killed process loses at most its last 0.1 s of writes, and the
pages whose lease ends those were are fetched again.

A domain's row mirrors the store's memory and is read only when the store opens: a write
that changes it names its new values (``domain_changed``), and each changed row is written
once, just before the turn's COMMIT (decision 0030), not once a claim, admission and lease
end.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.counters import Counters
from crawlfleet.errors import StateError
from crawlfleet.frontier.domains import DomainState
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.sqlite import rows
from crawlfleet.frontier.sqlite import statements as q
from crawlfleet.sqlite_turns import TurnWriter
from crawlfleet.sqlitedb import FileLock


class StateFile:
    """One locked state file (``schema.open_queue_db``) and the turns that write it.

    ``db`` reads outside the turn's writes (each read sees what this process wrote).
    """

    def __init__(self, path: Path, db: sqlite3.Connection, lock: FileLock) -> None:
        self.path = path
        self.db = db
        self._lock = lock
        self._changed: dict[str, tuple[float, int, Counters, PolicyRecord]] = {}
        self._turns = TurnWriter(db, path, self._error, before_commit=self._write_domains)

    def domain_changed(
        self,
        state: DomainState,
        *,
        ready_at: float | None = None,
        admitted: int | None = None,
        counters: Counters | None = None,
        record: PolicyRecord | None = None,
    ) -> None:
        """Write ``state``'s row when the turn commits: the values given, the others as the
        memory has them. Call inside the write that makes the change (``transaction``), so
        a write committed at once (another connection writes beside) carries it."""
        self._changed[state.name] = (
            state.ready_at if ready_at is None else ready_at,
            state.admitted if admitted is None else admitted,
            state.counters if counters is None else counters,
            state.record if record is None else record,
        )

    def _write_domains(self, db: sqlite3.Connection) -> None:
        """The rows ``domain_changed`` named this turn (``TurnWriter``'s ``before_commit``)."""
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

    def earliest(self, domain: str, kind: str) -> float | None:
        """The earliest not-before time of the lane's queued requests (0: one has none)."""
        value: float | None = self.db.execute(q.EARLIEST, (domain, kind)).fetchone()[0]
        return value

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write in the turn's transaction (``sqlite_turns.TurnWriter``)."""
        with self._turns.transaction() as db:
            yield db

    def execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run one statement in the turn's transaction; how many rows it changed."""
        return self._turns.execute(sql, params)

    def commit_after(self, first: TurnWriter) -> None:
        """Commit each turn only after ``first``'s, and not at all if ``first`` failed (the
        items file's: a lease end is in the file only once its page's items are)."""
        self._turns.first.append(first)

    def commit_now(self) -> None:
        """Commit the writes waiting for their commit (decision 0065) now; never raises (a
        failed commit breaks the file as at a turn's end)."""
        self._turns.commit()

    def close(self) -> None:
        """Commit, close the file and release its lock; its store is unusable afterwards.

        StateError if that last commit fails.
        """
        try:
            self._turns.close()
        finally:
            self.db.close()
            self._lock.release()

"""Writes to an SQLite file in one transaction per event-loop turn, or per few turns
(decisions 0027, 0065).

The embedded crawl writes its state file (leases, links, attempts) and its items file a few
times a page. A COMMIT each cost more than the writes: the WAL frames of the same hot pages
written again and again, the file locks taken and dropped. A ``TurnWriter`` runs every write
of one turn of the event loop in one transaction, each write in a savepoint of its own (a
write that raises undoes only itself), and commits in a callback the loop runs after the
turn's other callbacks; when it committed less than ``COMMIT_EVERY_S`` ago, that callback
waits out the rest of it, so a busy crawl's turns (one every ~13 ms on the bench site) share
a COMMIT (decision 0065: 7 % of the crawl's CPU a page).

What a crash loses: the writes since the last commit, at most ``COMMIT_EVERY_S`` of them, all
together, as if the process had died that much earlier; a page whose lease end was lost is
fetched again. Order across files is kept by ``first``: the writers to commit before this
one (the embedded crawl's items file before its state file, so a page's lease end is never
in the file while its items are not). A failed statement or COMMIT rolls the transaction
back and breaks the writer, and every writer that commits after it: each later call raises
the same ``StateError``, because the caller's memory is now ahead of the file, and the crawl
stops to resume from what was committed.

Another connection of this process that writes the same file (the session and proxy-state
stores, in a thread) marks its writes with ``writing_beside``: meanwhile the writer commits
at once and write by write, so that connection gets the file's write lock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from crawlfleet.errors import StateError

COMMIT_EVERY_S = 0.1
"""The shortest time between two commits of a writer; what a crash may lose (decision 0065)."""

_BESIDE: collections.Counter[str] = collections.Counter()
"""Writes of other connections under way, by file, in this process (``writing_beside``)."""


@contextlib.contextmanager
def writing_beside(path: Path) -> Iterator[None]:
    """Mark a write of another connection of this process to ``path`` as under way."""
    key = os.path.realpath(path)
    _BESIDE[key] += 1
    try:
        yield
    finally:
        _BESIDE[key] -= 1
        if not _BESIDE[key]:
            del _BESIDE[key]


class TurnWriter:
    """The write transactions of one connection, one per event-loop turn (or per
    ``COMMIT_EVERY_S`` when turns come faster).

    ``describe`` turns an ``sqlite3.Error`` into the ``StateError`` that names the file. The
    connection keeps its temporary files in memory (``temp_store``): a write's savepoint in
    a turn's transaction journals the pages the turn already changed, and in temporary files
    that was 135,000 ``pwrite`` calls and 324 files in a 22,500-page crawl (decision 0030).
    ``before_commit`` writes what the owner kept for the turn's end, in its transaction.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        path: Path,
        describe: Callable[[sqlite3.Error], StateError],
        *,
        before_commit: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        db.execute("PRAGMA temp_store = MEMORY")
        self._db = db
        self._before_commit = before_commit
        self._key = os.path.realpath(path)
        self._describe = describe
        self.first: list[TurnWriter] = []
        self.failure: StateError | None = None
        self._closed = False
        self._pending: asyncio.Handle | None = None
        self._committed_at = -math.inf  # the first turn commits when it ends

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write: a savepoint in the turn's transaction, undone alone if it raises."""
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

    def execute(self, sql: str, params: Sequence[Any]) -> int:
        """One statement in the turn's transaction; how many rows it changed."""
        db, alone = self._turn()
        try:
            changed: int = db.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise self._broken(exc) from exc
        if alone:
            self._commit_now()
        return changed

    def commit(self) -> None:
        """Commit the turn, the ``first`` writers' before; never raises (the loop calls it):
        see ``failure``. Called before its time (a reader of this process that must see every
        write: ``SqliteAttemptLog``'s ``settle``), it takes the pending commit's place."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        for writer in self.first:
            writer.commit()
            if writer.failure is not None and self.failure is None:
                self._broken(writer.failure)
        if self.failure is None and not self._closed and self._db.in_transaction:
            try:
                if self._before_commit is not None:
                    self._before_commit(self._db)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._broken(exc)
            with contextlib.suppress(RuntimeError):  # no loop: close() after the crawl
                self._committed_at = asyncio.get_running_loop().time()

    def close(self) -> None:
        """Commit what is pending and refuse later writes; StateError if that commit fails."""
        failed = self.failure
        self.commit()
        self._closed = True
        if self.failure is not None and self.failure is not failed:
            raise self.failure

    def _turn(self) -> tuple[sqlite3.Connection, bool]:
        """The connection in the turn's transaction, begun if need be, and whether the caller
        commits it itself (another connection writes beside). Call from a running loop."""
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise self._describe(sqlite3.Error("closed"))
        db = self._db
        beside = self._key in _BESIDE
        if beside:
            self._commit_now()
        if not db.in_transaction:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._broken(exc) from exc
            if beside:
                return db, True
            loop = asyncio.get_running_loop()
            wait_s = self._committed_at + COMMIT_EVERY_S - loop.time()
            self._pending = (
                loop.call_later(wait_s, self.commit) if wait_s > 0 else loop.call_soon(self.commit)
            )
        return db, False

    def _commit_now(self) -> None:
        self.commit()
        if self.failure is not None:
            raise self.failure

    def _broken(self, exc: sqlite3.Error | StateError) -> StateError:
        """Roll the turn back and refuse every later call."""
        if isinstance(exc, StateError):  # a writer that commits first failed: its error
            self.failure = self.failure or exc
        elif self.failure is None:
            self.failure = StateError(f"{self._describe(exc)} (stopped: run again to resume)")
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
        return self.failure

"""How every crawlfleet SQLite file is opened and written: WAL, one writer transaction at a time.

The queue store, the attempt log and the item sink each keep their own tables and connection,
but open them and run write transactions the same way, with errors turned into ``StateError``
naming the file. ``FileLock`` keeps a file to one process (a crawl's state file, its state
directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from crawlfleet.errors import StateError
from crawlfleet.sqlite_turns import writing_beside

T = TypeVar("T")

BUSY_TIMEOUT_S = 5.0
# SQLite's own default page cache is 2 MiB. A large crawl's state probes and inserts random
# fingerprints into an index of up to tens of MB: with 2 MiB most probes read pages back from
# the OS (52 KB read per page at 300,000 pages, 7 KB with 32 MiB: decision 0017). The cache
# fills only as the file grows, so a small crawl does not pay for it. 16 MiB since the
# frontier's memo holds every offered URL (decision 0022): repeated links no longer probe the
# index, and the memo's 25 MB at 1,000,000 URLs had to fit the same 250 MB.
STATE_CACHE_MIB = 16
ITEMS_CACHE_MIB = 16


def tune(db: sqlite3.Connection, *, cache_mib: int) -> None:
    """WAL, ``synchronous = NORMAL`` and a page cache of ``cache_mib`` MiB on ``db``."""
    db.execute("PRAGMA journal_mode = WAL").fetchall()
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(f"PRAGMA cache_size = -{cache_mib * 1024}")


def connect(
    path: Path,
    schema: str,
    *,
    what: str,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    check_same_thread: bool = True,
    cache_mib: int = 2,
) -> sqlite3.Connection:
    """An autocommit WAL connection to ``path`` with ``schema`` (idempotent DDL) created.

    ``what`` names the file in errors ("state file", "items database").
    """
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(
            path,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=check_same_thread,
        )
        tune(db, cache_mib=cache_mib)
        db.executescript(f"BEGIN IMMEDIATE; {schema} COMMIT;")
        return db
    except sqlite3.Error as exc:
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        raise StateError(f"{what} {path} is not a usable SQLite database: {exc}") from None


@contextlib.contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE … COMMIT`` transaction, rolled back if the block raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class ThreadedConnection:
    """A connection of its own to a state file whose calls run in a worker thread, one at a time.

    For the small stores beside the queue store (proxy states, sessions): their writes are
    short and rare, so one thread hop a call is cheap, and the event loop never waits on
    SQLite's lock. ``run`` turns an ``sqlite3.Error`` into a ``StateError`` naming ``what``.
    """

    def __init__(self, db: sqlite3.Connection, path: Path, what: str) -> None:
        self._db = db
        self._path = path
        self._what = what
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path, schema: str, *, what: str) -> ThreadedConnection:
        db = await asyncio.to_thread(
            connect, path, schema, what="state file", check_same_thread=False
        )
        return cls(db, path, f"{what} in {path}")

    async def run(self, call: Callable[[sqlite3.Connection], T]) -> T:
        async with self._lock:
            try:
                with writing_beside(self._path):  # the queue store commits write by write
                    return await asyncio.to_thread(call, self._db)
            except sqlite3.Error as exc:
                raise StateError(f"{self._what}: {exc}") from None

    async def close(self) -> None:
        await self.run(sqlite3.Connection.close)


class FileLock:
    """An exclusive ``flock`` on ``<path>.lock``, held until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StateError(
                f"state file {path} is in use by another crawl (lock {self.path} is held)"
            ) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

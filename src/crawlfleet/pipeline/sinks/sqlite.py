"""The embedded item store: one SQLite file (``<state_dir>/items.sqlite``) of upserted items.

The tables are in ``sqlite_schema``. The upsert rule (the PostgreSQL and memory sinks mirror
it, with ``data`` as JSONB in PostgreSQL):

- A row is identified by (crawl_id, item_type, item_key): each crawl id is its own key
  namespace, so two crawls never overwrite each other's items; a crawl run again under the
  same id updates its own rows.
- ``item_key`` is ``Item.key``, or the content hash when the item has none;
  ``content_hash`` is ``hashing.content_hash(data)`` (volatile fields such as ``fetched_at``
  left out). Times are epoch seconds from the sink's clock, one ``now`` per ``write`` call.
- NUL characters are removed from every string first (``text.strip_nul``).
- A batch is first reduced to one row per (type, key) and written in (type, key) order, in
  one transaction: all of it is stored or none of it.
- A new key is inserted with ``first_seen = last_seen = last_changed = now``.
- An existing one is touched only by a version at least as new (the version rule of
  ``stored``: ``fetched_at``, then the content hash), so a late write of an older fetch
  changes nothing. Such a write sets ``last_seen = now`` and ``fetched_at``; only when its
  content hash differs do ``data``, ``content_hash`` and ``last_changed = now`` change;
  ``first_seen`` never does. So an unchanged item keeps its first ``data``, volatile fields
  included.
- Each insert and each change of content appends a ``new`` / ``changed`` row to the change
  feed (``changes``) in the same transaction; the sink is also the ``PageTracker`` that
  records ``gone`` items (``sqlite_changes``, ``pipeline/changes.py``).

Reads and writes run on the caller's (the event loop's) thread, as the queue store's do: a
page's COMMIT takes tens of microseconds, and handing each to a thread cost more CPU than the
write (decision 0023). The file runs in WAL mode with ``synchronous=NORMAL``: a committed
batch survives a crash of the process (not necessarily a power cut of the machine). Every failure to open or write the
file (locked, corrupt, disk full) is a ``StateError`` naming it. Each write commits at once,
unless the embedded crawl made the sink ``write_in_turns`` (decision 0027).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

import orjson

from crawlfleet import sqlitedb
from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.rejects import Reject, reject_row
from crawlfleet.pipeline.sinks import sqlite_changes, sqlite_schema
from crawlfleet.pipeline.sinks.stored import StoredItem, batch_rows
from crawlfleet.sqlite_turns import TurnWriter

UPSERT = """
INSERT INTO items (crawl_id, item_type, item_key, data, content_hash, fetched_at,
                   first_seen, last_seen, last_changed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (crawl_id, item_type, item_key) DO UPDATE SET
    last_seen = excluded.last_seen,
    fetched_at = excluded.fetched_at,
    data = CASE WHEN items.content_hash = excluded.content_hash
                THEN items.data ELSE excluded.data END,
    last_changed = CASE WHEN items.content_hash = excluded.content_hash
                        THEN items.last_changed ELSE excluded.last_changed END,
    content_hash = excluded.content_hash
WHERE (excluded.fetched_at, excluded.content_hash) >= (items.fetched_at, items.content_hash)
"""

INSERT_REJECT = """
INSERT INTO rejects (crawl_id, item_type, item_key, url, reason, data, at)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

T = TypeVar("T")


class SqliteSink:
    """One crawl's items upserted into an SQLite file; also its ``RejectStore``."""

    def __init__(
        self, connection: sqlite3.Connection, path: Path, crawl_id: str, clock: Clock
    ) -> None:
        """Use ``SqliteSink.open``."""
        self.path = path
        self.crawl_id = crawl_id
        self._connection = connection
        self._clock = clock
        self._turns: TurnWriter | None = None

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        crawl_id: str = "",
        clock: Clock | None = None,
        busy_timeout_s: float = 5.0,
        max_size_bytes: int | None = None,
    ) -> SqliteSink:
        """Opens (creating or migrating if needed) the file and its tables.

        ``crawl_id`` is the key namespace of the rows this sink writes and reads.
        ``busy_timeout_s``: how long a write waits for another process's lock before failing.
        ``max_size_bytes`` caps the file: a write that would pass it fails as if the disk were
        full.
        """
        connection = await asyncio.to_thread(
            _connect, path, crawl_id, busy_timeout_s, max_size_bytes
        )
        return cls(connection, path, crawl_id, clock if clock is not None else SystemClock())

    async def write(self, items: Sequence[Item]) -> None:
        upsert = self._upsert(items)
        if upsert is not None:
            self._write(upsert)

    async def write_page(
        self, items: Sequence[Item], page: str, keys: Sequence[tuple[str, str]]
    ) -> None:
        """``write`` and ``page_items`` in one transaction (or one savepoint of the turn's)."""
        upsert = self._upsert(items)
        now = self._clock.now()

        def write_and_record(db: sqlite3.Connection) -> None:
            if upsert is not None:
                upsert(db)
            sqlite_changes.page_items(db, self.crawl_id, page, keys, now)

        self._write(write_and_record)

    def _upsert(self, items: Sequence[Item]) -> Callable[[sqlite3.Connection], None] | None:
        """The statements that upsert ``items`` with their changes; None if there are none."""
        now = self._clock.now()
        rows = batch_rows(items, now)
        if not rows:
            return None
        crawl_id = self.crawl_id
        params = [
            (
                self.crawl_id,
                r.item_type,
                r.item_key,
                r.data_json,
                r.content_hash,
                r.fetched_at,
                now,
                now,
                now,
            )
            for r in rows
        ]

        def upsert(db: sqlite3.Connection) -> None:
            changes = sqlite_changes.changes_of(db, crawl_id, rows, now)
            db.executemany(UPSERT, params)
            db.executemany(sqlite_changes.INSERT_CHANGE, changes)

        return upsert

    async def page_items(self, page: str, keys: Sequence[tuple[str, str]]) -> None:
        now = self._clock.now()
        self._write(lambda db: sqlite_changes.page_items(db, self.crawl_id, page, keys, now))

    async def page_unchanged(self, page: str) -> None:
        now = self._clock.now()
        self._write(lambda db: sqlite_changes.page_unchanged(db, self.crawl_id, page, now))

    async def add(self, rejects: Sequence[Reject]) -> None:
        """Stores invalid items in the ``rejects`` table, in one transaction."""
        params = [(self.crawl_id, *reject_row(r), r.at) for r in rejects]
        if params:
            self._write(lambda db: db.executemany(INSERT_REJECT, params))

    async def stored(self, item_type: str | None = None) -> list[StoredItem]:
        """This crawl's stored items (of ``item_type`` if given), ordered by type and key."""
        query = (
            "SELECT item_type, item_key, data, content_hash, first_seen, last_seen, last_changed,"
            " crawl_id, fetched_at FROM items WHERE crawl_id = ? AND (? IS NULL OR item_type = ?)"
            " ORDER BY item_type, item_key"
        )

        def read() -> list[StoredItem]:
            cursor = self._connection.execute(query, (self.crawl_id, item_type, item_type))
            return [StoredItem(row[0], row[1], orjson.loads(row[2]), *row[3:]) for row in cursor]

        return self._run(read)

    def write_in_turns(self) -> TurnWriter:
        """From now on, write one transaction an event-loop turn (``sqlite_turns``); returns
        the writer, for the state file to commit after it (``SqliteQueueStore.commit_after``).

        For a sink that is its file's only writer and whose first failure stops the crawl
        (the embedded crawl's): a failed write then rolls back the turn and fails every later
        one, where a sink committing each write fails that write alone.
        """
        self._turns = TurnWriter(self._connection, self.path, partial(_state_error, self.path))
        return self._turns

    async def close(self) -> None:
        try:
            if self._turns is not None:
                self._turns.close()
        finally:
            self._run(self._connection.close)

    def _run(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except sqlite3.Error as exc:
            raise _state_error(self.path, exc) from exc

    def _write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """``work`` in one write transaction, or in the turn's (``write_in_turns``)."""
        if self._turns is not None:
            with self._turns.transaction() as db:
                work(db)
            return
        try:
            with sqlitedb.write(self._connection) as db:
                work(db)
        except sqlite3.Error as exc:
            raise _state_error(self.path, exc) from exc


def _connect(
    path: Path, crawl_id: str, busy_timeout_s: float, max_size_bytes: int | None
) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        connection = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise _state_error(path, exc) from exc
    try:
        sqlitedb.tune(connection, cache_mib=sqlitedb.ITEMS_CACHE_MIB)
        sqlite_schema.prepare(connection, path, crawl_id)
        if max_size_bytes is not None:
            page_size = connection.execute("PRAGMA page_size").fetchone()[0]
            connection.execute(f"PRAGMA max_page_count={max(1, max_size_bytes // page_size)}")
    except sqlite3.Error as exc:
        connection.close()
        raise _state_error(path, exc) from exc
    except StateError:
        connection.close()
        raise
    return connection


def _state_error(path: Path, exc: sqlite3.Error) -> StateError:
    message = str(exc)
    if "locked" in message or "busy" in message:
        return StateError(f"items database {path} is locked by another process ({message})")
    if "full" in message:
        return StateError(
            f"items database {path}: disk full or size limit reached; the batch was not stored"
        )
    if "not a database" in message or "malformed" in message:
        return StateError(f"items database {path} is corrupt ({message})")
    return StateError(f"items database {path}: {message}")

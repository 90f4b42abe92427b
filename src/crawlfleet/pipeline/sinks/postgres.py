"""The PostgreSQL item sink and reject store: JSONB rows of one crawl.

The sink follows the rules of the SQLite sink (see ``crawlfleet.pipeline.sinks.sqlite``): a
row is identified by (crawl_id, item_type, item_key); a batch is reduced by
``stored.batch_rows`` (NUL removed, one row per key); ``INSERT … ON CONFLICT … DO UPDATE
… WHERE`` (in ``postgres_functions``) touches an existing row only with a version at
least as new (``fetched_at``, then the content hash in byte order); ``last_seen`` and
``fetched_at`` move, and ``data``, ``content_hash`` and ``last_changed`` change only when the
content hash changed. Times are stored to the microsecond. ``PostgresRejects`` keeps invalid
items in ``item_rejects``. Each write records its ``new``, ``changed`` and ``gone`` items in
``item_changes`` in its transaction (``postgres_writes``): the sink is the ``PageTracker``.

A write that fails (server down, connection lost) raises ``StateError`` and the caller keeps
the batch; the next write reconnects. The schema comes from ``postgres_schema.migrate``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import psycopg

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.rejects import Reject, reject_row
from crawlfleet.pipeline.sinks import postgres_changes, postgres_writes
from crawlfleet.pipeline.sinks.postgres_writes import PageWrite
from crawlfleet.pipeline.sinks.stored import batch_rows
from crawlfleet.redact import redact

DEADLOCK_TRIES = 3
"""Times a group commit is run while PostgreSQL aborts it to break a deadlock."""

PEER_TIMEOUTS = (
    "SELECT set_config('tcp_keepalives_idle', '5', false),"
    " set_config('tcp_keepalives_interval', '2', false),"
    " set_config('tcp_keepalives_count', '3', false),"
    " set_config('tcp_user_timeout', '10000', false)"
)
"""The server probes a session's silent peer after 5 s, every 2 s, and closes the session
after 3 unanswered probes, or once data it sent stays unacknowledged for 10 s (a dead peer
with a reply in flight: keepalives do not run then): see ``connect_session``."""

INSERT_REJECT = """
INSERT INTO item_rejects (crawl_id, item_type, item_key, url, reason, data, at)
VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)
"""


def timestamp(epoch_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC)


async def connect_session(dsn: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    """A connection to ``dsn`` whose server notices within seconds that this end is gone.

    A worker whose network goes down in the middle of a transaction leaves its backend
    waiting, holding the rows the transaction locked; by default the server notices a dead
    peer after two hours of silence, or ~15 minutes of retransmissions. The cut worker's
    leases come back within seconds, another worker fetches its pages again, and its writes
    of the same rows wait on those locks: the crawl stops. Probes and acknowledgements come
    from the peer's kernel, so a worker that is only slow (a long parse on its event loop)
    keeps its session. Set with ``set_config`` after connecting, not as startup options,
    which a connection pooler may refuse."""
    conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=10, autocommit=True)
    try:
        await conn.execute(PEER_TIMEOUTS)
    except psycopg.Error:
        await conn.close()
        raise
    return conn


Work = Callable[[postgres_changes.Cursor], Awaitable[None]] | PageWrite
"""What one call does inside a transaction: a ``PageWrite``, or statements it sends with a
cursor (no results are read: the transaction waits for the server once, at its end)."""


@dataclass(slots=True)
class _Pending:
    """One call waiting for its work to be committed."""

    work: Work
    done: bool = False
    error: StateError | None = None


class _Connection:
    """One connection to ``dsn``, opened on first use and again after it broke.

    Its transactions run one at a time, so concurrent pages of one process may share it.
    Calls that arrive while a transaction runs are committed together in the next one (group
    commit): each call still returns only once its own work is committed, so a page's items
    are stored before its lease ends; with 64 pages in flight that is a few transactions a
    second instead of one per page. A group that fails is tried again call by call, so one
    call's bad rows fail only that call (each call's work must be safe to run again).

    Consecutive ``PageWrite`` calls are sent together, one statement for all of them
    (``postgres_writes``, decisions 0023 and 0037). A group that is that one statement runs
    alone, its own transaction (the connection is in autocommit); any other group runs in a
    transaction in pipeline mode: every call sends its statements and none reads results, so
    the group waits for the server once, and the server runs the statements in the order
    sent, so a call reads what the calls before it wrote.
    """

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self.lock = asyncio.Lock()
        self._queue: list[_Pending] = []

    async def connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = await connect_session(self._dsn)
            except psycopg.Error as exc:
                raise self.error(exc) from None
        return self._conn

    async def run(self, work: Work) -> None:
        """Runs ``work`` with a cursor, in one transaction (perhaps with other calls')."""
        mine = _Pending(work)
        self._queue.append(mine)
        async with self.lock:
            if not mine.done:  # not committed by the group of an earlier holder of the lock
                group, self._queue = self._queue, []
                try:
                    await self._commit(group)
                finally:  # cancelled meanwhile: the others' work waits for the next holder
                    self._queue[:0] = [p for p in group if not p.done]
        if mine.error is not None:
            raise mine.error

    async def run_many(self, statement: str, rows: Sequence[tuple[object, ...]]) -> None:
        """Runs ``statement`` once per row, in one transaction (perhaps with other calls')."""

        async def work(cur: postgres_changes.Cursor) -> None:
            await cur.executemany(statement, rows)

        await self.run(work)

    async def _commit(self, group: list[_Pending]) -> None:
        try:
            await self._transaction(group)
        except StateError as exc:
            if len(group) == 1:
                group[0].error = exc
                group[0].done = True
                return
            for pending in group:
                try:
                    await self._transaction([pending])
                except StateError as one:
                    pending.error = one
                pending.done = True
            return
        for pending in group:
            pending.done = True

    async def _transaction(self, group: list[_Pending]) -> None:
        """``group`` in one transaction; tried again while PostgreSQL picks it as the victim of
        a deadlock (with another worker's or program's transaction), ``DEADLOCK_TRIES`` times."""
        for tries_left in range(DEADLOCK_TRIES - 1, -1, -1):
            try:
                await self._once(group)
                return
            except psycopg.errors.DeadlockDetected as exc:
                if not tries_left:
                    raise self.error(exc) from None

    async def _once(self, group: list[_Pending]) -> None:
        conn = await self.connect()
        try:
            if (batch := _one_batch(group)) is not None:  # its own transaction: autocommit
                async with conn.cursor() as cur:
                    await postgres_writes.send_batch(cur, batch)
                return
            async with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                writes: list[PageWrite] = []
                for pending in group:
                    if isinstance(pending.work, PageWrite):
                        writes.append(pending.work)
                        continue
                    await postgres_writes.send(cur, writes)
                    writes = []
                    await pending.work(cur)
                await postgres_writes.send(cur, writes)
        except psycopg.errors.DeadlockDetected:
            raise  # rolled back: the connection is usable, and the group is tried again
        except psycopg.Error as exc:
            await conn.close()
            raise self.error(exc) from None

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    def error(self, exc: psycopg.Error) -> StateError:
        return StateError(redact(f"PostgreSQL at {self._dsn}: {exc}".strip(), self._dsn))


def _one_batch(group: list[_Pending]) -> list[PageWrite] | None:
    """The group's writes when they are all ``PageWrite`` calls of one batch."""
    writes = [pending.work for pending in group if isinstance(pending.work, PageWrite)]
    if len(writes) < len(group):
        return None
    cut = postgres_writes.batches(writes)
    return cut[0] if len(cut) == 1 else None


class PostgresSink:
    """Upserts item batches of crawl ``crawl_id`` into ``items``; one transaction per ``write``."""

    def __init__(self, dsn: str, *, crawl_id: str = "", clock: Clock | None = None) -> None:
        self._db = _Connection(dsn)
        self._crawl_id = crawl_id
        self._clock = clock or SystemClock()

    @classmethod
    async def open(
        cls, dsn: str, *, crawl_id: str = "", clock: Clock | None = None
    ) -> PostgresSink:
        """Connect now, so a wrong DSN is a clear start-up error (``StateError``)."""
        sink = cls(dsn, crawl_id=crawl_id, clock=clock)
        await sink._db.connect()
        return sink

    async def write(self, items: Sequence[Item]) -> None:
        if items:
            await self._db.run(self._write_page(items, None, ()))

    async def write_page(
        self, items: Sequence[Item], page: str, keys: Sequence[tuple[str, str]]
    ) -> None:
        """``write`` and ``page_items`` in one transaction."""
        await self._db.run(self._write_page(items, page, keys))

    async def page_items(self, page: str, keys: Sequence[tuple[str, str]]) -> None:
        await self._db.run(self._write_page((), page, keys))

    def _write_page(
        self, items: Sequence[Item], page: str | None, keys: Sequence[tuple[str, str]]
    ) -> PageWrite:
        """``items`` upserted with their changes and, for a ``page``, what it yields."""
        now_s = self._clock.now()
        return PageWrite(self._crawl_id, batch_rows(items, now_s), page, keys, timestamp(now_s))

    async def page_unchanged(self, page: str) -> None:
        now = timestamp(self._clock.now())
        crawl_id = self._crawl_id
        await self._db.run(lambda cur: postgres_changes.page_unchanged(cur, crawl_id, page, now))

    async def close(self) -> None:
        await self._db.close()


COUNT_REJECTS = (
    "SELECT item_type, count(*) FROM item_rejects WHERE crawl_id = %s GROUP BY item_type"
)


class PostgresRejects:
    """The ``RejectStore`` of the distributed runtime: crawl ``crawl_id``'s invalid items."""

    def __init__(self, dsn: str, *, crawl_id: str = "") -> None:
        self._db = _Connection(dsn)
        self._crawl_id = crawl_id

    @classmethod
    async def open(cls, dsn: str, *, crawl_id: str = "") -> PostgresRejects:
        """Connect now, so a wrong DSN is a clear start-up error (``StateError``)."""
        store = cls(dsn, crawl_id=crawl_id)
        await store._db.connect()
        return store

    async def add(self, rejects: Sequence[Reject]) -> None:
        rows = [(self._crawl_id, *reject_row(r), timestamp(r.at)) for r in rejects]
        if rows:
            await self._db.run_many(INSERT_REJECT, rows)

    async def counts(self) -> dict[str, int]:
        """How many rejects this crawl has kept, per item type (all workers' together)."""
        async with self._db.lock:
            conn = await self._db.connect()
            try:
                async with conn.transaction():
                    cursor = await conn.execute(COUNT_REJECTS, (self._crawl_id,))
                    return {str(kind): int(str(n)) for kind, n in await cursor.fetchall()}
            except psycopg.Error as exc:
                await conn.close()
                raise self._db.error(exc) from None

    async def close(self) -> None:
        await self._db.close()

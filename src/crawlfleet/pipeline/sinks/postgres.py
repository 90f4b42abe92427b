"""The PostgreSQL item sink: JSONB rows upserted by (item_type, item_key).

Same semantics as the SQLite sink: a batch is deduplicated by key (``batch_rows``), then
``INSERT … ON CONFLICT (item_type, item_key) DO UPDATE``: ``last_seen`` always moves; ``data``,
``content_hash`` and ``last_changed`` change only when the content hash changed. A write that
fails (server down, connection lost) raises ``StateError`` and the caller keeps the batch; the
next write reconnects. The schema comes from ``postgres_schema.migrate``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import psycopg

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.sinks.stored import batch_rows
from crawlfleet.urls import redact_url

UPSERT = """
INSERT INTO items AS i (item_type, item_key, data, content_hash, crawl_id,
                        first_seen, last_seen, last_changed)
VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s)
ON CONFLICT (item_type, item_key) DO UPDATE SET
    last_seen = excluded.last_seen,
    data = CASE WHEN i.content_hash = excluded.content_hash THEN i.data ELSE excluded.data END,
    last_changed = CASE WHEN i.content_hash = excluded.content_hash
                        THEN i.last_changed ELSE excluded.last_changed END,
    content_hash = excluded.content_hash
"""


class PostgresSink:
    """Upserts item batches into ``items``; one transaction per ``write``."""

    def __init__(self, dsn: str, *, crawl_id: str = "", clock: Clock | None = None) -> None:
        self._dsn = dsn
        self._crawl_id = crawl_id
        self._clock = clock or SystemClock()
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    @classmethod
    async def open(
        cls, dsn: str, *, crawl_id: str = "", clock: Clock | None = None
    ) -> PostgresSink:
        """Connect now, so a wrong DSN is a clear start-up error (``StateError``)."""
        sink = cls(dsn, crawl_id=crawl_id, clock=clock)
        await sink._connection()
        return sink

    async def _connection(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = await psycopg.AsyncConnection.connect(self._dsn, connect_timeout=10)
            except psycopg.Error as exc:
                raise StateError(f"PostgreSQL at {redact_url(self._dsn)}: {exc}".strip()) from None
        return self._conn

    async def write(self, items: Sequence[Item]) -> None:
        if not items:
            return
        now = dt.datetime.fromtimestamp(self._clock.now(), dt.UTC)
        rows = [
            (r.item_type, r.item_key, r.data_json, r.content_hash, self._crawl_id, now, now, now)
            for r in batch_rows(items)
        ]
        conn = await self._connection()
        try:
            async with conn.transaction(), conn.cursor() as cur:
                await cur.executemany(UPSERT, rows)
        except psycopg.Error as exc:
            await conn.close()
            raise StateError(f"PostgreSQL at {redact_url(self._dsn)}: {exc}".strip()) from None

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

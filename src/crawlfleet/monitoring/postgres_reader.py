"""What the dashboard reads of a fleet's PostgreSQL: filtered attempts, the latest items and
the quality scores a crawl's dispatcher wrote.

Any crawl id, over one read-only connection (``autocommit``, ``read_only``): it never writes
and never migrates. A database no worker has migrated yet has no tables: both reads answer
empty. A failure is a one-line ``StateError`` (password redacted); the next read reconnects.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg import sql

from crawlfleet.errors import StateError
from crawlfleet.monitoring.postgres_attempt_log import attempt_from_row
from crawlfleet.monitoring.postgres_quality import SELECT_SCORES, SELECT_TYPES, quality_of
from crawlfleet.records import ATTEMPT_COLUMNS as COLUMNS
from crawlfleet.records import Attempt, AttemptFilter
from crawlfleet.redact import redact

LATEST_ITEMS = (
    "SELECT item_type, data FROM items WHERE crawl_id = %s ORDER BY last_seen DESC LIMIT %s"
)

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresReader:
    """Read-only queries over the ``attempts`` and ``items`` tables of every crawl."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, dsn: str) -> PostgresReader:
        """Connect now, so a wrong DSN is a start-up error (``StateError``)."""
        reader = cls(dsn)
        async with reader._lock:
            await reader._connection()
        return reader

    async def attempts(self, crawl_id: str, where: AttemptFilter, limit: int) -> list[Attempt]:
        """The latest attempts of ``crawl_id`` matching ``where``, newest first."""
        clauses: list[sql.Composable] = [sql.SQL("crawl_id = %s")]
        params: list[object] = [crawl_id]
        for column, value in (
            ("domain", where.domain),
            ("outcome", where.outcome),
            ("status", where.status),
        ):
            if value is not None:
                clauses.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                params.append(value)
        query = sql.SQL("SELECT {} FROM attempts WHERE {} ORDER BY id DESC LIMIT %s").format(
            sql.SQL(COLUMNS), sql.SQL(" AND ").join(clauses)
        )
        return [attempt_from_row(row) for row in await self._fetch(query, (*params, limit))]

    async def latest_items(self, crawl_id: str, limit: int) -> list[tuple[str, Any]]:
        """``(item_type, data)`` of the items of ``crawl_id`` seen last, newest first."""
        rows = await self._fetch(sql.SQL(LATEST_ITEMS), (crawl_id, limit))
        return [(str(item_type), data) for item_type, data in rows]

    async def quality(self, crawl_id: str) -> dict[str, Any] | None:
        """The quality scores the dispatcher of ``crawl_id`` last wrote (``postgres_quality``);
        None when it wrote none."""
        scores = await self._fetch(sql.SQL(SELECT_SCORES), (crawl_id,))
        types = await self._fetch(sql.SQL(SELECT_TYPES), (crawl_id,))
        return quality_of(scores, types)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _error(self, exc: psycopg.Error) -> StateError:
        text = " ".join(str(exc).split())
        return StateError(redact(f"PostgreSQL at {self._dsn}: {text}", self._dsn))

    async def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = await psycopg.AsyncConnection.connect(
                    self._dsn, connect_timeout=10, autocommit=True
                )
                await self._conn.set_read_only(True)
            except psycopg.Error as exc:
                raise self._error(exc) from None
        return self._conn

    async def _fetch(self, query: sql.SQL | sql.Composed, params: tuple[object, ...]) -> list[Any]:
        """Run a query; a connection lost since the last call (a restart) is replaced once."""
        async with self._lock:
            for retry in (True, False):
                conn = await self._connection()
                try:
                    async with conn.cursor() as cur:
                        await cur.execute(query, params)
                        return await cur.fetchall()
                except psycopg.errors.UndefinedTable:
                    return []
                except psycopg.OperationalError as exc:
                    await conn.close()
                    if not retry:
                        raise self._error(exc) from None
                except psycopg.Error as exc:
                    await conn.close()
                    raise self._error(exc) from None
        raise StateError(f"PostgreSQL at {redact(self._dsn)}: unreachable")

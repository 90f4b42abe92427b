"""``AttemptLog`` in PostgreSQL: the ``attempts`` table, one crawl id per log.

The table comes from ``pipeline.sinks.postgres_schema.migrate``. The dispatcher's
``AttemptCopier`` writes it (unique on ``(crawl_id, fingerprint, retry, at)``, so a repeated
copy adds nothing); ``recent`` and ``top_errors`` read only this log's ``crawl_id``. A write
that fails (server down, connection lost) raises ``StateError``; the next call reconnects.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence

import psycopg

from crawlfleet.errors import StateError
from crawlfleet.monitoring.postgres_link import PostgresLink
from crawlfleet.pipeline.text import strip_nul
from crawlfleet.records import ATTEMPT_COLUMNS as COLUMNS
from crawlfleet.records import Attempt, Outcome, attempt_of
from crawlfleet.redact import redact

INSERT = f"""
INSERT INTO attempts (crawl_id, {COLUMNS})
SELECT %s, {COLUMNS} FROM unnest(
    %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::integer[], %b::integer[],
    %b::float8[], %b::integer[], %b::timestamptz[], %b::text[], %b::text[], %b::text[],
    %b::text[], %b::text[], %b::integer[], %b::text[]
) WITH ORDINALITY AS a ({COLUMNS}, n)
ORDER BY n
ON CONFLICT (crawl_id, fingerprint, retry, at) DO NOTHING
"""
"""A batch of attempts in one statement, one array per column, inserted in order (``recent``
reads the newest by id); a row already copied is skipped."""
RECENT = f"SELECT {COLUMNS} FROM attempts WHERE crawl_id = %s ORDER BY id DESC LIMIT %s"
RECENT_FOR_URL = (
    f"SELECT {COLUMNS} FROM attempts WHERE crawl_id = %s AND url = %s ORDER BY id DESC LIMIT %s"
)
TOP_ERRORS = """
SELECT coalesce(error, ''), count(*) FROM attempts WHERE crawl_id = %s AND outcome = %s
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %s
"""


class PostgresAttemptLog:
    """The attempts of one crawl in the ``attempts`` table."""

    def __init__(self, dsn: str, *, crawl_id: str) -> None:
        self.crawl_id = crawl_id
        self._link = PostgresLink(dsn)
        self._lock = asyncio.Lock()  # one connection: one statement at a time

    @classmethod
    async def open(cls, dsn: str, *, crawl_id: str) -> PostgresAttemptLog:
        """Connect now, so a wrong DSN is a start-up error (``StateError``)."""
        log = cls(dsn, crawl_id=crawl_id)
        await log._link.connection()
        return log

    async def _fetch(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        """Run a query; a connection lost since the last call (a restart) is replaced once."""
        for retry in (True, False):
            conn = await self._link.connection()
            try:
                async with self._lock, conn.cursor() as cur:
                    await cur.execute(sql, params)
                    return await cur.fetchall()
            except psycopg.OperationalError as exc:
                await conn.close()
                if not retry:
                    raise self._link.error(exc) from None
            except psycopg.Error as exc:
                await conn.close()
                raise self._link.error(exc) from None
        raise StateError(f"PostgreSQL at {redact(self._link.dsn)}: unreachable")

    async def record(self, attempts: Sequence[Attempt]) -> None:
        if not attempts:
            return
        rows = [  # one type a column: an array takes no mix (a whole number where floats are)
            (
                a.url,
                a.fingerprint,
                a.domain,
                a.worker,
                a.outcome.value,
                None if a.status is None else int(a.status),
                int(a.bytes),
                float(a.latency_s),
                int(a.retry),
                dt.datetime.fromtimestamp(a.at, dt.UTC),
                strip_nul(a.error),  # a parser's message or traceback may quote the page
                a.fetcher,
                strip_nul(a.detail),
                a.session_id,
                a.proxy_id,
                None if a.tier is None else int(a.tier),
                a.screenshot,
            )
            for a in attempts
        ]
        columns = [list(column) for column in zip(*rows, strict=True)]
        conn = await self._link.connection()
        try:
            async with self._lock, conn.cursor() as cur:
                await cur.execute(INSERT, (self.crawl_id, *columns))
        except psycopg.Error as exc:
            await conn.close()
            raise self._link.error(exc) from None

    async def recent(self, limit: int = 100, url: str | None = None) -> list[Attempt]:
        if url is None:
            rows = await self._fetch(RECENT, (self.crawl_id, limit))
        else:
            rows = await self._fetch(RECENT_FOR_URL, (self.crawl_id, url, limit))
        return [attempt_from_row(row) for row in rows]

    async def top_errors(self, outcome: Outcome, limit: int = 5) -> list[tuple[str, int]]:
        rows = await self._fetch(TOP_ERRORS, (self.crawl_id, outcome.value, limit))
        return [(str(error), int(str(count))) for error, count in rows]

    async def close(self) -> None:
        await self._link.close()


def attempt_from_row(row: tuple[object, ...]) -> Attempt:
    """An ``Attempt`` from a row of ``COLUMNS`` as PostgreSQL returns it."""
    at = row[9]
    if not isinstance(at, dt.datetime):
        raise StateError(f"attempts.at is {type(at).__name__}, not a timestamp")
    return attempt_of((*row[:9], at.timestamp(), *row[10:]))

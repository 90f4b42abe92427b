"""A distributed crawl's quality scores in PostgreSQL: the ``quality_scores`` and
``quality_item_types`` tables (``pipeline.sinks.postgres_schema``, migration 9).

The dispatcher writes them from the store's counters (``monitoring/quality_scores.py``)
every ``WRITE_EVERY_S`` while the crawl runs and once when it ends: per parser with
expectations, its totals (``domain`` = ``''``) and its figures on each of the crawl's
``DOMAINS`` most admitted domains; per item type, items stored, invalid and duplicate.
Counts, not shares, so a reader derives the shares exactly; each write replaces the
crawl's rows in one transaction. ``status --postgres`` and the distributed dashboard read
them back as the ``quality`` section of ``stats.json`` (``read_quality``, ``quality_of``). A failed write raises ``StateError``; the
next call reconnects.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import StateError
from crawlfleet.monitoring.postgres_link import Connection, PostgresLink
from crawlfleet.monitoring.quality_scores import ParserScore, item_type_scores, scores
from crawlfleet.redact import redact

WRITE_EVERY_S = 5.0
"""How often the dispatcher writes a running crawl's scores."""
DOMAINS = 1000
"""Per-domain rows are written for the crawl's this many most admitted domains (the totals
count every domain)."""

DELETE_SCORES = "DELETE FROM quality_scores WHERE crawl_id = %s"
DELETE_TYPES = "DELETE FROM quality_item_types WHERE crawl_id = %s"
INSERT_SCORE = """
INSERT INTO quality_scores (crawl_id, parser, domain, pages, met, items, filled, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
"""
INSERT_TYPE = """
INSERT INTO quality_item_types (crawl_id, item_type, stored, invalid, duplicate, updated_at)
VALUES (%s, %s, %s, %s, %s, %s)
"""
SELECT_SCORES = """
SELECT parser, domain, pages, met, items, filled, updated_at FROM quality_scores
WHERE crawl_id = %s ORDER BY parser, domain
"""
SELECT_TYPES = """
SELECT item_type, stored, invalid, duplicate FROM quality_item_types
WHERE crawl_id = %s ORDER BY item_type
"""


class PostgresQualityScores:
    """The quality scores of one crawl in PostgreSQL (written by its dispatcher)."""

    def __init__(self, dsn: str, *, crawl_id: str) -> None:
        self.crawl_id = crawl_id
        self._link = PostgresLink(dsn)
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, dsn: str, *, crawl_id: str) -> PostgresQualityScores:
        """Connect now, so a wrong DSN is a start-up error (``StateError``)."""
        scores_log = cls(dsn, crawl_id=crawl_id)
        await scores_log._link.connection()
        return scores_log

    async def write(self, total: CrawlStats, domains: Mapping[str, CrawlStats]) -> None:
        """Replace the crawl's rows with the scores of ``total`` and of each of ``domains``."""
        at = dt.datetime.now(dt.UTC)
        rows = [_score_row(self.crawl_id, p, "", s, at) for p, s in scores(total).items()]
        for domain, stats in sorted(domains.items()):
            rows += [_score_row(self.crawl_id, p, domain, s, at) for p, s in scores(stats).items()]
        types = [
            (self.crawl_id, name, t["stored"], t["invalid"], t["duplicate"], at)
            for name, t in item_type_scores(total).items()
        ]
        conn = await self._link.connection()
        try:
            async with self._lock, conn.transaction(), conn.cursor() as cur:
                await cur.execute(DELETE_SCORES, (self.crawl_id,))
                await cur.execute(DELETE_TYPES, (self.crawl_id,))
                if rows:
                    await cur.executemany(INSERT_SCORE, rows)
                if types:
                    await cur.executemany(INSERT_TYPE, types)
        except psycopg.Error as exc:
            await conn.close()
            raise self._link.error(exc) from None

    async def read(self) -> dict[str, Any] | None:
        """The crawl's scores as ``read_quality`` gives them."""
        conn = await self._link.connection()
        async with self._lock:
            return await read_quality(conn, self.crawl_id, self._link.dsn)

    async def close(self) -> None:
        await self._link.close()


async def read_quality(conn: Connection, crawl_id: str, dsn: str) -> dict[str, Any] | None:
    """The ``quality`` section of ``stats.json`` for ``crawl_id`` as last written, with
    ``updated_at`` (epoch s); None when nothing was written for it."""
    try:
        async with conn.cursor() as cur:
            await cur.execute(SELECT_SCORES, (crawl_id,))
            score_rows = await cur.fetchall()
            await cur.execute(SELECT_TYPES, (crawl_id,))
            type_rows = await cur.fetchall()
    except psycopg.Error as exc:
        raise StateError(redact(f"PostgreSQL at {dsn}: {exc}".strip(), dsn)) from None
    return quality_of(score_rows, type_rows)


def quality_of(
    score_rows: Sequence[Sequence[Any]], type_rows: Sequence[Sequence[Any]]
) -> dict[str, Any] | None:
    """The report ``read_quality`` gives, from the rows of ``SELECT_SCORES`` and
    ``SELECT_TYPES``; None when there are none."""
    if not score_rows and not type_rows:
        return None
    parsers: dict[str, Any] = {}
    updated_at = 0.0
    for parser, domain, pages, met, items, filled, at in score_rows:
        score = ParserScore(
            int(pages), int(met), int(items), {k: int(v) for k, v in filled.items()}
        )
        updated_at = max(updated_at, at.timestamp())
        entry = parsers.setdefault(parser, {"domains": {}})
        if domain:
            entry["domains"][domain] = score.to_dict()
        else:
            entry.update(score.to_dict())
    counters: dict[str, float] = {}
    for name, stored, invalid, duplicate in type_rows:
        counters[f"items.stored.{name}"] = float(stored)
        counters[f"items.invalid.{name}"] = float(invalid)
        counters[f"items.duplicate.{name}"] = float(duplicate)
    item_types = item_type_scores(CrawlStats(counters))
    return {"parsers": parsers, "item_types": item_types, "updated_at": updated_at}


def _score_row(
    crawl_id: str, parser: str, domain: str, score: ParserScore, at: dt.datetime
) -> tuple[object, ...]:
    filled = Jsonb(dict(score.filled))
    return (crawl_id, parser, domain, score.pages, score.met, score.items, filled, at)

"""The change feed of the PostgreSQL item store: the statement of a page seen again unchanged,
run inside the sink's transactions (``new``, ``changed`` and ``gone`` rows are written with
the items: ``postgres_writes``), and the reader behind ``crawlfleet changes --postgres``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import psycopg

from crawlfleet.errors import StateError
from crawlfleet.pipeline.changes import Change
from crawlfleet.redact import redact

TOUCH_PAGE = (
    "UPDATE items i SET last_seen = %s FROM page_items p WHERE p.crawl_id = %s AND p.page = %s"
    " AND i.crawl_id = p.crawl_id AND i.item_type = p.item_type AND i.item_key = p.item_key"
)
READ = (
    "SELECT at, item_type, item_key, change, diff FROM item_changes WHERE crawl_id = %s"
    " AND at >= %s AND (%s::text IS NULL OR item_type = %s) ORDER BY at, id"
)

Cursor = psycopg.AsyncCursor[tuple[Any, ...]]


async def page_unchanged(cur: Cursor, crawl_id: str, page: str, now: dt.datetime) -> None:
    await cur.execute(TOUCH_PAGE, (now, crawl_id, page))


def postgres_changes(
    dsn: str, *, crawl_id: str, since: float, item_type: str | None
) -> Iterator[Change]:
    """The crawl's change feed, oldest first."""
    after = dt.datetime.fromtimestamp(since, dt.UTC)
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn, conn.cursor(name="changes") as cur:
            cur.execute(READ, (crawl_id, after, item_type, item_type))
            for at, kind, key, change, fields in cur:
                yield Change(at.timestamp(), kind, key, change, fields)
    except psycopg.Error as exc:
        raise StateError(redact(f"PostgreSQL at {dsn}: {exc}".strip(), dsn)) from None

"""The change feed of the PostgreSQL item store: statements run inside the sink's transactions,
and the reader behind ``crawlfleet changes --postgres``.

A write locks the stored versions of its rows first (``SELECT … FOR UPDATE`` of each row by
its primary key, in (type, key) order, as the upsert takes them), so two workers writing one
key record one change each in the order their writes apply; the upsert (``RETURNING (xmax =
0)``) tells an insert from an update, so a key two workers insert at once is ``new`` once.

The sink's transactions run in pipeline mode: ``write_page`` sends the lock, the upsert, the
removal of what the page yielded before and its new page items at once, and reads their
results in one round trip; the changes they imply are sent without waiting (with the next
page's statements or the COMMIT). One round trip a page where there were five (decision
0023); only a page whose items moved elsewhere waits again, to ask whether they are ``gone``.

The lock names the whole key in one equality each so that every plan is one index probe
per row. Matching the batch's keys against ``unnest`` of two arrays (as before) let the
plan PostgreSQL caches for a prepared statement, made while the crawl's rows were few,
read every row of the crawl at every write: 0.5 ms a write at 3,800 items, growing with
the crawl (``tests/integration/test_postgres_sink.py``, decision 0021).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb

from crawlfleet.errors import StateError
from crawlfleet.pipeline.changes import CHANGED, GONE, NEW, Change, diff
from crawlfleet.pipeline.sinks.stored import Row
from crawlfleet.redact import redact

LOCK_OLD = (
    "SELECT data, content_hash FROM items"
    " WHERE crawl_id = %s AND item_type = %s AND item_key = %s FOR UPDATE"
)
INSERT_CHANGE = (
    "INSERT INTO item_changes (crawl_id, at, item_type, item_key, change, diff)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
)
FORGET_PAGE = (
    "DELETE FROM page_items WHERE crawl_id = %s AND page = %s RETURNING item_type, item_key"
)
ADD_PAGE_ITEM = (
    "INSERT INTO page_items (crawl_id, page, item_type, item_key) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING"
)
YIELDED_ELSEWHERE = (
    "SELECT 1 FROM page_items WHERE crawl_id = %s AND item_type = %s AND item_key = %s LIMIT 1"
)
TOUCH_PAGE = (
    "UPDATE items i SET last_seen = %s FROM page_items p WHERE p.crawl_id = %s AND p.page = %s"
    " AND i.crawl_id = p.crawl_id AND i.item_type = p.item_type AND i.item_key = p.item_key"
)
READ = (
    "SELECT at, item_type, item_key, change, diff FROM item_changes WHERE crawl_id = %s"
    " AND at >= %s AND (%s::text IS NULL OR item_type = %s) ORDER BY at, id"
)

Cursor = psycopg.AsyncCursor[tuple[Any, ...]]


async def run_rows(
    cur: Cursor, statement: str, rows: Sequence[Sequence[object]], *, returning: bool = False
) -> None:
    """``executemany``, or ``execute`` for one row: psycopg runs ``executemany`` in pipeline
    mode, ~105 µs of client CPU for one row against ~65 µs for ``execute``, and most pages
    write one item (one lock, one upsert, one change, one page item)."""
    if len(rows) == 1:
        await cur.execute(statement, rows[0])
    else:
        await cur.executemany(statement, rows, returning=returning)


async def write_page(
    cur: Cursor,
    upsert: str,
    crawl_id: str,
    rows: Sequence[Row],
    params: Sequence[tuple[object, ...]],
    page: str | None,
    keys: Sequence[tuple[str, str]],
    now: dt.datetime,
) -> None:
    """Upsert ``rows`` (sorted by (type, key), one per key; ``params`` are their upsert
    parameters) and record their changes; if ``page`` is given, record that it yields
    ``keys`` now, and its items yielded nowhere any more as ``gone``."""
    conn = cur.connection
    async with conn.cursor() as locked, conn.cursor() as forgotten, conn.cursor() as added:
        if rows:
            keyed = [(crawl_id, row.item_type, row.item_key) for row in rows]
            await run_rows(locked, LOCK_OLD, keyed, returning=True)
            await run_rows(cur, upsert, params, returning=True)
        if page is not None:
            await forgotten.execute(FORGET_PAGE, (crawl_id, page))
            if keys:
                await run_rows(added, ADD_PAGE_ITEM, [(crawl_id, page, *k) for k in keys])
        changes = await _changes(cur, locked, crawl_id, rows, now) if rows else []
        if changes:
            await run_rows(locked, INSERT_CHANGE, changes)
        if page is not None:
            before = {(str(t), str(k)) for t, k in await forgotten.fetchall()}
            await _record_gone(cur, crawl_id, sorted(before - set(keys)), now)


async def _changes(
    upserted: Cursor, locked: Cursor, crawl_id: str, rows: Sequence[Row], now: dt.datetime
) -> list[tuple[object, ...]]:
    old: dict[tuple[str, str], tuple[Any, str]] = {}
    for row in rows:
        stored = await locked.fetchone()
        if stored is not None:
            old[(row.item_type, row.item_key)] = (stored[0], str(stored[1]))
        locked.nextset()
    changes: list[tuple[object, ...]] = []
    for row in rows:
        applied = await upserted.fetchone()
        stored = old.get((row.item_type, row.item_key))
        if applied is not None and applied[0]:
            changes.append((crawl_id, now, row.item_type, row.item_key, NEW, None))
        elif applied is not None and stored is not None and stored[1] != row.content_hash:
            fields = Jsonb(diff(stored[0], orjson.loads(row.data_json)))
            changes.append((crawl_id, now, row.item_type, row.item_key, CHANGED, fields))
        upserted.nextset()
    return changes


async def _record_gone(
    cur: Cursor, crawl_id: str, dropped: Sequence[tuple[str, str]], now: dt.datetime
) -> None:
    """``gone`` for each of ``dropped`` (items a page no longer yields) no page yields."""
    for item_type, item_key in dropped:
        await cur.execute(YIELDED_ELSEWHERE, (crawl_id, item_type, item_key))
        if await cur.fetchone() is None:
            await cur.execute(INSERT_CHANGE, (crawl_id, now, item_type, item_key, GONE, None))


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

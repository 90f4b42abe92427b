"""The change feed of the PostgreSQL item store: statements run inside the sink's transactions,
and the reader behind ``crawlfleet changes --postgres``.

A write locks the stored versions of its rows first (``SELECT … FOR UPDATE`` of each row by
its primary key, in (type, key) order, as the upsert takes them), so two workers writing one
key record one change each in the order their writes apply; the upsert (``RETURNING (xmax =
0)``) tells an insert from an update, so a key two workers insert at once is ``new`` once.

The sink's transactions run in pipeline mode (``postgres._Connection``): ``write_page``
sends the lock, the upsert and the page's new page items (``SET_PAGE``, which also returns
what the page yields no more) and returns a ``Finish`` that reads their results and sends the
changes they imply, so a group of pages waits for the server about twice where each page
waited five times (decision 0023); only a page whose items moved elsewhere waits again, to
ask whether they are ``gone``.

The lock names the whole key in one equality each so that every plan is one index probe
per row. Matching the batch's keys against ``unnest`` of two arrays (as before) let the
plan PostgreSQL caches for a prepared statement, made while the crawl's rows were few,
read every row of the crawl at every write: 0.5 ms a write at 3,800 items, growing with
the crawl (``tests/integration/test_postgres_sink.py``, decision 0021).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Iterator, Sequence
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
SET_PAGE = """
WITH yields (item_type, item_key) AS (SELECT * FROM unnest(%(types)s::text[], %(keys)s::text[])),
dropped AS (
    DELETE FROM page_items p WHERE p.crawl_id = %(crawl)s AND p.page = %(page)s
    AND NOT EXISTS (
        SELECT 1 FROM yields y WHERE y.item_type = p.item_type AND y.item_key = p.item_key
    )
    RETURNING p.item_type, p.item_key
),
added AS (
    INSERT INTO page_items (crawl_id, page, item_type, item_key)
    SELECT %(crawl)s, %(page)s, item_type, item_key FROM yields ON CONFLICT DO NOTHING
)
SELECT item_type, item_key FROM dropped
"""
"""The page yields ``types``/``keys`` now: the rows of what it yielded before and no longer
does are deleted and returned, the new ones added, the rest left as they are (the delete and
the insert never touch one row, which one statement could not order)."""
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
Finish = Callable[[], Awaitable[None]]
"""Reads the results of statements sent before, and sends what they imply."""


async def nothing_to_read() -> None:
    """The ``Finish`` of statements whose results nobody reads."""


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
) -> Finish:
    """Send the statements that upsert ``rows`` (sorted by (type, key), one per key;
    ``params`` are their upsert parameters) and, if ``page`` is given, record that it yields
    ``keys`` now; the returned ``Finish`` records their changes, and the page's items yielded
    nowhere any more as ``gone``."""
    conn = cur.connection
    locked, upserted, dropped = conn.cursor(), conn.cursor(), conn.cursor()
    if rows:
        keyed = [(crawl_id, row.item_type, row.item_key) for row in rows]
        await run_rows(locked, LOCK_OLD, keyed, returning=True)
        await run_rows(upserted, upsert, params, returning=True)
    if page is not None:
        types, item_keys = [t for t, _ in keys], [k for _, k in keys]
        yields = {"types": types, "keys": item_keys, "crawl": crawl_id, "page": page}
        await dropped.execute(SET_PAGE, yields)

    async def finish() -> None:
        try:
            changes = await _changes(upserted, locked, crawl_id, rows, now) if rows else []
            if changes:
                await run_rows(locked, INSERT_CHANGE, changes)
            if page is not None:
                gone = sorted({(str(t), str(k)) for t, k in await dropped.fetchall()})
                await _record_gone(dropped, crawl_id, gone, now)
        finally:
            for cursor in (locked, upserted, dropped):
                await cursor.close()

    return finish


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


async def page_unchanged(cur: Cursor, crawl_id: str, page: str, now: dt.datetime) -> Finish:
    await cur.execute(TOUCH_PAGE, (now, crawl_id, page))
    return nothing_to_read


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

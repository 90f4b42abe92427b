"""The change feed of the SQLite item store: statements run inside the sink's transactions.

``upsert_with_changes`` reads the stored version of each row before the upsert and appends a
``new`` or ``changed`` row to ``changes`` for each write that the version rule lets through
with another content hash; ``page_items`` and ``page_unchanged`` serve ``PageTracker``.
Times are the sink's ``now``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from crawlfleet.pipeline.changes import CHANGED, GONE, NEW, diff
from crawlfleet.pipeline.sinks.stored import Row

OLD = (
    "SELECT data, content_hash, fetched_at FROM items"
    " WHERE crawl_id = ? AND item_type = ? AND item_key = ?"
)
INSERT_CHANGE = (
    "INSERT INTO changes (crawl_id, at, item_type, item_key, change, diff)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
PAGE_KEYS = "SELECT item_type, item_key FROM page_items WHERE crawl_id = ? AND page = ?"
FORGET_PAGE_ITEM = (
    "DELETE FROM page_items WHERE crawl_id = ? AND page = ? AND item_type = ? AND item_key = ?"
)
ADD_PAGE_ITEM = (
    "INSERT OR IGNORE INTO page_items (crawl_id, page, item_type, item_key) VALUES (?, ?, ?, ?)"
)
YIELDED_ELSEWHERE = (
    "SELECT 1 FROM page_items WHERE crawl_id = ? AND item_type = ? AND item_key = ? LIMIT 1"
)
TOUCH_PAGE = (
    "UPDATE items SET last_seen = ?1 WHERE crawl_id = ?2 AND (item_type, item_key) IN"
    " (SELECT item_type, item_key FROM page_items WHERE crawl_id = ?2 AND page = ?3)"
)


def changes_of(
    db: sqlite3.Connection, crawl_id: str, rows: Sequence[Row], now: float
) -> list[tuple[object, ...]]:
    """The ``changes`` rows that upserting ``rows`` makes (read before the upsert)."""
    found: list[tuple[object, ...]] = []
    for r in rows:
        old = db.execute(OLD, (crawl_id, r.item_type, r.item_key)).fetchone()
        if old is None:
            found.append((crawl_id, now, r.item_type, r.item_key, NEW, None))
            continue
        data, content_hash, fetched_at = old
        if content_hash == r.content_hash or (r.fetched_at, r.content_hash) < (
            fetched_at,
            content_hash,
        ):
            continue
        fields = diff(orjson.loads(data), orjson.loads(r.data_json))
        found.append(
            (crawl_id, now, r.item_type, r.item_key, CHANGED, orjson.dumps(fields).decode())
        )
    return found


def page_items(
    db: sqlite3.Connection, crawl_id: str, page: str, keys: Sequence[tuple[str, str]], now: float
) -> None:
    """Record what ``page`` yields now; its items yielded nowhere any more are ``gone``."""
    before = {(t, k) for t, k in db.execute(PAGE_KEYS, (crawl_id, page))}
    after = set(keys)
    # Only the difference is written: a first visit inserts, an unchanged revisit writes nothing.
    gone, added = sorted(before - after), after - before
    if gone:
        db.executemany(FORGET_PAGE_ITEM, [(crawl_id, page, t, k) for t, k in gone])
    if added:
        db.executemany(ADD_PAGE_ITEM, [(crawl_id, page, t, k) for t, k in added])
    for item_type, item_key in gone:
        if db.execute(YIELDED_ELSEWHERE, (crawl_id, item_type, item_key)).fetchone() is None:
            db.execute(INSERT_CHANGE, (crawl_id, now, item_type, item_key, GONE, None))


def page_unchanged(db: sqlite3.Connection, crawl_id: str, page: str, now: float) -> None:
    db.execute(TOUCH_PAGE, (now, crawl_id, page))

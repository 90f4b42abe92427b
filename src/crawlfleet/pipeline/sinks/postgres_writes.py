"""The PostgreSQL sink's writes: the pages of one group commit in a few multi-row statements.

A ``PageWrite`` is one call's rows to upsert and, for a page, the items it yields now.
``send`` takes the writes of a transaction in order and cuts them into batches in which no
item and no page comes twice; a batch is four statements, whatever its size (decision 0023):

1. ``LOCK_ROWS`` locks the stored versions of the batch's rows one key at a time, in the
   order of its arrays ((type, key) byte order: ``_send_batch`` sorts them), and returns them,
   so two workers writing one key record one change each, in the order their writes apply;
   it locks only rows that exist, so a key another transaction inserts and holds meanwhile
   can still close a deadlock, which PostgreSQL breaks by aborting one side (``postgres.py``
   tries the group again);
2. ``UPSERT_ROWS`` upserts them in that order (the rule of ``postgres.py``) and returns the
   rows it touched, ``inserted`` telling an insert from an update, so a key two workers
   insert at once is ``new`` once; a row an older version did not touch is not returned;
3. ``SET_PAGES`` records what each page yields now, deleting and returning what it yields
   no more with the other pages that yielded it before the statement (the delete and the
   insert never touch one row: one statement could not order them); it finds each page's
   rows by the primary key, then deletes them by their ``ctid``, one TID lookup a row (a
   ``ctid = ANY (array)`` condition, in a plan made while the table was empty, read every
   row of the table: decision 0033);
4. once their results are read, ``INSERT_CHANGES`` appends, call by call, the ``new`` and
   ``changed`` rows and the items ``gone``: those a page yields no more and no page yields
   at the point of its call, as if the calls had run one at a time (``_gone``).

The statements run in pipeline mode, sent before any result is read: the server runs them in
the order sent, so a batch reads what the batches before it wrote. Their arrays go in binary
(``%(name)b``): psycopg quotes each element of a text array in Python, ~20 µs a page more
of the worker's CPU (``bench/postgres_sink.py``). Each key and page is looked up in a
``LATERAL`` subquery the planner cannot flatten into a join (``FOR UPDATE``, ``OFFSET 0``), by
an index that leads with the crawl and that key (decision 0031): one probe a key, whatever the
estimates. Without it, a plan made without statistics of the crawl's rows (a table autovacuum
has not analyzed yet, a new crawl id in a table analyzed when it held other crawls, or a plan
cached while the crawl's rows were few: decision 0021) joined the keys to the crawl's rows and
read them all at every write. With that, a generic plan is as good as one made for the
arrays at hand, so the statements are prepared (psycopg's default: from a connection's fifth
call) and PostgreSQL plans each once a connection, not once a batch (decision 0033).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from crawlfleet.pipeline.changes import CHANGED, GONE, NEW, diff
from crawlfleet.pipeline.sinks.postgres_changes import Cursor, Finish
from crawlfleet.pipeline.sinks.stored import Row

LOCK_ROWS = """
SELECT i.item_type, i.item_key, i.data, i.content_hash
FROM unnest(%(types)b::text[], %(keys)b::text[]) AS k (item_type, item_key)
CROSS JOIN LATERAL (
    SELECT i.item_type, i.item_key, i.data, i.content_hash FROM items i
    WHERE i.crawl_id = %(crawl)s AND i.item_type = k.item_type AND i.item_key = k.item_key
    FOR UPDATE
) AS i
"""
UPSERT_ROWS = """
INSERT INTO items AS i (crawl_id, item_type, item_key, data, content_hash, fetched_at,
                        first_seen, last_seen, last_changed)
SELECT %(crawl)s, u.item_type, u.item_key, u.data::jsonb, u.content_hash, u.fetched_at,
       u.now, u.now, u.now
FROM unnest(%(types)b::text[], %(keys)b::text[], %(data)b::text[], %(hashes)b::text[],
            %(fetched)b::timestamptz[], %(nows)b::timestamptz[])
    AS u (item_type, item_key, data, content_hash, fetched_at, now)
ON CONFLICT (crawl_id, item_type, item_key) DO UPDATE SET
    last_seen = excluded.last_seen,
    fetched_at = excluded.fetched_at,
    data = CASE WHEN i.content_hash = excluded.content_hash THEN i.data ELSE excluded.data END,
    last_changed = CASE WHEN i.content_hash = excluded.content_hash
                        THEN i.last_changed ELSE excluded.last_changed END,
    content_hash = excluded.content_hash
WHERE (excluded.fetched_at, excluded.content_hash COLLATE "C")
      >= (i.fetched_at, i.content_hash COLLATE "C")
RETURNING i.item_type, i.item_key, (i.xmax = 0) AS inserted
"""
SET_PAGES = """
WITH yields (page, item_type, item_key) AS (
    SELECT * FROM unnest(%(yield_pages)b::text[], %(types)b::text[], %(keys)b::text[])
),
held AS (
    SELECT h.row_id FROM unnest(%(pages)b::text[]) AS g (page)
    CROSS JOIN LATERAL (
        SELECT p.ctid AS row_id, p.page, p.item_type, p.item_key FROM page_items p
        WHERE p.crawl_id = %(crawl)s AND p.page = g.page
        OFFSET 0
    ) AS h
    WHERE NOT EXISTS (
        SELECT 1 FROM yields y
        WHERE y.page = h.page AND y.item_type = h.item_type AND y.item_key = h.item_key
    )
),
dropped AS (
    DELETE FROM page_items p USING held h WHERE p.ctid = h.row_id
    RETURNING p.page, p.item_type, p.item_key, ARRAY(
        SELECT o.page FROM page_items o WHERE o.crawl_id = p.crawl_id
        AND o.item_type = p.item_type AND o.item_key = p.item_key AND o.page <> p.page
    ) AS elsewhere
),
added AS (
    INSERT INTO page_items (crawl_id, page, item_type, item_key)
    SELECT %(crawl)s, page, item_type, item_key FROM yields ON CONFLICT DO NOTHING
)
SELECT page, item_type, item_key, elsewhere FROM dropped
"""
INSERT_CHANGES = """
INSERT INTO item_changes (crawl_id, at, item_type, item_key, change, diff)
SELECT %(crawl)s, c.at, c.item_type, c.item_key, c.change, c.diff::jsonb
FROM unnest(%(ats)b::timestamptz[], %(types)b::text[], %(keys)b::text[], %(changes)b::text[],
            %(diffs)b::text[]) AS c (at, item_type, item_key, change, diff)
"""


@dataclass(frozen=True, slots=True)
class PageWrite:
    """One call's ``rows`` (one per key, by ``stored.batch_rows``) written at ``now`` and,
    if ``page`` is given, the (type, key) of every item it yields now."""

    crawl_id: str
    rows: Sequence[Row]
    page: str | None
    keys: Sequence[tuple[str, str]]
    now: dt.datetime

    def names(self) -> set[tuple[str, ...]]:
        """What may come once in a batch: its items and its page."""
        names: set[tuple[str, ...]] = {(r.item_type, r.item_key) for r in self.rows}
        if self.page is not None:
            names.add(("page", self.page, ""))
        return names


def batches(writes: Sequence[PageWrite]) -> list[list[PageWrite]]:
    """``writes`` in order, cut where a write names an item or page of its batch, or
    another crawl."""
    cut: list[list[PageWrite]] = []
    names: set[tuple[str, ...]] = set()
    for write in writes:
        mine = write.names()
        if not cut or names & mine or write.crawl_id != cut[-1][0].crawl_id:
            cut.append([])
            names = set()
        cut[-1].append(write)
        names |= mine
    return cut


async def send(cur: Cursor, writes: Sequence[PageWrite]) -> list[Finish]:
    """Send the statements of ``writes``; each returned ``Finish`` reads a batch's results
    and sends the changes they imply."""
    return [await _send_batch(cur, batch) for batch in batches(writes)]


async def _send_batch(cur: Cursor, batch: Sequence[PageWrite]) -> Finish:
    conn = cur.connection
    crawl_id = batch[0].crawl_id
    locked, upserted, dropped = conn.cursor(), conn.cursor(), conn.cursor()
    rows = sorted(
        ((row, write.now) for write in batch for row in write.rows),
        key=lambda row_at: (row_at[0].item_type, row_at[0].item_key),  # code points: bytes
    )
    pages = [write for write in batch if write.page is not None]
    if rows:
        types = [row.item_type for row, _ in rows]
        keys = [row.item_key for row, _ in rows]
        await locked.execute(LOCK_ROWS, {"types": types, "keys": keys, "crawl": crawl_id})
        upsert = {
            "crawl": crawl_id,
            "types": types,
            "keys": keys,
            "data": [row.data_json for row, _ in rows],
            "hashes": [row.content_hash for row, _ in rows],
            "fetched": [dt.datetime.fromtimestamp(row.fetched_at, dt.UTC) for row, _ in rows],
            "nows": [now for _, now in rows],
        }
        await upserted.execute(UPSERT_ROWS, upsert)
    if pages:
        yields = [(write.page, t, k) for write in pages for t, k in write.keys]
        page_params = {
            "crawl": crawl_id,
            "pages": [write.page for write in pages],
            "yield_pages": [page for page, _, _ in yields],
            "types": [t for _, t, _ in yields],
            "keys": [k for _, _, k in yields],
        }
        await dropped.execute(SET_PAGES, page_params)

    async def finish() -> None:
        try:
            old: dict[tuple[str, str], tuple[Any, str]] = {}
            applied: dict[tuple[str, str], bool] = {}
            if rows:
                old = {
                    (str(t), str(k)): (data, str(h)) for t, k, data, h in await locked.fetchall()
                }
                applied = {(str(t), str(k)): bool(new) for t, k, new in await upserted.fetchall()}
            dropped_rows = await dropped.fetchall() if pages else []
            gone = _gone(pages, dropped_rows)
            changes = _changes(batch, old, applied, gone)
            if changes:
                await locked.execute(INSERT_CHANGES, _change_params(crawl_id, changes))
        finally:
            for cursor in (locked, upserted, dropped):
                await cursor.close()

    return finish


def _gone(
    pages: Sequence[PageWrite], dropped: Sequence[tuple[Any, ...]]
) -> dict[str, list[tuple[str, str]]]:
    """Per page, the items it yields no more that no page yields when its call, made one at a
    time, would have run: a page before it in the batch as it yields now, one after it (or
    outside the batch) as it did before the batch (``elsewhere``, read then)."""
    order = {write.page: n for n, write in enumerate(pages)}
    yielded_by: dict[tuple[str, str], list[int]] = {}
    for n, write in enumerate(pages):
        for item in write.keys:
            yielded_by.setdefault(item, []).append(n)
    gone: dict[str, list[tuple[str, str]]] = {}
    for page, item_type, item_key, elsewhere in dropped:
        at = order[str(page)]
        item = (str(item_type), str(item_key))
        still = any(order.get(other, at + 1) > at for other in elsewhere)
        if not still and not any(n < at for n in yielded_by.get(item, ())):
            gone.setdefault(str(page), []).append(item)
    return {page: sorted(items) for page, items in gone.items()}


def _changes(
    batch: Sequence[PageWrite],
    old: dict[tuple[str, str], tuple[Any, str]],
    applied: dict[tuple[str, str], bool],
    gone: dict[str, list[tuple[str, str]]],
) -> list[tuple[dt.datetime, str, str, str, str | None]]:
    """(at, type, key, change, diff JSON) of each row that is new or changed, then of each
    item gone, call by call."""
    changes: list[tuple[dt.datetime, str, str, str, str | None]] = []
    for write in batch:
        for row in write.rows:
            key = (row.item_type, row.item_key)
            if key not in applied:
                continue  # an older version: nothing changed
            stored = old.get(key)
            if applied[key]:
                changes.append((write.now, row.item_type, row.item_key, NEW, None))
            elif stored is not None and stored[1] != row.content_hash:
                fields = diff(stored[0], orjson.loads(row.data_json))
                changed = orjson.dumps(fields).decode()
                changes.append((write.now, row.item_type, row.item_key, CHANGED, changed))
        if write.page is not None:
            for item_type, item_key in gone.get(write.page, ()):
                changes.append((write.now, item_type, item_key, GONE, None))
    return changes


def _change_params(
    crawl_id: str, changes: Sequence[tuple[dt.datetime, str, str, str, str | None]]
) -> dict[str, object]:
    return {
        "crawl": crawl_id,
        "ats": [c[0] for c in changes],
        "types": [c[1] for c in changes],
        "keys": [c[2] for c in changes],
        "changes": [c[3] for c in changes],
        "diffs": [c[4] for c in changes],
    }

"""The PostgreSQL sink's writes: the pages of one group commit, one statement a batch.

A ``PageWrite`` is one call's rows to upsert and, for a page, the items it yields now.
``send`` takes the writes of a transaction in order and cuts them into batches in which no
item and no page comes twice; a batch is one call of the server-side function
``crawlfleet_write_pages`` (``postgres_functions``: the locks, the upsert, what each page
yields and the change feed, in the order decision 0023 set), whatever its size, and the
client reads nothing back (decision 0037). A group that is one batch is sent alone, its own
transaction in autocommit (``send_batch``): no ``BEGIN``, no ``COMMIT``, no pipeline.

The arrays go in binary (``%(name)b``): psycopg quotes each element of a text array in
Python, ~20 µs a page more of the worker's CPU (``bench/postgres_sink.py``). The rows go in
(type, key) byte order, the order the function locks and upserts them in, so concurrent
writers that share keys wait for each other instead of deadlocking; each row and page
carries its call, so the change feed is written call by call, as if the calls had run one at
a time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from crawlfleet.pipeline.hashing import VOLATILE_FIELDS
from crawlfleet.pipeline.sinks.postgres_changes import Cursor
from crawlfleet.pipeline.sinks.stored import Row

WRITE_BATCH = """
SELECT crawlfleet_write_pages(
    %(crawl)s, %(volatile)b::text[],
    %(types)b::text[], %(keys)b::text[], %(data)b::text[], %(hashes)b::text[],
    %(fetched)b::timestamptz[], %(nows)b::timestamptz[], %(row_calls)b::integer[],
    %(row_orders)b::integer[],
    %(pages)b::text[], %(page_calls)b::integer[], %(page_nows)b::timestamptz[],
    %(yield_pages)b::text[], %(yield_types)b::text[], %(yield_keys)b::text[]
)
"""
VOLATILE = sorted(VOLATILE_FIELDS)


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


async def send(cur: Cursor, writes: Sequence[PageWrite]) -> None:
    """Send the statements of ``writes``: one a batch, with no result to read."""
    for batch in batches(writes):
        await send_batch(cur, batch)


async def send_batch(cur: Cursor, batch: Sequence[PageWrite]) -> None:
    """Send the one statement of ``batch`` (one of ``batches``)."""
    await cur.execute(WRITE_BATCH, batch_arguments(batch))


def batch_arguments(batch: Sequence[PageWrite]) -> dict[str, object]:
    """The arguments of ``crawlfleet_write_pages`` for ``batch``."""
    numbered = [(row, write.now, call) for call, write in enumerate(batch) for row in write.rows]
    rows = sorted(
        ((row, now, call, order) for order, (row, now, call) in enumerate(numbered)),
        key=lambda row_at: (row_at[0].item_type, row_at[0].item_key),  # code points: bytes
    )
    pages = [(call, write) for call, write in enumerate(batch) if write.page is not None]
    yields = [(write.page, t, k) for _, write in pages for t, k in write.keys]
    return {
        "crawl": batch[0].crawl_id,
        "volatile": VOLATILE,
        "types": [row.item_type for row, *_ in rows],
        "keys": [row.item_key for row, *_ in rows],
        "data": [row.data_json for row, *_ in rows],
        "hashes": [row.content_hash for row, *_ in rows],
        "fetched": [dt.datetime.fromtimestamp(row.fetched_at, dt.UTC) for row, *_ in rows],
        "nows": [now for _, now, _, _ in rows],
        "row_calls": [call for _, _, call, _ in rows],
        "row_orders": [order for *_, order in rows],
        "pages": [write.page for _, write in pages],
        "page_calls": [call for call, _ in pages],
        "page_nows": [write.now for _, write in pages],
        "yield_pages": [page for page, _, _ in yields],
        "yield_types": [t for _, t, _ in yields],
        "yield_keys": [k for _, _, k in yields],
    }

"""An upserting sink in a dict: the in-memory twin of the SQLite and PostgreSQL sinks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import orjson

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.models import Item
from crawlfleet.pipeline.changes import CHANGED, GONE, NEW, Change, diff
from crawlfleet.pipeline.sinks.stored import Row, StoredItem, batch_rows


class MemorySink:
    """The upsert and version rules of crawlfleet.pipeline.sinks.sqlite, with nothing on disk.

    One instance holds one crawl's items (``crawl_id``, the key namespace), its change feed
    (``changes``) and what each page yields (it is a ``PageTracker``).
    """

    def __init__(self, *, crawl_id: str = "", clock: Clock | None = None) -> None:
        self.crawl_id = crawl_id
        self._clock = clock if clock is not None else SystemClock()
        self._items: dict[tuple[str, str], StoredItem] = {}
        self._pages: dict[str, set[tuple[str, str]]] = {}
        self.changes: list[Change] = []

    async def write(self, items: Sequence[Item]) -> None:
        now = self._clock.now()
        for row in batch_rows(items, now):
            identity = (row.item_type, row.item_key)
            old = self._items.get(identity)
            if old is not None and not _newer(row, old):
                continue
            if old is not None and old.content_hash == row.content_hash:
                self._items[identity] = replace(old, last_seen=now, fetched_at=row.fetched_at)
                continue
            first_seen = old.first_seen if old is not None else now
            data = orjson.loads(row.data_json)
            if old is None:
                self.changes.append(Change(now, row.item_type, row.item_key, NEW))
            else:
                fields = diff(old.data, data)
                self.changes.append(Change(now, row.item_type, row.item_key, CHANGED, fields))
            self._items[identity] = StoredItem(
                row.item_type,
                row.item_key,
                data,
                row.content_hash,
                first_seen,
                now,
                now,
                self.crawl_id,
                row.fetched_at,
            )

    async def write_page(
        self, items: Sequence[Item], page: str, keys: Sequence[tuple[str, str]]
    ) -> None:
        await self.write(items)
        await self.page_items(page, keys)

    async def page_items(self, page: str, keys: Sequence[tuple[str, str]]) -> None:
        now = self._clock.now()
        before = self._pages.get(page, set())
        self._pages[page] = set(keys)
        for identity in sorted(before - set(keys)):
            if not any(identity in other for other in self._pages.values()):
                self.changes.append(Change(now, *identity, GONE))

    async def page_unchanged(self, page: str) -> None:
        now = self._clock.now()
        for identity in self._pages.get(page, set()):
            if identity in self._items:
                self._items[identity] = replace(self._items[identity], last_seen=now)

    async def stored(self, item_type: str | None = None) -> list[StoredItem]:
        """Every stored item (of ``item_type`` if given), ordered by type and key."""
        return [
            self._items[identity]
            for identity in sorted(self._items)
            if item_type is None or identity[0] == item_type
        ]

    async def close(self) -> None:
        """Nothing to release; the items stay readable."""


def _newer(row: Row, old: StoredItem) -> bool:
    """The version rule: ``row`` replaces ``old`` unless it is older (ties: by content hash)."""
    return (row.fetched_at, row.content_hash) >= (old.fetched_at, old.content_hash)

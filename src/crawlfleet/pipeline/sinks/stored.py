"""What an upserting sink stores per item, and the batch preparation every such sink shares.

The version rule (SQLite, PostgreSQL and memory sinks alike): an item's version is its
``fetched_at`` (the time the sink writes it when None). A stored row is replaced only by a
version that is newer, or equally new with a content hash that sorts higher, so concurrent
writers end at the same row whatever order their writes land in. Within one batch the newest
version of a key wins, and among equally new ones the last item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import content_hash
from crawlfleet.pipeline.text import strip_nul


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One stored row; the four times are epoch seconds.

    ``crawl_id`` is the key namespace: (crawl_id, item_type, item_key) identifies a row.
    """

    item_type: str
    item_key: str
    data: dict[str, Any]
    content_hash: str
    first_seen: float
    last_seen: float
    last_changed: float
    crawl_id: str
    fetched_at: float


@dataclass(frozen=True, slots=True)
class Row:
    """An item ready to upsert: ``data_json`` is the item's data as JSON text."""

    item_type: str
    item_key: str
    data_json: str
    content_hash: str
    fetched_at: float


def batch_rows(items: Sequence[Item], now: float) -> list[Row]:
    """One row per (type, key) by the version rule, sorted by (type, key), NUL removed.

    ``now`` is the version of items without ``fetched_at``. The fixed order keeps concurrent
    writers that share keys from deadlocking each other.
    """
    rows: dict[tuple[str, str], Row] = {}
    for item in items:
        data = strip_nul(item.data)
        kind = strip_nul(item.type)
        key = strip_nul(item.key) if item.key is not None else content_hash(data)
        row = Row(
            kind,
            key,
            orjson.dumps(data).decode(),
            content_hash(data),
            item.fetched_at if item.fetched_at is not None else now,
        )
        old = rows.get((kind, key))
        if old is None or row.fetched_at >= old.fetched_at:
            rows[(kind, key)] = row
    return [rows[identity] for identity in sorted(rows)]

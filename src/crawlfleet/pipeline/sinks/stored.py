"""What an upserting sink stores per item, and the batch preparation every such sink shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import content_hash, item_key


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One stored row; the three times are epoch seconds."""

    item_type: str
    item_key: str
    data: dict[str, Any]
    content_hash: str
    first_seen: float
    last_seen: float
    last_changed: float


@dataclass(frozen=True, slots=True)
class Row:
    """An item ready to upsert: ``data_json`` is the item's data as JSON text."""

    item_type: str
    item_key: str
    data_json: str
    content_hash: str


def batch_rows(items: Sequence[Item]) -> list[Row]:
    """One row per (type, key), the last item of each key winning, sorted by (type, key).

    The fixed order keeps concurrent writers that share keys from deadlocking each other.
    """
    rows: dict[tuple[str, str], Row] = {}
    for item in items:
        key = item_key(item)
        rows[(item.type, key)] = Row(
            item.type, key, orjson.dumps(item.data).decode(), content_hash(item.data)
        )
    return [rows[identity] for identity in sorted(rows)]

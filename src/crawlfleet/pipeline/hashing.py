"""Item identity: a stable content hash, and the key an item is stored under."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

import orjson

from crawlfleet.models import Item

VOLATILE_FIELDS: frozenset[str] = frozenset({"fetched_at", "scraped_at", "crawled_at"})
"""Fields that change on every visit without the item changing; left out of the hash."""


def content_hash(data: Mapping[str, Any], *, volatile: Collection[str] = VOLATILE_FIELDS) -> str:
    """Hex SHA-256 of the data as JSON with sorted keys, top-level ``volatile`` fields left out.

    Raises ``TypeError`` (``orjson.JSONEncodeError``) when a value is not JSON-serializable.
    """
    stable = {name: value for name, value in data.items() if name not in volatile}
    return hashlib.sha256(orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)).hexdigest()


def item_key(item: Item) -> str:
    """The item's own key, or its content hash when it has none."""
    return item.key if item.key is not None else content_hash(item.data)


def record(item: Item) -> dict[str, Any]:
    """The item as one flat record: ``type`` and ``key`` (never None) first, then its fields.

    ``type`` and ``key`` are reserved: a data field of either name is overridden.
    """
    return {"type": item.type, "key": item_key(item), **_without_reserved(item.data)}


def _without_reserved(data: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in data.items() if name not in ("type", "key")}

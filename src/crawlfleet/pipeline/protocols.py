"""The pipeline ports: processors an item passes through, and the sink that stores it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from crawlfleet.models import Item


class Processor(Protocol):
    """Returns the (possibly changed) item, or raises ``DropItem`` with a reason."""

    def __call__(self, item: Item) -> Item: ...


class Sink(Protocol):
    """Stores items durably.

    ``write`` upserts a batch keyed by (item type, item key) within the sink's crawl: a row
    is replaced only by a version at least as new (``Item.fetched_at``; see
    ``sinks.stored``), and an item whose content hash is unchanged only moves ``last_seen``.
    The file sinks (JSONL, CSV) append every item instead. When ``write`` returns, the batch is durable; an
    exception means none of it may be assumed stored (the caller keeps the batch).
    """

    async def write(self, items: Sequence[Item]) -> None: ...

    async def close(self) -> None: ...

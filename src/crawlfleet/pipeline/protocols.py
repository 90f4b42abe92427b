"""The pipeline ports: processors an item passes through, and the sink that stores it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class PageTracker(Protocol):
    """Keeps which items each page yields, for the change feed (``pipeline/changes.py``).

    The upserting sinks (SQLite, PostgreSQL) record ``new`` and ``changed`` items in their
    ``write``; this port adds what ``write`` cannot see. ``page`` is the request URL of
    the page's request.
    """

    async def write_page(
        self, items: Sequence[Item], page: str, keys: Sequence[tuple[str, str]]
    ) -> None:
        """``write(items)`` then ``page_items(page, keys)``, in one transaction where the sink
        has transactions (one write of the page instead of two); for a sink that is its own
        tracker, with a page's items in one batch."""
        ...

    async def page_items(self, page: str, keys: Sequence[tuple[str, str]]) -> None:
        """The page now yields exactly these (item type, item key).

        An item it yielded at its last visit and no longer yields, and that no other page
        yields, is recorded ``gone``; a page answering 404 or 410 yields ``[]``.
        """
        ...

    async def page_unchanged(self, page: str) -> None:
        """The page is as at its last visit (a 304, or the same body): its items' ``last_seen``
        moves to now."""
        ...

"""The item pipeline: ordered processors, then the sink, with every outcome counted and evented.

Durability: ``process`` writes through. When it returns, every item it accepted is in the sink
and every invalid item is in the rejects store, so the crawl loop completes a page's lease
only after ``process`` returned for that page. When it raises (the sink or the rejects store
failed, or a processor has a bug), nothing may be assumed stored and the page must be retried;
the sinks' upserts make the retry harmless.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import orjson

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import DropItem
from crawlfleet.events import EventBus, ItemDropped, ItemInvalid, ItemsStored, SchemaChanged
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import item_key
from crawlfleet.pipeline.processors import DUPLICATE, InvalidItem, StatefulProcessor
from crawlfleet.pipeline.protocols import PageTracker, Processor, Sink
from crawlfleet.pipeline.quality import DataQuality
from crawlfleet.pipeline.rejects import Reject, RejectStore
from crawlfleet.pipeline.schema_watch import SchemaChange, SchemaWatch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PipelineOutcome:
    """What became of one page's items: stored, dropped (per reason), invalid.

    ``by_type`` counts them per item type and fate: ``stored``, ``invalid``, ``duplicate``
    (the ``Dedupe`` drop) or ``dropped`` (any other drop), e.g. ``{"product": {"stored": 3}}``.
    """

    stored: int
    dropped: Mapping[str, int] = field(default_factory=dict)
    invalid: int = 0
    by_type: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    schema_changes: tuple[SchemaChange, ...] = ()
    """Schema changes these items showed first (``pipeline/schema_watch.py``)."""


class Pipeline:
    """Runs each item through ``processors`` top to bottom, then writes the survivors to ``sink``.

    ``batch_size`` caps the items per ``sink.write`` call. Items a processor refuses with
    ``InvalidItem``, or whose data is not JSON-serializable, go to ``rejects`` (when given)
    and are counted as invalid; other ``DropItem`` reasons are counted as drops. With a
    ``tracker`` (the sink's ``PageTracker``), a page's stored and duplicate items are
    recorded as what it yields, after they are stored. ``schema`` watches the stored items'
    schema per type and logs each change once (``pipeline/schema_watch.py``).
    """

    def __init__(
        self,
        processors: Sequence[Processor],
        sink: Sink,
        *,
        events: EventBus,
        batch_size: int = 100,
        rejects: RejectStore | None = None,
        quality: DataQuality | None = None,
        clock: Clock | None = None,
        tracker: PageTracker | None = None,
        schema: SchemaWatch | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.processors: tuple[Processor, ...] = tuple(processors)
        self.quality = quality if quality is not None else DataQuality()
        self.schema = schema if schema is not None else SchemaWatch()
        self._sink = sink
        self._events = events
        self._batch_size = batch_size
        self._rejects = rejects
        self._clock = clock if clock is not None else SystemClock()
        self._tracker = tracker
        # the sink is its own tracker (SQLite, PostgreSQL): a page's items and its keys in
        # one transaction (``PageTracker.write_page``)
        self._sink_tracks = tracker is not None and cast(object, tracker) is sink

    async def process(
        self,
        items: Sequence[Item],
        domain: str,
        *,
        fetched_at: float | None = None,
        page: str | None = None,
    ) -> PipelineOutcome:
        """Processes and stores one page's items; ``domain`` is the page's politeness key.

        ``fetched_at`` (epoch seconds) is when the page was fetched: the version the sinks
        keep the newest of, given to every item that has none after the processors.
        ``page`` (the request's URL) is the page they came from, for the change feed.
        """
        yielded: list[tuple[str, str]] = []
        accepted: list[Item] = []
        dropped: Counter[str] = Counter()
        drops: list[ItemDropped] = []
        rejects: list[Reject] = []
        try:
            for item in items:
                try:
                    for processor in self.processors:
                        item = processor(item)
                    _check_json(item)
                    if item.fetched_at is None and fetched_at is not None:
                        item = replace(item, fetched_at=fetched_at)
                except InvalidItem as exc:
                    rejects.append(self._reject(item, str(exc)))
                except DropItem as exc:
                    reason = str(exc) or type(exc).__name__
                    if reason == DUPLICATE:
                        yielded.append((item.type, item_key(item)))
                    dropped[reason] += 1
                    drops.append(ItemDropped(item.type, reason, item.url, domain))
                else:
                    accepted.append(item)
            if rejects and self._rejects is not None:
                await self._rejects.add(rejects)
            tracker = self._tracker
            if tracker is None or page is None:
                await self._write(accepted)
            else:
                yielded += [(item.type, item_key(item)) for item in accepted]
                keys = sorted(set(yielded))
                if self._sink_tracks and len(accepted) <= self._batch_size:
                    await tracker.write_page(accepted, page, keys)  # one transaction a page
                else:
                    await self._write(accepted)
                    await tracker.page_items(page, keys)
        except BaseException:
            for processor in self.processors:
                if isinstance(processor, StatefulProcessor):
                    processor.forget(accepted)
            raise
        # Events only once everything is stored, so a failed and retried page counts once.
        for drop in drops:
            self._events.emit(drop)
        for reject in rejects:
            self._events.emit(ItemInvalid(reject.item_type, reject.reason, reject.url, domain))
        for item_type, count in Counter(item.type for item in accepted).items():
            self._events.emit(ItemsStored(item_type, count, domain))
        self.quality.record_page(domain, accepted, dropped, len(rejects))
        changes = tuple(self.schema.observe(accepted))
        for c in changes:
            log.warning("schema of items %s", c)
            self._events.emit(SchemaChanged(c.item_type, c.change, c.field, c.detail, c.urls))
        return PipelineOutcome(
            len(accepted),
            dict(dropped),
            len(rejects),
            _by_type(accepted, drops, rejects),
            changes,
        )

    async def _write(self, items: Sequence[Item]) -> None:
        for start in range(0, len(items), self._batch_size):
            await self._sink.write(items[start : start + self._batch_size])

    async def unchanged(self, page: str) -> None:
        """The page is as at its last visit: its items are seen again (``PageTracker``)."""
        if self._tracker is not None:
            await self._tracker.page_unchanged(page)

    async def gone(self, page: str) -> None:
        """The page is gone (404, 410): the items only it yielded are ``gone``."""
        if self._tracker is not None:
            await self._tracker.page_items(page, [])

    async def close(self) -> None:
        """Closes the sink (the rejects store belongs to whoever made it)."""
        await self._sink.close()

    def _reject(self, item: Item, reason: str) -> Reject:
        return Reject(item.type, item.key, item.url, reason, item.data, self._clock.now())


def _by_type(
    accepted: Sequence[Item], drops: Sequence[ItemDropped], rejects: Sequence[Reject]
) -> dict[str, dict[str, int]]:
    fates: Counter[tuple[str, str]] = Counter()
    fates.update((item.type, "stored") for item in accepted)
    fates.update(
        (drop.item_type, "duplicate" if drop.reason == DUPLICATE else "dropped") for drop in drops
    )
    fates.update((reject.item_type, "invalid") for reject in rejects)
    by_type: dict[str, dict[str, int]] = {}
    for (item_type, fate), count in fates.items():
        by_type.setdefault(item_type, {})[fate] = count
    return by_type


def _check_json(item: Item) -> None:
    try:
        orjson.dumps(item.data)
    except orjson.JSONEncodeError as exc:
        raise InvalidItem(f"not JSON-serializable: {exc}") from None

"""The frontier's memory of the URLs it already offered its store, so it does not build them
again.

A page offers ~30 links and nearly all of them were offered before (navigation, listings,
popular products): for each, the frontier built a ``CrawlRequest`` (fingerprint, politeness
key, lane, a frozen dataclass of 13 fields, ~5 µs a link) only for the store to refuse it as
seen. ``OfferedUrls`` holds the ``capacity`` most recently offered canonical URLs of plain
requests (GET, no body: their fingerprint is the URL's); ``Frontier.new_requests`` skips
those. The answer is the store's: a URL offered to a store without a budget is, once ``add``
returned, seen by it for good (``QueueStore.add``: a fingerprint is never forgotten, a purged
dead letter stays seen), so offering it again would be refused. With a budget the store may
refuse a request without marking it seen, so a frontier with a budget keeps no memo.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

OFFERED_CAPACITY = 32_768
"""Canonical URLs remembered, the most recently offered: ~6 MB when full."""


class OfferedUrls:
    """A bounded set of canonical URLs, the least recently offered dropped first."""

    def __init__(self, capacity: int = OFFERED_CAPACITY) -> None:
        self.capacity = capacity
        self._urls: OrderedDict[str, None] = OrderedDict()

    def seen(self, url: str) -> bool:
        """Whether ``url`` was offered (and then it is kept longer)."""
        if url in self._urls:
            self._urls.move_to_end(url)
            return True
        return False

    def add(self, urls: Iterable[str]) -> None:
        """Remember URLs the store was offered, dropping the least recently offered."""
        known = self._urls
        for url in urls:
            known[url] = None
            known.move_to_end(url)
        while len(known) > self.capacity:
            known.popitem(last=False)

    def __len__(self) -> int:
        return len(self._urls)

"""A bounded set that forgets its least recently offered member first: the frontier's memos.

A page offers ~30 links and nearly all of them were offered before (navigation, pagination,
"related" links come back on every page). Two memos spare the work of answering them again,
each exact because what it remembers is final, and each bounded whatever the crawl's size:

- **the stores' seen-check prefilter** (SQLite, Redis; decisions 0017, 0021): fingerprints
  the store is known to hold. A fingerprint enters only once the store has it, and a store
  never forgets one (a purged dead letter stays seen, ``--fresh`` starts a new store), so a
  link found here is answered without an index probe or a Redis round trip; the others are
  asked as before. ~110 bytes a fingerprint.
- **the frontier's memo of offered URLs** (decision 0020): canonical URLs of plain requests
  (GET, no body: their fingerprint is the URL's) already offered to a store without a
  budget, which would refuse them as seen; ``Frontier.new_requests`` skips them before
  building a request. With a budget the store may refuse a request without marking it seen,
  so a frontier with a budget keeps no memo.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

SEEN_PREFILTER_CAPACITY = 50_000
"""Fingerprints a store's prefilter holds: ~5.5 MB when full."""

OFFERED_CAPACITY = 32_768
"""Canonical URLs the frontier remembers offering: ~6 MB when full."""


class RecentSet:
    """At most ``capacity`` strings, the least recently offered dropped first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._members: OrderedDict[str, None] = OrderedDict()

    def seen(self, member: str) -> bool:
        """Whether ``member`` is held (and then it is kept longer)."""
        if member in self._members:
            self._members.move_to_end(member)
            return True
        return False

    def add(self, members: Iterable[str]) -> None:
        """Hold ``members`` as the most recent, dropping the least recently offered."""
        held = self._members
        for member in members:
            held[member] = None
            held.move_to_end(member)
        while len(held) > self.capacity:
            held.popitem(last=False)

    def __len__(self) -> int:
        return len(self._members)

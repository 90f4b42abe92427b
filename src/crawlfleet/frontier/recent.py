"""A bounded set that forgets its least recently offered member first: the stores' prefilter.

The seen-check prefilter of the SQLite and Redis stores (decisions 0017, 0021) holds
fingerprints the store is known to hold. A fingerprint enters only once the store has it,
and a store never forgets one (a purged dead letter stays seen, ``--fresh`` starts a new
store), so a request found here is answered without an index probe or a Redis round trip;
the others are asked as before. ~110 bytes a fingerprint. (The frontier's memo of offered
URLs, which must hold a whole crawl, is ``frontier/offered.py``.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

SEEN_PREFILTER_CAPACITY = 50_000
"""Fingerprints a store's prefilter holds: ~5.5 MB when full."""


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

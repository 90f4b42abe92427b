"""The SQLite store's in-memory prefilter of the seen check: fingerprints known to be stored.

Every page offers its links to ``add``, and most of them were seen before: a site's
navigation, pagination and "related" links come back on every page. Each one asked the
``requests`` table (``FIND_SEEN``, one index probe per link). ``KnownFingerprints`` keeps the
``capacity`` most recently offered fingerprints that are in the table, so those links are
answered without a probe; the others are probed as before. The answer is exact: a
fingerprint enters only once the table has it, and the table never forgets one (a purged
dead letter keeps its row, ``--fresh`` starts a new store). Its size is bounded: ~110 bytes
per fingerprint, ~5.5 MB when full, whatever the crawl's size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

KNOWN_CAPACITY = 50_000
"""Fingerprints the prefilter holds, the most recently offered ones."""


class KnownFingerprints:
    """A bounded, least-recently-offered-first set of fingerprints present in the store."""

    def __init__(self, capacity: int = KNOWN_CAPACITY) -> None:
        self.capacity = capacity
        self._fps: OrderedDict[str, None] = OrderedDict()

    def seen(self, fingerprint: str) -> bool:
        """Whether the fingerprint is known to be stored (and then it is kept longer)."""
        if fingerprint in self._fps:
            self._fps.move_to_end(fingerprint)
            return True
        return False

    def add(self, fingerprints: Iterable[str]) -> None:
        """Remember fingerprints the store holds, dropping the least recently offered."""
        fps = self._fps
        for fingerprint in fingerprints:
            fps[fingerprint] = None
            fps.move_to_end(fingerprint)
        while len(fps) > self.capacity:
            fps.popitem(last=False)

    def __len__(self) -> int:
        return len(self._fps)

"""The in-memory store's known URLs: each fetched URL's ``Visit`` and when it is due again.

Due times sit in a heap by (next_at, fingerprint); a later ``remember`` of a URL leaves its
old entry in the heap, skipped (it no longer matches the URL's visit) when it reaches the top.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from crawlfleet.frontier.store_types import Visit


class Visits:
    """The ``Visit`` of every fetched URL, by fingerprint, and their due times."""

    def __init__(self) -> None:
        self._visits: dict[str, Visit] = {}
        self._due: list[tuple[float, str]] = []

    def remember(self, fingerprint: str, visit: Visit) -> None:
        self._visits[fingerprint] = visit
        if visit.next_at != float("inf"):
            heapq.heappush(self._due, (visit.next_at, fingerprint))

    def get(self, fingerprint: str) -> Visit | None:
        return self._visits.get(fingerprint)

    def pop_due(self, now: float) -> tuple[str, Visit] | None:
        """The URL due earliest, if due at ``now``: its due time cleared, its visit as it was."""
        heap = self._due
        while heap and heap[0][0] <= now:
            at, fp = heapq.heappop(heap)
            visit = self._visits.get(fp)
            if visit is None or visit.next_at != at:
                continue  # a later remember replaced this due time
            self._visits[fp] = replace(visit, next_at=float("inf"))
            return fp, visit
        return None

    def next_at(self) -> float | None:
        """The earliest due time (maybe past), or None when no URL is due ever."""
        heap = self._due
        while heap:
            at, fp = heap[0]
            if self._visits[fp].next_at == at:
                return at
            heapq.heappop(heap)
        return None

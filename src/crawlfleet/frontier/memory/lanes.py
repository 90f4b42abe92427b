"""The in-memory store's lanes: the queued fingerprints of each (domain, fetcher kind).

Due requests sit in a heap by (-priority, admission seq); retries waiting for their
not-before time in a heap by (not_before, seq), moved to the first once their time comes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from crawlfleet.models import CrawlRequest

LaneKey = tuple[str, str]
"""(domain, fetcher kind)."""


class Lanes:
    """Queued fingerprints per lane, in the order a claim takes them."""

    def __init__(self) -> None:
        self._due: dict[LaneKey, list[tuple[int, int, str]]] = {}
        self._waiting: dict[LaneKey, list[tuple[float, int, str]]] = {}

    def push(self, request: CrawlRequest, seq: int, not_before: float) -> None:
        """Queue a request in its lane, due from ``not_before`` (0: at once)."""
        lane = (request.domain, request.fetcher)
        if not_before > 0:
            waiting = self._waiting.setdefault(lane, [])
            heapq.heappush(waiting, (not_before, seq, request.fingerprint))
        else:
            due = self._due.setdefault(lane, [])
            heapq.heappush(due, (-request.priority, seq, request.fingerprint))

    def take(
        self, domain: str, kind: str, now: float, priority: Callable[[str], int]
    ) -> str | None:
        """The lane's first fingerprint due at ``now``, taken out; None when none is.

        ``priority`` gives a waiting fingerprint's priority when its time has come.
        """
        due = self._due.setdefault((domain, kind), [])
        waiting = self._waiting.get((domain, kind))
        while waiting and waiting[0][0] <= now:
            _nb, seq, fp = heapq.heappop(waiting)
            heapq.heappush(due, (-priority(fp), seq, fp))
        if not due:
            return None
        return heapq.heappop(due)[2]

    def earliest(self, domain: str, kind: str) -> float | None:
        """The lane's earliest not-before time: 0 when one is due, None when it is empty."""
        if self._due.get((domain, kind)):
            return 0.0
        waiting = self._waiting.get((domain, kind))
        return waiting[0][0] if waiting else None

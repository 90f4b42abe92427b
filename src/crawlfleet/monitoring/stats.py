"""A view over a crawl's statistics in its store: counts, counters, rate and ETA.

Whichever process did the work added its counters to the store (``crawlfleet.counters``),
so this view reads the same figures in the embedded runner, the dispatcher, ``status`` and
the Python API. The rate is the number of requests finished (done or dead-lettered) per
second over a sliding window of samples; the ETA is what is pending divided by that rate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from crawlfleet.counters import CrawlStats
from crawlfleet.models import QueueCounts

RATE_WINDOW_S = 10.0


class StatsSource(Protocol):
    """Where a crawl's statistics are read (``Frontier``, or a ``QueueStore``)."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...


@dataclass(frozen=True, slots=True)
class Sample:
    """One read of a crawl's statistics at ``at`` (epoch seconds), with the derived rate."""

    at: float
    counts: QueueCounts
    stats: CrawlStats
    rate: float
    """Requests finished per second over the window (0.0 until two samples exist)."""

    @property
    def finished(self) -> int:
        return self.counts.done + self.counts.dead

    @property
    def eta_s(self) -> float | None:
        """Seconds until nothing is pending at the current rate; None without a rate."""
        if self.counts.pending == 0:
            return 0.0
        return self.counts.pending / self.rate if self.rate > 0 else None


class StatsView:
    """Samples a crawl's statistics and keeps the window the rate is computed over."""

    def __init__(self, source: StatsSource, *, window_s: float = RATE_WINDOW_S) -> None:
        self._source = source
        self._window_s = window_s
        self._points: deque[tuple[float, int]] = deque()
        self.last: Sample | None = None

    async def sample(self, now: float) -> Sample:
        counts = await self._source.counts()
        stats = await self._source.stats()
        finished = counts.done + counts.dead
        points = self._points
        points.append((now, finished))
        while len(points) > 2 and points[1][0] <= now - self._window_s:
            points.popleft()
        first_at, first_finished = points[0]
        elapsed_s = now - first_at
        rate = max(0.0, (finished - first_finished) / elapsed_s) if elapsed_s > 0 else 0.0
        self.last = Sample(now, counts, stats, rate)
        return self.last

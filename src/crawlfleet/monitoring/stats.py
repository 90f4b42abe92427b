"""A view over a crawl's statistics in its store: counts, counters, rate and ETA.

Whichever process did the work added its counters to the store (``crawlfleet.counters``),
so this view reads the same figures in the embedded runner, the dispatcher, ``status`` and
the Python API. The rate is the number of requests finished (done or dead-lettered) per
second over a sliding window of samples; the ETA is politeness-aware (``monitoring.eta``):
the larger of pending ÷ rate and the bound of the slowest domain.

The domains' bounds are read from ``domains(ETA_DOMAINS)``: the 1,000 domains with the most
admissions (a domain's queued work never exceeds its admissions, so one outside them has
fewer queued requests than each of them; its work still counts in pending ÷ rate). That
read costs one pass over the domains (SQLite, memory) or one pipelined read of 1,000
hashes (Redis), so it is refreshed every ``ETA_REFRESH_S``, or sooner when the crawl's
admissions grew by ``ETA_REFRESH_GROWTH`` since the last read (new queued work: a handful of
extra reads over a whole crawl, as admissions grow geometrically between them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.monitoring.eta import DomainLoad, Eta, estimate, load_of
from crawlfleet.records import QueueCounts

RATE_WINDOW_S = 10.0
ETA_DOMAINS = 1000
ETA_REFRESH_S = 5.0
ETA_REFRESH_GROWTH = 1.1


class StatsSource(Protocol):
    """Where a crawl's statistics are read (``Frontier``)."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...


@dataclass(frozen=True, slots=True)
class Sample:
    """One read of a crawl's statistics at ``at`` (epoch seconds), with the derived rate."""

    at: float
    counts: QueueCounts
    stats: CrawlStats
    rate: float
    """Requests finished per second over the window (0.0 until two samples exist)."""
    loads: tuple[DomainLoad, ...] = ()
    """The domains with queued work, as of the last domain read (``ETA_REFRESH_S``)."""
    loads_at: float | None = None
    paused: bool = False
    """The crawl was paused (``crawlfleet pause``) when the sample was read."""

    @property
    def finished(self) -> int:
        return self.counts.done + self.counts.dead

    @property
    def eta(self) -> Eta:
        age_s = 0.0 if self.loads_at is None else max(0.0, self.at - self.loads_at)
        return estimate(self.counts.pending, self.rate, self.loads, loads_age_s=age_s)

    @property
    def eta_s(self) -> float | None:
        """Seconds until nothing is pending (politeness-aware); None when nothing bounds it."""
        return self.eta.eta_s


class StatsView:
    """Samples a crawl's statistics and keeps the window the rate is computed over."""

    def __init__(
        self,
        source: StatsSource,
        *,
        window_s: float = RATE_WINDOW_S,
        refresh_s: float = ETA_REFRESH_S,
        eta_domains: int = ETA_DOMAINS,
    ) -> None:
        self._source = source
        self._window_s = window_s
        self._refresh_s = refresh_s
        self._eta_domains = eta_domains
        self._points: deque[tuple[float, int]] = deque()
        self._loads: tuple[DomainLoad, ...] = ()
        self._loads_at: float | None = None
        self._loads_seen = 0
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
        if (
            self._loads_at is None
            or now - self._loads_at >= self._refresh_s
            or counts.seen >= self._loads_seen * ETA_REFRESH_GROWTH
        ):
            self._loads_at = now
            self._loads_seen = max(1, counts.seen)
            views = await self._source.domains(self._eta_domains)
            self._loads = tuple(load_of(v, now) for v in views if v.queued > 0)
        self.last = Sample(now, counts, stats, rate, self._loads, self._loads_at)
        return self.last

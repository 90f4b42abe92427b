"""Each crawl's progress over time, rate and ETA, sampled in the background by the dashboard.

The store's counters hold totals, not their history: the dashboard samples every crawl
every ``SAMPLE_EVERY_S`` into a ``StatsView`` (rate over its window, politeness-aware ETA)
and keeps the last ``HISTORY_POINTS`` points for the progress chart, from the moment the
dashboard started. Each round also reads the workers (their pages/s needs successive
heartbeats) and, given a ``Metrics``, watches every crawl it samples and refreshes the
snapshot ``/metrics`` renders.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from crawlfleet.clock import Clock
from crawlfleet.errors import CrawlfleetError
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.monitoring.stats import Sample, StatsView
from crawlfleet.ops.protocols import Operations, WorkerRow

log = logging.getLogger(__name__)

SAMPLE_EVERY_S = 2.0
HISTORY_POINTS = 1800
"""One hour of points at the default interval."""


@dataclass(frozen=True, slots=True)
class Point:
    """Progress at ``at``: requests finished and known (finished + pending)."""

    at: float
    finished: int
    total: int


class CrawlHistory:
    """The samples of one crawl."""

    def __init__(self, view: StatsView) -> None:
        self.view = view
        self.points: deque[Point] = deque(maxlen=HISTORY_POINTS)
        self.state = "unknown"

    @property
    def last(self) -> Sample | None:
        return self.view.last

    def add(self, sample: Sample, state: str) -> None:
        self.state = state
        self.points.append(
            Point(sample.at, sample.finished, sample.finished + sample.counts.pending)
        )


class Sampler:
    """Samples every crawl of an ``Operations``; ``sample_all`` once, or ``run`` forever."""

    def __init__(
        self,
        source: Operations,
        clock: Clock,
        every_s: float = SAMPLE_EVERY_S,
        metrics: Metrics | None = None,
    ) -> None:
        self._source = source
        self._clock = clock
        self._every_s = every_s
        self._metrics = metrics
        self.crawls: dict[str, CrawlHistory] = {}
        self.workers: list[WorkerRow] = []
        self._lock = asyncio.Lock()

    async def sample_all(self) -> None:
        async with self._lock:
            for crawl_id in await self._source.crawl_ids():
                await self._sample(crawl_id)
            self.workers = await self._source.workers()

    async def sample(self, crawl_id: str) -> CrawlHistory:
        """A fresh sample of one crawl (``StateError`` if there is none)."""
        async with self._lock:
            return await self._sample(crawl_id)

    async def _sample(self, crawl_id: str) -> CrawlHistory:
        history = self.crawls.get(crawl_id)
        if history is None:
            reader = await self._source.reader(crawl_id)
            history = self.crawls[crawl_id] = CrawlHistory(StatsView(reader, refresh_s=0.0))
            if self._metrics is not None:
                mode, beats = self._source.mode, self._source.beats
                self._metrics.watch(crawl_id, reader, runtime=mode, beats=beats)
        sample = await history.view.sample(self._clock.now())
        history.add(sample, await self._source.run_state(crawl_id, sample.counts))
        return history

    async def run(self) -> None:
        while True:
            try:
                await self.sample_all()
                if self._metrics is not None:
                    await self._metrics.refresh()
            except CrawlfleetError as exc:
                log.warning("dashboard sampling failed: %s", exc)
            await asyncio.sleep(self._every_s)

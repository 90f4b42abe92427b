"""The embedded runtime: one asyncio process seeds a crawl and runs the claim loop to the end.

The process holds the crawl's state file alone, so leases left by an earlier run are
reaped at once, and the run ends when nothing is pending. A stop request (Ctrl-C) stops
claiming and lets in-flight steps finish for up to ``grace_s``; anything cancelled keeps its
lease in the state file and comes back on the next run. With a ``control``
(``runtime/control.py``: ``FileControl`` of the state directory) the runner claims nothing
while the crawl is paused, lets the steps in flight finish, and goes on when it is resumed.

``revisit``: ``pass`` first queues the known URLs that are due (``Frontier.revisit``), then
runs to the end as above; ``continuous`` never ends by itself: when nothing is pending it
waits for the next known URL to be due (at most ``IDLE_WAIT_S`` at a time, so a stop or
work added by ``crawlfleet add`` is seen) and queues what is due.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from crawlfleet.clock import Clock
from crawlfleet.events import CrawlFinished, CrawlStarted, EventBus, QueueSampled
from crawlfleet.records import QueueCounts
from crawlfleet.runtime.control import Control, RunState
from crawlfleet.runtime.loop.claim import ClaimLoop
from crawlfleet.runtime.step.crawler import Crawler

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
"""Longest sleep of a continuous crawl with nothing pending."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: ``complete`` (nothing pending), ``interrupted``, or ``cancelled``
    (a distributed crawl, by ``crawlfleet cancel``)."""

    reason: str
    counts: QueueCounts

    @property
    def complete(self) -> bool:
        return self.reason == "complete"


class LocalRunner:
    """Drives a ``Crawler`` in this process until the frontier is empty or it is stopped.

    ``kind_limits`` bounds the steps in flight of a kind on its own (``ClaimLoop``).
    """

    def __init__(
        self,
        crawler: Crawler,
        *,
        concurrency: int,
        clock: Clock,
        events: EventBus,
        crawl_id: str,
        on_tick: Callable[[], Awaitable[None]] | None = None,
        grace_s: float = 10.0,
        control: Control | None = None,
        kind_limits: Mapping[str, int] | None = None,
    ) -> None:
        self._crawler = crawler
        self._frontier = crawler.parts.frontier
        self._loop = ClaimLoop(
            crawler,
            kinds=crawler.kinds,
            concurrency=concurrency,
            clock=clock,
            kind_limits=kind_limits,
        )
        self._clock = clock
        self._events = events
        self._crawl_id = crawl_id
        self._on_tick = on_tick
        self._grace_s = grace_s
        self._hold = None if control is None else partial(self._held, control)
        self._paused = False
        self.stop = asyncio.Event()

    async def run(
        self, seeds: Sequence[str], *, sitemaps: bool = False, revisit: str = "off"
    ) -> RunResult:
        frontier = self._frontier
        admitter = self._crawler.parts.admitter
        await frontier.reap(float("inf"))
        await frontier.start(self._clock.now())
        await admitter.seed(seeds)
        if sitemaps:
            await admitter.seed_sitemaps(seeds)
        if revisit != "off":
            log.info("%d known URLs due again", await frontier.revisit(self._clock.now()))
        self._events.emit(CrawlStarted(self._crawl_id, len(seeds), self._clock.now()))
        while True:
            await self._loop.run(
                stop=self.stop,
                until_empty=True,
                stop_on_error=True,
                grace_s=self._grace_s,
                on_tick=self._tick,
                hold=self._hold,
            )
            if revisit != "continuous" or self.stop.is_set():
                break
            await self._until_due()
        counts = await frontier.counts()
        done = counts.pending == 0 and revisit != "continuous"  # continuous: only a stop ends it
        reason = "complete" if done else "interrupted"
        await self._tick()
        self._events.emit(CrawlFinished(self._crawl_id, counts, self._clock.now(), reason))
        return RunResult(reason, counts)

    async def _until_due(self) -> None:
        """Wait (a stop ends it) until a known URL is due or work is queued; queue what is due."""
        while not self.stop.is_set():
            now = self._clock.now()
            if await self._frontier.revisit(now) or (await self._frontier.counts()).pending:
                return
            due = await self._frontier.next_visit_at()
            wait_s = IDLE_WAIT_S if due is None else min(IDLE_WAIT_S, max(0.0, due - now))
            await self._tick()
            try:
                await asyncio.wait_for(self.stop.wait(), timeout=wait_s)
            except TimeoutError:
                continue

    async def _tick(self) -> None:
        self._events.emit(QueueSampled(await self._frontier.counts(), self._clock.now()))
        if self._on_tick is not None:
            await self._on_tick()

    async def _held(self, control: Control) -> bool:
        """Whether the crawl is paused; says so in the log when that changes."""
        paused = await control.state() is not RunState.RUNNING
        if paused != self._paused:
            self._paused = paused
            log.warning("crawl %s %s", self._crawl_id, "paused" if paused else "resumed")
        return paused

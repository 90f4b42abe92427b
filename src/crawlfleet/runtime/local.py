"""The embedded runtime: one asyncio process claims due work and runs crawl steps.

The loop keeps up to ``concurrency`` steps in flight, claims as many leases as it has free
slots, and sleeps until a step finishes or the next domain becomes due. A stop request
(Ctrl-C) stops claiming and lets in-flight steps finish for up to ``grace_s``; anything
cancelled keeps its lease in the state file and comes back on the next run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from crawlfleet.clock import Clock
from crawlfleet.models import QueueCounts
from crawlfleet.monitoring.events import CrawlFinished, CrawlStarted, EventBus, QueueSampled
from crawlfleet.runtime.crawler import Crawler

SAMPLE_EVERY_S = 0.5
MIN_WAIT_S = 0.01
MAX_WAIT_S = 0.5


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: ``complete`` (nothing pending) or ``interrupted``."""

    reason: str
    counts: QueueCounts

    @property
    def complete(self) -> bool:
        return self.reason == "complete"


class LocalRunner:
    """Drives a ``Crawler`` in this process until the frontier is empty or it is stopped."""

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
    ) -> None:
        self._crawler = crawler
        self._frontier = crawler.parts.frontier
        self._concurrency = concurrency
        self._clock = clock
        self._events = events
        self._crawl_id = crawl_id
        self._on_tick = on_tick
        self._grace_s = grace_s
        self.stop = asyncio.Event()

    async def run(self, seeds: Sequence[str], *, sitemaps: bool = False) -> RunResult:
        store = self._frontier.store
        await self._frontier.reap(float("inf"))
        await self._crawler.seed(seeds)
        if sitemaps:
            await self._crawler.seed_sitemaps(seeds)
        self._events.emit(CrawlStarted(self._crawl_id, len(seeds), self._clock.now()))
        tasks: set[asyncio.Task[None]] = set()
        stop_wait = asyncio.ensure_future(self.stop.wait())
        last_sample = 0.0
        try:
            while not self.stop.is_set():
                now = self._clock.now()
                if now - last_sample >= SAMPLE_EVERY_S:
                    last_sample = now
                    await self._sample(now)
                free = self._concurrency - len(tasks)
                if free > 0:
                    for lease in await self._frontier.claim(free, now):
                        tasks.add(asyncio.create_task(self._crawler.process(lease)))
                if not tasks:
                    counts = await store.counts()
                    if counts.pending == 0:
                        break
                wait_s = await self._wait_s(now, full=len(tasks) >= self._concurrency)
                done, _ = await asyncio.wait(
                    (*tasks, stop_wait), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    if task is not stop_wait:
                        tasks.discard(task)
                        task.result()
        finally:
            stop_wait.cancel()
            await self._drain(tasks)
        counts = await store.counts()
        reason = "complete" if counts.pending == 0 else "interrupted"
        await self._sample(self._clock.now())
        self._events.emit(CrawlFinished(self._crawl_id, counts, self._clock.now(), reason))
        return RunResult(reason, counts)

    async def _wait_s(self, now: float, *, full: bool) -> float | None:
        if full:
            return MAX_WAIT_S
        next_at = await self._frontier.store.next_ready_at(now)
        if next_at is None:
            return MAX_WAIT_S
        return min(MAX_WAIT_S, max(MIN_WAIT_S, next_at - now))

    async def _sample(self, now: float) -> None:
        self._events.emit(QueueSampled(await self._frontier.store.counts(), now))
        if self._on_tick is not None:
            await self._on_tick()

    async def _drain(self, tasks: set[asyncio.Task[None]]) -> None:
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=self._grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

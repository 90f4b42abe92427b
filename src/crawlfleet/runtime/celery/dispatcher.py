"""The dispatcher of one distributed crawl: seed it, feed the workers, watch it end.

Over a crawl ``open_crawl`` opened and defined (``dispatched.py``: some worker can serve
every fetcher kind it names, its definition is stored in Redis, the crawl marked active),
it seeds the frontier (``Admitter``: robots.txt read first, so a ``Crawl-delay`` is in force
before a domain's first URL is queued), then loops until nothing is queued or leased (when
the crawl may end before the next tick, it reads the counts every ``END_POLL_S`` meanwhile,
so it ends as soon as the last page does):

1. count expired leases as failed attempts (``reap``);
2. per Celery queue that has due work (of the fetcher kinds it carries, ``QUEUE_KINDS``), keep
   a few tasks of this crawl waiting in the broker, so every crawl with a dispatcher gets its
   share of a shared pool;
3. copy the attempts the store keeps pending to PostgreSQL (``AttemptCopier``), and every
   few seconds the quality scores (``QualityCopier``; once more when the run ends).

A recrawl (``revisit = "pass"``, ``--recrawl``) first queues the known URLs that are due
(``Frontier.revisit``) and ends as above; a continuous crawl (``"continuous"``) queues what
becomes due at every tick and runs until it is stopped or cancelled.

The frontier decides what is due; the dispatcher never schedules a URL itself, and it writes
no item: it opens no sink and builds no crawl step.

While work is pending and no live worker serves the crawl (``crawls.no_worker_reason``: none
consumes its queues, or every one refuses it for its ``--parsers``) for ``worker_wait_s``, it
raises ``NoWorkers`` saying why; the crawl stays as it is, to run again.

The crawl's run state (``runtime/control.py``) is read every tick: while it is paused no task
is published (leases are still reaped, attempts still copied); once it is cancelled the
dispatcher leaves the crawl out of the active set and returns ``cancelled``. A cancelled
crawl is not started again without ``fresh``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable

import orjson
from redis.exceptions import RedisError

from crawlfleet.clock import Clock
from crawlfleet.errors import FrontierLost, NoWorkers, StateError
from crawlfleet.records import QueueCounts
from crawlfleet.runtime.backends import one_line
from crawlfleet.runtime.celery.crawls import no_worker_reason, worker_beats
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS, DISPATCHERS
from crawlfleet.runtime.celery.dispatched import DispatchedCrawl
from crawlfleet.runtime.celery.publisher import TaskPublisher
from crawlfleet.runtime.choice.kinds import QUEUE_KINDS
from crawlfleet.runtime.control import WORKER_SEEN_S, RedisControl, RunState
from crawlfleet.runtime.local import RunResult

log = logging.getLogger(__name__)

TICK_S = 0.5
END_TICK_S = 0.1
END_POLL_S = 0.02
"""How often the dispatcher reads the counts while the crawl may end before its next tick
(``may_end_within``): one pipelined read of two keys, ~0.2 ms of CPU (decision 0066)."""
FEW_PENDING = 256
SAMPLE_EVERY_S = 0.5
LEASES_PER_TASK = 4096
"""A task's lease cap: above what a worker claims in its ``--batch-s`` at ~1,000 pages/s, so
time bounds a task and its pages in flight drain once a batch (decisions 0019, 0029)."""
MIN_WAITING_TASKS = 4
"""The fewest tasks kept waiting in a queue (two a live worker when that is more): with two, a
lone worker sat 0.1-0.5 s without a task six or seven times a crawl (decision 0028)."""
BEAT_EVERY_S = 2.0  # the dispatcher's heartbeat (``DISPATCHERS``), well under DISPATCHER_SEEN_S
OUTAGE_LIMIT_S = 120.0  # give up when Redis or the broker stay unreachable this long


class Dispatcher:
    """Seeds one crawl and keeps its workers fed until the frontier is empty or ``stop``."""

    def __init__(
        self,
        crawl: DispatchedCrawl,
        *,
        clock: Clock,
        on_tick: Callable[[], Awaitable[None]] | None = None,
        stop: asyncio.Event | None = None,
        leases_per_task: int = LEASES_PER_TASK,
    ) -> None:
        self._crawl = crawl
        self._leases_per_task = leases_per_task
        self._clock = clock
        self._on_tick = on_tick
        self.stop = stop or asyncio.Event()
        self._control = RedisControl(crawl.client, crawl.definition.crawl_id)
        self._state = RunState.RUNNING
        self._served_at = time.monotonic()
        """When a live worker last served the crawl (or the dispatcher started)."""
        self._beat_at = -BEAT_EVERY_S

    @property
    def crawl_id(self) -> str:
        return self._crawl.definition.crawl_id

    async def run(self) -> RunResult:
        crawl = self._crawl
        settings = crawl.definition.settings
        seeds = list(crawl.definition.seeds)
        frontier = crawl.frontier
        await self._beat()
        await frontier.reap(self._clock.now())
        await frontier.start(self._clock.now())
        await crawl.admitter.seed(seeds)
        if settings.follow_sitemaps:
            await crawl.admitter.seed_sitemaps(seeds)
        if settings.revisit != "off":
            revisited = await frontier.revisit(self._clock.now())
            log.info("%d known URLs due again", revisited)
        counts = await self._loop()
        await self._drain_attempts()
        await self._write_quality()
        cancelled = self._state is RunState.CANCELLED
        complete = counts.pending == 0 and settings.revisit != "continuous"
        if cancelled or complete:
            await crawl.client.srem(ACTIVE_CRAWLS, self.crawl_id)
        if cancelled:
            return RunResult("cancelled", counts)
        return RunResult("complete" if complete else "interrupted", counts)

    async def _loop(self) -> QueueCounts:
        continuous = self._crawl.definition.settings.revisit == "continuous"
        last_sample = 0.0
        outage_since: float | None = None
        counts = QueueCounts(0, 0, 0, 0, 0)
        rate = EndRate()
        while not self.stop.is_set():
            try:
                counts = await self._tick()
                now = self._clock.now()
                if now - last_sample >= SAMPLE_EVERY_S or counts.pending == 0:
                    last_sample = now
                    if self._on_tick is not None:
                        await self._on_tick()  # reads the store: an outage is retried too
            except FrontierLost:
                raise  # nothing to wait for: the crawl's state is gone (wiped or restarted)
            except (StateError, RedisError, OSError, ConnectionError) as exc:
                outage_since = outage_since or time.monotonic()
                if time.monotonic() - outage_since > OUTAGE_LIMIT_S:
                    raise StateError(
                        one_line(f"gave up after {OUTAGE_LIMIT_S:.0f} s: {exc}")
                    ) from exc
                log.warning("dispatcher: %s; retrying", one_line(str(exc)))
                await self._wait(0.5)
                continue
            except Exception as exc:  # kombu raises many types for a broker outage
                outage_since = outage_since or time.monotonic()
                if time.monotonic() - outage_since > OUTAGE_LIMIT_S:
                    raise StateError(one_line(f"broker unusable: {exc}")) from exc
                log.warning("dispatcher: broker: %s; retrying", one_line(str(exc)))
                await self._wait(0.5)
                continue
            outage_since = None
            if (counts.pending == 0 and not continuous) or self._state is RunState.CANCELLED:
                return counts
            if counts.pending and self._state is RunState.RUNNING:
                await self._watch_workers()
            else:
                self._served_at = time.monotonic()
            wait_s = tick_s(counts, self._state)
            per_s = rate.observe(time.monotonic(), counts)
            if continuous or not may_end_within(counts, self._state, per_s, wait_s):
                await self._wait(wait_s)
            else:
                await self._watch_end(wait_s)
        return counts

    async def _tick(self) -> QueueCounts:
        crawl = self._crawl
        now = self._clock.now()
        reaped = await crawl.frontier.reap(now)
        if reaped:
            log.info("%d expired leases counted as failed attempts", reaped)
        self._state = await self._control.state()
        if crawl.definition.settings.revisit == "continuous" and self._state is RunState.RUNNING:
            await crawl.frontier.revisit(now)
        counts = await crawl.frontier.counts()
        if time.monotonic() - self._beat_at >= BEAT_EVERY_S:
            await self._beat()
        if counts.pending and self._state is RunState.RUNNING:
            await crawl.client.sadd(ACTIVE_CRAWLS, self.crawl_id)
            for queue, publisher in crawl.publishers.items():
                next_at = await crawl.frontier.next_ready_at(now, QUEUE_KINDS[queue])
                if next_at is not None and next_at <= now:
                    await self._top_up(queue, publisher, now)
        await crawl.copier.copy()  # after the top-up: workers need not wait for it
        await crawl.quality.copy(now)
        return counts

    async def _watch_workers(self) -> None:
        """``NoWorkers`` once no live worker has served the crawl for ``worker_wait_s``."""
        wait_s = self._crawl.definition.settings.worker_wait_s
        beats = await worker_beats(self._crawl.client)
        queues = sorted(self._crawl.publishers)
        why = no_worker_reason(beats, self.crawl_id, queues, time.time())
        if why is None or wait_s == 0:
            self._served_at = time.monotonic()
            return
        if time.monotonic() - self._served_at >= wait_s:
            raise NoWorkers(
                f"no live worker has served crawl {self.crawl_id!r} for {wait_s:g} s ({why}); "
                "start one (crawlfleet worker --redis URL --postgres DSN [--parsers ...]), then "
                "run the same command again (--wait-for-workers waits for ever)"
            )

    async def _beat(self) -> None:
        """Say this crawl's dispatcher is alive (``DISPATCHERS``)."""
        self._beat_at = time.monotonic()
        beat = {"seen_at": self._clock.now(), "host": socket.gethostname(), "pid": os.getpid()}
        await self._crawl.client.hset(DISPATCHERS, self.crawl_id, orjson.dumps(beat))

    async def _top_up(self, queue: str, publisher: TaskPublisher, now: float) -> None:
        beats = await worker_beats(self._crawl.client)
        workers = sum(now - b.seen_at < WORKER_SEEN_S and queue in b.queues for b in beats)
        target = max(MIN_WAITING_TASKS, 2 * workers)
        waiting = await asyncio.to_thread(publisher.waiting)
        if waiting < target:
            await asyncio.to_thread(publisher.publish, target - waiting, self._leases_per_task)

    async def _write_quality(self) -> None:
        """Write the quality scores as the run leaves them."""
        try:
            await self._crawl.quality.copy(self._clock.now(), force=True)
        except (StateError, RedisError) as exc:
            log.warning("quality scores not written: %s", one_line(str(exc)))

    async def _drain_attempts(self) -> None:
        """Copy every attempt still pending, so the log is whole when the run ends."""
        try:
            while await self._crawl.copier.copy():
                pass
        except (StateError, RedisError) as exc:
            log.warning("attempts left to copy on the next run: %s", one_line(str(exc)))

    async def _watch_end(self, seconds: float) -> None:
        """Wait ``seconds``, or less: until the frontier's counts say nothing is pending
        (one read every ``END_POLL_S``), so the run ends as soon as its last page does rather
        than on the next tick (decision 0066); a failed read only ends the wait."""
        until = time.monotonic() + seconds
        while not self.stop.is_set():
            left = until - time.monotonic()
            if left <= 0:
                return
            await self._wait(min(END_POLL_S, left))
            try:
                if (await self._crawl.frontier.counts()).pending == 0:
                    return
            except (StateError, RedisError, OSError):
                return  # the tick reads the counts again and handles the outage

    async def _wait(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        except TimeoutError:
            return


class EndRate:
    """Requests finished (done or dead-lettered) a second, between the last two ticks."""

    def __init__(self) -> None:
        self._at: float | None = None
        self._finished = 0

    def observe(self, at: float, counts: QueueCounts) -> float:
        finished = counts.done + counts.dead
        last_at, self._at = self._at, at
        last, self._finished = self._finished, finished
        if last_at is None or at <= last_at:
            return 0.0
        return max(0, finished - last) / (at - last_at)


def may_end_within(counts: QueueCounts, state: RunState, per_s: float, wait_s: float) -> bool:
    """Whether a running crawl could finish what is pending before the next tick, at twice
    the rate it finished requests since the last one: then the dispatcher reads the counts
    every ``END_POLL_S`` meanwhile. A 500-page crawl is over in about two ticks."""
    return state is RunState.RUNNING and 0 < counts.pending <= 2 * per_s * wait_s


def tick_s(counts: QueueCounts, state: RunState) -> float:
    """The wait before the next tick: ``END_TICK_S`` while a running crawl has a few requests
    pending (``FEW_PENDING`` or fewer), so the run ends that soon after its last page and the
    first tasks follow its first links as soon; else ``TICK_S`` (decision 0029)."""
    if state is RunState.RUNNING and 0 < counts.pending <= FEW_PENDING:
        return END_TICK_S
    return TICK_S

"""The dispatcher of one distributed crawl: define it, seed it, feed the workers, watch it end.

It checks that some worker can serve every fetcher kind the crawl names, stores the crawl's
definition in Redis and marks the crawl active, seeds the frontier (``Admitter``: robots.txt
read first, so a ``Crawl-delay`` is in force before a domain's first URL is queued), then
loops until nothing is queued or leased:

1. count expired leases as failed attempts (``reap``);
2. copy the attempts the store keeps pending to PostgreSQL (``AttemptCopier``);
3. per Celery queue that has due work (of the fetcher kinds it carries, ``QUEUE_KINDS``), keep
   a few tasks of this crawl waiting in the broker, so every crawl with a dispatcher gets its
   share of a shared pool.

A recrawl (``revisit = "pass"``, ``--recrawl``) first queues the known URLs that are due
(``Frontier.revisit``) and ends as above; a continuous crawl (``"continuous"``) queues what
becomes due at every tick and runs until it is stopped or cancelled.

The frontier decides what is due; the dispatcher never schedules a URL itself, and it writes
no item: it opens no sink and builds no crawl step.

The crawl's run state (``runtime/control.py``) is read every tick: while it is paused no task
is published (leases are still reaped, attempts still copied); once it is cancelled the
dispatcher leaves the crawl out of the active set and returns ``cancelled``. A cancelled
crawl is not started again without ``fresh``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from redis.exceptions import RedisError

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, FrontierLost, StateError
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.redis.connection import RedisClient
from crawlfleet.models import QueueCounts
from crawlfleet.monitoring.attempt_copier import AttemptCopier
from crawlfleet.monitoring.attempt_log import AttemptReader
from crawlfleet.monitoring.events import EventBus
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.redact import redact
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.backends import one_line, open_distributed
from crawlfleet.runtime.celery.app import check_broker, make_app
from crawlfleet.runtime.celery.crawls import (
    WORKER_SEEN_S,
    WorkerBeat,
    connect,
    delete_crawl,
    worker_beats,
)
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS, CrawlDefinition, definition_key
from crawlfleet.runtime.celery.publisher import TaskPublisher
from crawlfleet.runtime.control import RedisControl, RunState
from crawlfleet.runtime.kinds import (
    AUTO,
    QUEUE_KINDS,
    QUEUES,
    WORKER_KINDS,
    check_kinds,
    named_kinds,
)
from crawlfleet.runtime.local import RunResult
from crawlfleet.runtime.routing import Router
from crawlfleet.runtime.wiring import build_admitter, build_frontier
from crawlfleet.settings import Settings

log = logging.getLogger(__name__)

BROKER_ENV = "CRAWLFLEET_BROKER_URL"
"""Names the Celery broker when it is not the crawl's Redis (e.g. ``amqp://...``)."""

TICK_S = 0.5
SAMPLE_EVERY_S = 0.5
LEASES_PER_TASK = 1024
MIN_WAITING_TASKS = 2
OUTAGE_LIMIT_S = 120.0  # give up when Redis or the broker stay unreachable this long


@dataclass(slots=True)
class DispatchedCrawl:
    """The open connections of a crawl being dispatched."""

    definition: CrawlDefinition
    client: RedisClient
    frontier: Frontier
    admitter: Admitter
    attempts: AttemptReader
    copier: AttemptCopier
    publishers: dict[str, TaskPublisher]

    async def beats(self) -> list[WorkerBeat]:
        """The workers' heartbeats; ``StateError`` when Redis cannot be read."""
        try:
            return await worker_beats(self.client)
        except RedisError as exc:
            raise StateError(one_line(f"worker heartbeats: {exc}")) from None


def check_seeds(seeds: Sequence[str]) -> None:
    """``ConfigError`` when a seed carries credentials (the definition in Redis would hold
    them; workers get none) or is a ``file:`` URL (no worker reads this host's files)."""
    if len(Credentials.from_urls(seeds)):
        raise ConfigError(
            "a seed URL carries user:password: credentials are supported in embedded crawls"
            " only (a distributed crawl's definition is stored in Redis)"
        )
    for seed in seeds:
        if seed.startswith("file:"):
            raise ConfigError(f"seed {seed}: file: URLs are crawled embedded only (no --redis)")


def check_servable(settings: Settings, seeds: Sequence[str]) -> None:
    """``ConfigError`` when the crawl names a fetcher kind no worker of this build serves, or
    a seed cannot be crawled distributed (``check_seeds``)."""
    check_seeds(seeds)
    registry = load_parsers(settings.parsers, settings.selector_parsers)
    check_kinds(named_kinds(registry, settings.domains), (*WORKER_KINDS, AUTO))


async def open_crawl(
    settings: Settings,
    seeds: list[str],
    *,
    broker_url: str | None,
    fresh: bool,
    clock: Clock,
    stack: AsyncExitStack,
) -> DispatchedCrawl:
    """Connect to Redis, PostgreSQL and the broker, and store the crawl's definition.

    ``StateError`` (one line, no password) when the broker, Redis or PostgreSQL cannot be
    used (the broker is checked first, with a bounded wait, before anything is stored);
    ``ConfigError`` when the crawl names a fetcher kind no worker serves.
    """
    check_servable(settings, seeds)
    redis_url = settings.redis_url or ""
    broker = broker_url or os.environ.get(BROKER_ENV) or redis_url
    await asyncio.to_thread(check_broker, broker)  # before anything is stored
    crawl_id = settings.crawl_id
    client = connect(redis_url)
    stack.push_async_callback(client.aclose)
    if fresh:  # before the store is opened: opening creates the crawl's frontier keys
        try:
            await delete_crawl(client, crawl_id)
        except RedisError as exc:
            raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    if await RedisControl(client, crawl_id).state() is RunState.CANCELLED:
        raise StateError(f"crawl {crawl_id!r} was cancelled; start it over with --fresh")
    backends = await open_distributed(settings, stack, worker=False)
    attempt_log = backends.attempt_log
    if attempt_log is None:
        raise StateError("the dispatcher opened no attempt log")
    definition = CrawlDefinition(settings, tuple(seeds), uuid.uuid4().hex)
    try:
        await client.set(definition_key(crawl_id), definition.to_json())
        await client.sadd(ACTIVE_CRAWLS, crawl_id)
    except RedisError as exc:
        raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    registry = load_parsers(settings.parsers, settings.selector_parsers)
    frontier = build_frontier(
        settings, backends.store, seeds, Router.for_settings(registry, settings)
    )
    admitter = await build_admitter(settings, frontier, events=EventBus(), clock=clock, stack=stack)
    app = make_app(broker)
    publishers = {}
    for queue in QUEUES:
        if not set(QUEUE_KINDS[queue]) <= set(WORKER_KINDS):
            continue
        publisher = TaskPublisher(app, crawl_id, queue=queue)
        stack.callback(publisher.close)
        publishers[queue] = publisher
    copier = AttemptCopier(frontier, attempt_log)
    return DispatchedCrawl(definition, client, frontier, admitter, attempt_log, copier, publishers)


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

    @property
    def crawl_id(self) -> str:
        return self._crawl.definition.crawl_id

    async def run(self) -> RunResult:
        crawl = self._crawl
        settings = crawl.definition.settings
        seeds = list(crawl.definition.seeds)
        frontier = crawl.frontier
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
            await self._wait(TICK_S)
        return counts

    async def _tick(self) -> QueueCounts:
        crawl = self._crawl
        now = self._clock.now()
        reaped = await crawl.frontier.reap(now)
        if reaped:
            log.info("%d expired leases counted as failed attempts", reaped)
        await crawl.copier.copy()
        self._state = await self._control.state()
        if crawl.definition.settings.revisit == "continuous" and self._state is RunState.RUNNING:
            await crawl.frontier.revisit(now)
        counts = await crawl.frontier.counts()
        if counts.pending and self._state is RunState.RUNNING:
            await crawl.client.sadd(ACTIVE_CRAWLS, self.crawl_id)
            for queue, publisher in crawl.publishers.items():
                next_at = await crawl.frontier.next_ready_at(now, QUEUE_KINDS[queue])
                if next_at is not None and next_at <= now:
                    await self._top_up(queue, publisher, now)
        return counts

    async def _top_up(self, queue: str, publisher: TaskPublisher, now: float) -> None:
        beats = await worker_beats(self._crawl.client)
        workers = sum(now - b.seen_at < WORKER_SEEN_S and queue in b.queues for b in beats)
        target = max(MIN_WAITING_TASKS, 2 * workers)
        waiting = await asyncio.to_thread(publisher.waiting)
        if waiting < target:
            await asyncio.to_thread(publisher.publish, target - waiting, self._leases_per_task)

    async def _drain_attempts(self) -> None:
        """Copy every attempt still pending, so the log is whole when the run ends."""
        try:
            while await self._crawl.copier.copy():
                pass
        except (StateError, RedisError) as exc:
            log.warning("attempts left to copy on the next run: %s", one_line(str(exc)))

    async def _wait(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        except TimeoutError:
            return

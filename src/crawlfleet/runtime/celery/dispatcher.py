"""The dispatcher of one distributed crawl: define it, seed it, feed the workers, watch it end.

It stores the crawl's definition in Redis and marks the crawl active, seeds the frontier,
then loops: count expired leases as failed attempts (``reap``), keep a few tasks of this crawl
waiting in the broker (so every crawl with a dispatcher gets its share of a shared worker
pool), and sample the frontier's counts, until nothing is queued or leased. The frontier
decides what is due; the dispatcher never schedules a URL itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.redis.queue import RedisQueueStore, redact
from crawlfleet.models import QueueCounts
from crawlfleet.monitoring.events import CrawlFinished, CrawlStarted, EventBus, QueueSampled
from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.runtime.celery.app import make_app
from crawlfleet.runtime.celery.crawls import delete_crawl, live_workers, one_line
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    CrawlDefinition,
    crawl_prefix,
    definition_key,
)
from crawlfleet.runtime.celery.publisher import TaskPublisher
from crawlfleet.runtime.local import RunResult
from crawlfleet.runtime.wiring import CrawlGraph, build_crawl
from crawlfleet.settings import Settings

log = logging.getLogger(__name__)

TICK_S = 0.1
SAMPLE_EVERY_S = 0.5
LEASES_PER_TASK = 64
MIN_WAITING_TASKS = 2
OUTAGE_LIMIT_S = 120.0  # give up when Redis or the broker stay unreachable this long


@dataclass(slots=True)
class DispatchedCrawl:
    """The open connections of a crawl being dispatched."""

    definition: CrawlDefinition
    client: Redis
    store: RedisQueueStore
    graph: CrawlGraph
    attempt_log: PostgresAttemptLog
    publisher: TaskPublisher


async def open_crawl(
    settings: Settings,
    seeds: list[str],
    *,
    broker_url: str | None,
    fresh: bool,
    events: EventBus,
    clock: Clock,
    stack: AsyncExitStack,
) -> DispatchedCrawl:
    """Connect to Redis, PostgreSQL and the broker, and store the crawl's definition.

    ``StateError`` (one line, no password) when Redis or PostgreSQL cannot be used.
    """
    if settings.redis_url is None or settings.postgres_dsn is None:
        raise ConfigError("a distributed crawl needs both --redis and --postgres")
    redis_url, dsn = settings.redis_url, settings.postgres_dsn
    crawl_id = settings.crawl_id
    client = Redis.from_url(redis_url, decode_responses=True, socket_connect_timeout=5)
    stack.push_async_callback(client.aclose)
    if fresh:
        try:
            await delete_crawl(client, crawl_id)
        except RedisError as exc:
            raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    try:
        store = await RedisQueueStore.open(
            redis_url,
            crawl_prefix(crawl_id),
            dedup=settings.dedup,
            bloom_capacity=settings.bloom_capacity,
            bloom_error_rate=settings.bloom_error_rate,
        )
        stack.push_async_callback(store.close)
        applied = await asyncio.to_thread(migrate, dsn)
        if applied:
            log.info("PostgreSQL schema migrations applied: %s", applied)
        sink = await PostgresSink.open(dsn, crawl_id=crawl_id)
        stack.push_async_callback(sink.close)
        attempt_log = await PostgresAttemptLog.open(dsn, crawl_id=crawl_id)
        stack.push_async_callback(attempt_log.close)
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None
    definition = CrawlDefinition(settings, tuple(seeds), uuid.uuid4().hex)
    try:
        await client.set(definition_key(crawl_id), definition.to_json())
        await client.sadd(ACTIVE_CRAWLS, crawl_id)
    except RedisError as exc:
        raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    graph = await build_crawl(
        settings,
        seeds=seeds,
        store=store,
        sink=sink,
        attempt_log=attempt_log,
        events=events,
        clock=clock,
        stack=stack,
    )
    app = make_app(broker_url or redis_url)
    publisher = TaskPublisher(app, crawl_id)
    stack.callback(publisher.close)
    return DispatchedCrawl(definition, client, store, graph, attempt_log, publisher)


class Dispatcher:
    """Seeds one crawl and keeps its workers fed until the frontier is empty or ``stop``."""

    def __init__(
        self,
        crawl: DispatchedCrawl,
        *,
        clock: Clock,
        events: EventBus,
        on_tick: Callable[[], Awaitable[None]] | None = None,
        leases_per_task: int = LEASES_PER_TASK,
    ) -> None:
        self._crawl = crawl
        self._leases_per_task = leases_per_task
        self._clock = clock
        self._events = events
        self._on_tick = on_tick
        self.stop = asyncio.Event()

    @property
    def crawl_id(self) -> str:
        return self._crawl.definition.crawl_id

    async def run(self) -> RunResult:
        crawl = self._crawl
        settings = crawl.definition.settings
        seeds = list(crawl.definition.seeds)
        await crawl.graph.frontier.reap(self._clock.now())
        await crawl.graph.crawler.seed(seeds)
        if settings.follow_sitemaps:
            await crawl.graph.crawler.seed_sitemaps(seeds)
        self._events.emit(CrawlStarted(self.crawl_id, len(seeds), self._clock.now()))
        counts = await self._loop()
        reason = "complete" if counts.pending == 0 else "interrupted"
        if not counts.pending:
            await crawl.client.srem(ACTIVE_CRAWLS, self.crawl_id)
        self._events.emit(CrawlFinished(self.crawl_id, counts, self._clock.now(), reason))
        return RunResult(reason, counts)

    async def _loop(self) -> QueueCounts:
        last_sample = 0.0
        outage_since: float | None = None
        counts = QueueCounts(0, 0, 0, 0, 0)
        while not self.stop.is_set():
            try:
                counts = await self._tick()
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
            now = self._clock.now()
            if now - last_sample >= SAMPLE_EVERY_S or counts.pending == 0:
                last_sample = now
                self._events.emit(QueueSampled(counts, now))
                if self._on_tick is not None:
                    await self._on_tick()
            if counts.pending == 0:
                return counts
            await self._wait(TICK_S)
        return counts

    async def _tick(self) -> QueueCounts:
        crawl = self._crawl
        now = self._clock.now()
        reaped = await crawl.graph.frontier.reap(now)
        if reaped:
            log.info("%d expired leases counted as failed attempts", reaped)
        counts = await crawl.store.counts()
        if counts.pending:
            await crawl.client.sadd(ACTIVE_CRAWLS, self.crawl_id)
            await self._top_up(now)
        return counts

    async def _top_up(self, now: float) -> None:
        workers = await live_workers(self._crawl.client, now)
        target = max(MIN_WAITING_TASKS, 2 * workers)
        publisher = self._crawl.publisher
        waiting = await asyncio.to_thread(publisher.waiting)
        if waiting < target:
            await asyncio.to_thread(publisher.publish, target - waiting, self._leases_per_task)

    async def _wait(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        except TimeoutError:
            return

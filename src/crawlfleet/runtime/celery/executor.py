"""What one worker process does with a task: claim due leases of a crawl and run them.

A ``WorkerRuntime`` lives as long as its worker process. It owns one asyncio event loop,
created on the first task and reused by every later one, so HTTP, Redis and PostgreSQL
connections are pooled across tasks; and one ``CrawlGraph`` per crawl id, built from the
crawl's definition in Redis the first time a task of that crawl arrives.

A batch claims as many leases as the worker has free slots, runs them concurrently, and
claims again as slots free up, until it has claimed ``max_leases`` leases or ``batch_s`` has
passed (then it lets the pages in flight finish), or it has had nothing to run for
``IDLE_WAIT_S`` in all. Delays live in the frontier: an idle batch only waits for the next
domain to become due, never longer than ``IDLE_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlfleet.clock import SystemClock
from crawlfleet.errors import StateError
from crawlfleet.frontier.redis.queue import RedisQueueStore, redact
from crawlfleet.models import Item, Lease
from crawlfleet.monitoring.events import EventBus
from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
from crawlfleet.monitoring.recorder import AttemptRecorder
from crawlfleet.pipeline.protocols import Sink
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.runtime.celery.crawls import one_line
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    WORKERS,
    CrawlDefinition,
    crawl_prefix,
    definition_key,
)
from crawlfleet.runtime.wiring import CrawlGraph, build_crawl, worker_name

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0  # longest a batch with nothing to run waits for work before returning
MIN_WAIT_S = 0.005
EMPTY_POLL_S = 0.1  # how often an idle batch looks for new work
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker's own connections and capacity (not part of any crawl's definition)."""

    redis_url: str
    postgres_dsn: str
    concurrency: int
    queues: tuple[str, ...] = ("http",)
    batch_s: float = 2.0
    parsers: tuple[str, ...] = ()  # the parser modules a crawl definition may name


def check_backends(config: WorkerConfig) -> None:
    """Fail fast (one-line ``StateError``, no password) if Redis or PostgreSQL is unusable.

    Runs the PostgreSQL migrations, so a worker may be the first to touch a fresh database.
    """

    async def ping() -> None:
        client = Redis.from_url(config.redis_url, socket_connect_timeout=5)
        try:
            await client.ping()
        finally:
            await client.aclose()

    try:
        asyncio.run(ping())
    except (RedisError, OSError, ValueError) as exc:
        raise StateError(one_line(f"Redis at {redact(config.redis_url)}: {exc}")) from None
    try:
        migrate(config.postgres_dsn)
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None


@dataclass(slots=True)
class BatchResult:
    """What one task did; returned for logs and tests."""

    crawl_id: str
    processed: int = 0
    errors: int = 0
    skipped_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "crawl_id": self.crawl_id,
            "processed": self.processed,
            "errors": self.errors,
            "skipped_reason": self.skipped_reason,
        }


class SerialSink:
    """Runs a sink's writes one at a time: ``PostgresSink`` holds a single connection, and
    this worker's pages in flight write concurrently."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._lock = asyncio.Lock()

    async def write(self, items: Sequence[Item]) -> None:
        async with self._lock:
            await self._sink.write(items)

    async def close(self) -> None:
        await self._sink.close()


@dataclass(slots=True)
class _Crawl:
    crawl_id: str
    run: str
    stack: AsyncExitStack
    graph: CrawlGraph
    store: RedisQueueStore
    recorder: AttemptRecorder


@dataclass(slots=True)
class WorkerRuntime:
    """Per-process state of a worker: its event loop, Redis client and crawl graphs."""

    config: WorkerConfig
    name: str = field(default_factory=worker_name)
    _loop: asyncio.AbstractEventLoop | None = None
    _redis: Redis | None = None
    _crawls: dict[str, _Crawl] = field(default_factory=dict)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this process's persistent event loop."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def shutdown(self) -> None:
        """Close every connection and the loop (worker shutdown)."""
        if self._loop is None:
            return
        self._loop.run_until_complete(self._close())
        self._loop.close()
        self._loop = None

    async def _close(self) -> None:
        for crawl in list(self._crawls.values()):
            await self._drop(crawl)
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    def _client(self) -> Redis:
        if self._redis is None:
            self._redis = Redis.from_url(
                self.config.redis_url,
                socket_connect_timeout=5,
                retry=Retry(ExponentialBackoff(cap=0.25, base=0.01), retries=8),
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
            )
        return self._redis

    async def batch(self, crawl_id: str, max_leases: int) -> BatchResult:
        """Claim and run up to ``max_leases`` due leases of ``crawl_id`` within ``batch_s``."""
        result = BatchResult(crawl_id)
        try:
            crawl = await self._crawl(crawl_id)
        except StateError as exc:
            log.warning("crawl %s unavailable: %s", crawl_id, exc)
            result.skipped_reason = str(exc)
            return result
        if crawl is None:
            result.skipped_reason = "crawl not active"
            return result
        await self._heartbeat(crawl_id)
        try:
            await self._run_leases(crawl, max_leases, result)
        finally:
            await self._flush(crawl)
        return result

    async def _crawl(self, crawl_id: str) -> _Crawl | None:
        client = self._client()
        try:
            active = await client.sismember(ACTIVE_CRAWLS, crawl_id)
            raw = await client.get(definition_key(crawl_id)) if active else None
        except RedisError as exc:
            raise StateError(f"Redis at {redact(self.config.redis_url)}: {exc}") from None
        if raw is None:
            return None
        definition = CrawlDefinition.from_json(raw)
        cached = self._crawls.get(crawl_id)
        if cached is not None and cached.run == definition.run:
            return cached
        if cached is not None:
            await self._drop(cached)
        crawl = await self._build(definition)
        self._crawls[crawl_id] = crawl
        return crawl

    async def _drop(self, crawl: _Crawl) -> None:
        """Forget a crawl's graph (a new run of it started, or the worker stops)."""
        self._crawls.pop(crawl.crawl_id, None)
        await self._flush(crawl)
        await crawl.stack.aclose()

    async def _build(self, definition: CrawlDefinition) -> _Crawl:
        settings = definition.settings
        stack = AsyncExitStack()
        store = await RedisQueueStore.open(
            self.config.redis_url,
            crawl_prefix(settings.crawl_id),
            dedup=settings.dedup,
            bloom_capacity=settings.bloom_capacity,
            bloom_error_rate=settings.bloom_error_rate,
        )
        stack.push_async_callback(store.close)
        sink = SerialSink(PostgresSink(self.config.postgres_dsn, crawl_id=settings.crawl_id))
        stack.push_async_callback(sink.close)
        attempt_log = PostgresAttemptLog(self.config.postgres_dsn, crawl_id=settings.crawl_id)
        stack.push_async_callback(attempt_log.close)
        events = EventBus()
        graph = await build_crawl(
            settings,
            seeds=list(definition.seeds),
            store=store,
            sink=sink,
            attempt_log=attempt_log,
            events=events,
            clock=SystemClock(),
            stack=stack,
        )
        recorder = AttemptRecorder(events, attempt_log)
        log.info("worker %s joined crawl %s", self.name, settings.crawl_id)
        return _Crawl(settings.crawl_id, definition.run, stack, graph, store, recorder)

    async def _heartbeat(self, crawl_id: str) -> None:
        beat = {
            "seen_at": time.time(),
            "queues": list(self.config.queues),
            "concurrency": self.config.concurrency,
            "crawl": crawl_id,
        }
        try:
            await self._client().hset(WORKERS, self.name, orjson.dumps(beat))
        except RedisError as exc:
            log.warning("heartbeat failed: %s", exc)

    async def _run_leases(self, crawl: _Crawl, max_leases: int, result: BatchResult) -> None:
        frontier = crawl.graph.frontier
        clock = crawl.graph.crawler.parts.clock
        concurrency = self.config.concurrency
        deadline = time.monotonic() + self.config.batch_s
        running: set[asyncio.Task[None]] = set()
        claimed = 0
        idle_left_s = IDLE_WAIT_S
        try:
            while True:
                claiming = time.monotonic() < deadline and claimed < max_leases
                free = min(concurrency - len(running), max_leases - claimed) if claiming else 0
                if free > 0:
                    for lease in await frontier.claim(free, clock.now()):
                        claimed += 1
                        running.add(asyncio.create_task(self._one(crawl, lease, result)))
                if not claiming and not running:
                    return
                wait_s: float | None = None  # None: until a page finishes
                if claiming and len(running) < concurrency:
                    due_s = await self._due_in_s(crawl, deadline)
                    if running:
                        wait_s = IDLE_WAIT_S if due_s is None else due_s
                    else:
                        if idle_left_s <= 0:
                            return
                        wait_s = min(EMPTY_POLL_S if due_s is None else due_s, idle_left_s)
                        idle_left_s -= wait_s
                if running:
                    _done, running = await asyncio.wait(
                        running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                    )
                else:
                    await asyncio.sleep(wait_s or 0.0)
        except StateError as exc:
            result.errors += 1
            log.warning("crawl %s: claiming stopped: %s", crawl.crawl_id, exc)
        finally:
            if running:
                await asyncio.gather(*running)

    async def _due_in_s(self, crawl: _Crawl, deadline: float) -> float | None:
        """Seconds until the next domain is due, if within ``IDLE_WAIT_S`` and the batch."""
        now = time.time()
        next_at = await crawl.store.next_ready_at(now)
        if next_at is None:
            return None
        wait_s = max(MIN_WAIT_S, next_at - now)
        if wait_s > IDLE_WAIT_S or time.monotonic() + wait_s > deadline:
            return None
        return wait_s

    async def _one(self, crawl: _Crawl, lease: Lease, result: BatchResult) -> None:
        """Run one lease; whatever fails outside the page leaves the lease to expire.

        An expired lease counts as a failed attempt when the dispatcher reaps it, so a page
        that keeps killing its worker ends in the dead-letter queue.
        """
        try:
            await crawl.graph.crawler.process(lease)
        except (StateError, RedisError, OSError) as exc:
            result.errors += 1
            log.warning("step for %s failed, lease left to expire: %s", lease.request.url, exc)
            return
        except Exception as exc:
            result.errors += 1
            log.exception("step for %s raised %s", lease.request.url, type(exc).__name__)
            return
        result.processed += 1

    async def _flush(self, crawl: _Crawl) -> None:
        try:
            await crawl.recorder.flush()
        except StateError as exc:
            log.warning("attempt log lines lost: %s", exc)

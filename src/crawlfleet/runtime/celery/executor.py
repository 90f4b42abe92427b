"""What one worker process does with a task: claim due leases of a crawl and run them.

A ``WorkerRuntime`` lives as long as its worker process. It owns one asyncio event loop,
created on the first task and reused by every later one, so HTTP, Redis and PostgreSQL
connections are pooled across tasks; and one ``CrawlGraph`` per crawl id, built from the
crawl's definition in Redis the first time a task of that crawl arrives.

A batch claims as many leases as the worker has free slots, runs them concurrently, and
claims again as slots free up, until it has run ``max_leases`` leases or ``batch_s`` has
passed, or nothing is due within ``IDLE_WAIT_S``. Delays live in the frontier: a batch never
sleeps longer than ``IDLE_WAIT_S`` waiting for a domain to become due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlfleet.clock import SystemClock
from crawlfleet.errors import CrawlfleetError, StateError
from crawlfleet.frontier.redis.queue import RedisQueueStore, redact
from crawlfleet.models import Lease
from crawlfleet.monitoring.events import EventBus
from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
from crawlfleet.monitoring.recorder import AttemptRecorder
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.runtime.celery.crawls import one_line
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    WORKERS,
    CrawlDefinition,
    crawl_prefix,
    definition_key,
    unfinished_key,
)
from crawlfleet.runtime.wiring import CrawlGraph, build_crawl, worker_name

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0  # longest a batch waits for the next due domain before returning
MIN_WAIT_S = 0.005
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker's own connections and capacity (not part of any crawl's definition)."""

    redis_url: str
    postgres_dsn: str
    concurrency: int
    queues: tuple[str, ...] = ("http",)
    batch_s: float = 5.0


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
    buried: int = 0
    errors: int = 0
    skipped_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "crawl_id": self.crawl_id,
            "processed": self.processed,
            "buried": self.buried,
            "errors": self.errors,
            "skipped_reason": self.skipped_reason,
        }


@dataclass(slots=True)
class _Crawl:
    crawl_id: str
    graph: CrawlGraph
    store: RedisQueueStore
    recorder: AttemptRecorder
    max_retries: int


@dataclass(slots=True)
class WorkerRuntime:
    """Per-process state of a worker: its event loop, Redis client and crawl graphs."""

    config: WorkerConfig
    name: str = field(default_factory=worker_name)
    _loop: asyncio.AbstractEventLoop | None = None
    _redis: Redis | None = None
    _crawls: dict[str, _Crawl] = field(default_factory=dict)
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

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
        for crawl in self._crawls.values():
            await crawl.recorder.flush()
        self._crawls.clear()
        await self._stack.aclose()
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    def _client(self) -> Redis:
        if self._redis is None:
            self._redis = Redis.from_url(self.config.redis_url, socket_connect_timeout=5)
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
        cached = self._crawls.get(crawl_id)
        if cached is not None:
            return cached
        definition = CrawlDefinition.from_json(raw)
        crawl = await self._build(definition)
        self._crawls[crawl_id] = crawl
        return crawl

    async def _build(self, definition: CrawlDefinition) -> _Crawl:
        settings = definition.settings
        stack = AsyncExitStack()
        await self._stack.enter_async_context(stack)
        store = await RedisQueueStore.open(
            self.config.redis_url,
            crawl_prefix(settings.crawl_id),
            dedup=settings.dedup,
            bloom_capacity=settings.bloom_capacity,
            bloom_error_rate=settings.bloom_error_rate,
        )
        stack.push_async_callback(store.close)
        sink = PostgresSink(self.config.postgres_dsn, crawl_id=settings.crawl_id)
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
        return _Crawl(settings.crawl_id, graph, store, recorder, settings.max_retries)

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
        deadline = time.monotonic() + self.config.batch_s
        running: set[asyncio.Task[None]] = set()
        claimed = 0
        while True:
            free = min(self.config.concurrency - len(running), max_leases - claimed)
            in_time = time.monotonic() < deadline
            leases = await frontier.claim(free, clock.now()) if free > 0 and in_time else []
            for lease in leases:
                claimed += 1
                running.add(asyncio.create_task(self._one(crawl, lease, result)))
            if not running:
                if not in_time or claimed >= max_leases:
                    return
                wait_s = await self._idle_wait_s(crawl, deadline)
                if wait_s is None:
                    return
                await asyncio.sleep(wait_s)
                continue
            timeout = None if claimed >= max_leases or not in_time else IDLE_WAIT_S
            if not leases and timeout is not None:
                next_s = await self._idle_wait_s(crawl, deadline)
                timeout = next_s if next_s is not None else IDLE_WAIT_S
            done, running = await asyncio.wait(
                running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                task.result()

    async def _idle_wait_s(self, crawl: _Crawl, deadline: float) -> float | None:
        """Seconds until the next domain is due, if that is soon and within the batch."""
        now = time.time()
        try:
            next_at = await crawl.store.next_ready_at(now)
        except StateError:
            return None
        if next_at is None:
            return None
        wait_s = max(MIN_WAIT_S, next_at - now)
        if wait_s > IDLE_WAIT_S or time.monotonic() + wait_s > deadline:
            return None
        return wait_s

    async def _one(self, crawl: _Crawl, lease: Lease, result: BatchResult) -> None:
        """Run one lease; a poison page (its claims never finish) goes to the DLQ instead."""
        fp = lease.request.fingerprint
        client = self._client()
        key = unfinished_key(crawl.crawl_id)
        try:
            lost = int(await client.hincrby(key, fp, 1)) - 1
            if lost > crawl.max_retries:
                error = f"lost {lost} times: the worker died or the lease ran out mid-page"
                await crawl.store.bury(lease, error, time.time())
                await client.hdel(key, fp)
                result.buried += 1
                log.warning("buried %s: %s", lease.request.url, error)
                return
            await crawl.graph.crawler.process(lease)
        except (StateError, RedisError, OSError) as exc:
            # Infrastructure, not the page: the lease expires and the page is tried again,
            # and this claim does not count toward burying it.
            result.errors += 1
            log.warning("step for %s failed, lease left to expire: %s", lease.request.url, exc)
            with contextlib.suppress(RedisError, OSError):
                await client.hdel(key, fp)
            return
        except CrawlfleetError as exc:
            result.errors += 1
            log.error("step for %s failed: %s", lease.request.url, exc)
            return
        except Exception as exc:
            result.errors += 1
            log.exception("step for %s raised %s", lease.request.url, type(exc).__name__)
            return
        result.processed += 1
        try:
            await client.hdel(key, fp)
        except RedisError as exc:
            log.warning("could not clear the claim count of %s: %s", lease.request.url, exc)

    async def _flush(self, crawl: _Crawl) -> None:
        try:
            await crawl.recorder.flush()
        except StateError as exc:
            log.warning("attempt log lines lost: %s", exc)

"""What one worker process does with a task: claim due leases of a crawl and run them.

A ``WorkerRuntime`` lives as long as its worker process. It owns one asyncio event loop,
created on the first task and reused by every later one, so HTTP, Redis and PostgreSQL
connections are pooled across tasks; and one ``CrawlGraph`` per crawl id, built from the
crawl's definition in Redis the first time a task of that crawl arrives.

A batch runs the crawl's ``ClaimLoop`` for the fetcher kinds of the worker's queues: it
claims as slots free up until it has claimed ``max_leases`` leases or ``batch_s`` has passed
(then it lets the pages in flight finish), or it has had nothing to run for
``IDLE_WAIT_S``. Delays live in the frontier: an idle batch only waits for the next domain
to become due. A batch of a paused or cancelled crawl (``runtime/control.py``) claims
nothing: it is skipped at its start, and stops claiming on the loop's next tick when the
crawl is paused while it runs (the pages in flight finish).

The worker's heartbeat (``crawlfleet:workers``, ``definition.py``) is written before each
batch and every ``BEAT_EVERY_S`` while it runs, with the steps in flight now and the pages
(steps that recorded an outcome) this process ran since it started: one ``HSET`` of the
worker's own field, written by that worker only, so the dashboard reads a consistent pair.
Between tasks ``beat`` writes it too (every 10 s, ``health.py``), so an idle worker is live.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError, FrontierLost, StateError
from crawlfleet.events import EventBus
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, connect, store_retry
from crawlfleet.runtime.backends import open_distributed
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    WORKERS,
    CrawlDefinition,
    check_parsers,
    definition_key,
)
from crawlfleet.runtime.celery.reparse_jobs import reparse_file
from crawlfleet.runtime.celery.worker_config import WorkerConfig
from crawlfleet.runtime.choice.kinds import queue_kinds
from crawlfleet.runtime.control import RedisControl, RunState
from crawlfleet.runtime.loop import event_loop
from crawlfleet.runtime.loop.claim import ClaimLoop
from crawlfleet.runtime.wiring import CrawlGraph, build_crawl, worker_name

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0  # longest a batch with nothing to run waits for work before returning
BEAT_EVERY_S = 1.0  # how often a running batch refreshes the heartbeat (in flight, pages)
T = TypeVar("T")


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


@dataclass(slots=True)
class _Crawl:
    crawl_id: str
    run: str
    stack: AsyncExitStack
    graph: CrawlGraph
    browser_pages: int
    """The crawl's ``browser_pages``: the browser lane's steps in flight."""


@dataclass(slots=True)
class WorkerRuntime:
    """Per-process state of a worker: its event loop, Redis client and crawl graphs.

    ``metrics`` counts the leases run, strategy changes and fill ratios per crawl and holds
    the worker's heartbeat, refreshed after every batch.
    """

    config: WorkerConfig
    name: str = field(default_factory=worker_name)
    metrics: Metrics | None = None
    pages: int = 0
    """Steps this process ran to an outcome, every crawl and batch (its heartbeat's ``pages``)."""
    _loop: asyncio.AbstractEventLoop | None = None
    _redis: RedisClient | None = None
    _crawls: dict[str, _Crawl] = field(default_factory=dict)
    _last_crawl: str = ""
    _refused: dict[str, str] = field(default_factory=dict)
    """Crawl id -> why this worker refuses its tasks (its heartbeat's ``refused``)."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this process's persistent event loop."""
        if self._loop is None:
            self._loop = event_loop.new_event_loop()
        return self._loop.run_until_complete(coro)

    def beat(self, stalled_since: float | None = None) -> None:
        """Write the heartbeat now, naming the last crawl served (between tasks only);
        ``stalled_since``: since when (epoch s) the worker takes no task (``health``)."""
        self.run(self._heartbeat(self._last_crawl, stalled_since=stalled_since))

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

    def _client(self) -> RedisClient:
        if self._redis is None:
            self._redis = connect(
                self.config.redis_url,
                socket_connect_timeout=5,
                retry=store_retry(self.config.redis_url),
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
            )
        return self._redis

    async def batch(self, crawl_id: str, max_leases: int) -> BatchResult:
        """Claim and run up to ``max_leases`` due leases of ``crawl_id`` within ``batch_s``."""
        result = BatchResult(crawl_id)
        try:
            crawl = await self._crawl(crawl_id)
        except (StateError, ConfigError) as exc:
            log.warning("crawl %s unavailable: %s", crawl_id, exc)
            result.skipped_reason = str(exc)
            if isinstance(exc, ConfigError):  # refused: the dispatcher and status say why
                self._refused[crawl_id] = str(exc)
                await self._heartbeat(self._last_crawl or crawl_id)
            return result
        self._refused.pop(crawl_id, None)
        if crawl is None:
            result.skipped_reason = "crawl not active"
            return result
        control = RedisControl(self._client(), crawl_id)
        try:
            state = await control.state()
        except (RedisError, StateError) as exc:
            log.warning("crawl %s: run state unreadable: %s", crawl_id, exc)
            result.skipped_reason = str(exc)
            return result
        if state is not RunState.RUNNING:
            result.skipped_reason = f"crawl {state.value}"
            if state is RunState.CANCELLED:
                await self._drop(crawl)
            return result
        self._last_crawl = crawl_id
        await self._heartbeat(crawl_id)
        await self._run_leases(crawl, max_leases, result, control)
        if self.metrics is not None:
            self.metrics.ran(crawl_id, self.name, result.processed)
            self.metrics.beat(self.name, time.time())
            await self.metrics.refresh()
        return result

    async def reparse(self, crawl_id: str, job: str, source: str, name: str) -> dict[str, Any]:
        """Reparse one WARC file of a distributed reparse (``reparse_jobs.reparse_file``)."""
        return await reparse_file(self.config, self._client(), crawl_id, job, source, name)

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
        check_parsers(definition, self.config.parsers)  # Redis access is not code execution
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
        await crawl.stack.aclose()

    async def _build(self, definition: CrawlDefinition) -> _Crawl:
        settings = definition.settings.model_copy(
            update={"redis_url": self.config.redis_url, "postgres_dsn": self.config.postgres_dsn}
        )
        stack = AsyncExitStack()
        events = EventBus()
        try:
            backends = await open_distributed(settings, stack, worker=True)
            graph = await build_crawl(
                settings,
                seeds=list(definition.seeds),
                backends=backends,
                events=events,
                clock=SystemClock(),
                stack=stack,
                kinds=self.config.queues,
            )
        except BaseException:
            await stack.aclose()
            raise
        if self.metrics is not None:
            quality = graph.crawler.parts.pipeline.quality
            self.metrics.track(settings.crawl_id, events=events, quality=quality)
            if graph.browser_pool is not None:
                self.metrics.browser(settings.crawl_id, graph.browser_pool)
        log.info("worker %s joined crawl %s", self.name, settings.crawl_id)
        return _Crawl(settings.crawl_id, definition.run, stack, graph, settings.browser_pages)

    async def _heartbeat(
        self,
        crawl_id: str,
        in_flight: int = 0,
        pages: int = 0,
        *,
        stalled_since: float | None = None,
    ) -> None:
        beat = {
            "seen_at": time.time(),
            "queues": list(self.config.queues),
            "concurrency": self.config.concurrency,
            "crawl": crawl_id,
            "in_flight": in_flight,
            "pages": self.pages + pages,
            "stalled_since": stalled_since,
            "refused": self._refused,
        }
        try:
            await self._client().hset(WORKERS, self.name, orjson.dumps(beat))
        except RedisError as exc:
            log.warning("heartbeat failed: %s", exc)

    async def _run_leases(
        self, crawl: _Crawl, max_leases: int, result: BatchResult, control: RedisControl
    ) -> None:
        crawler = crawl.graph.crawler
        kinds = queue_kinds(self.config.queues)
        loop = ClaimLoop(
            crawler,
            kinds=kinds,
            concurrency=self.config.concurrency,
            clock=crawler.parts.clock,
            kind_limits={"browser": crawl.browser_pages},
        )
        beat_at = time.monotonic()

        async def beat() -> None:
            nonlocal beat_at
            if time.monotonic() - beat_at >= BEAT_EVERY_S:
                beat_at = time.monotonic()
                await self._heartbeat(crawl.crawl_id, loop.in_flight, loop.processed)

        try:
            ran = await loop.run(
                stop=asyncio.Event(),
                max_leases=max_leases,
                deadline_s=self.config.batch_s,
                idle_s=IDLE_WAIT_S,
                on_tick=beat,
                hold=lambda: _held(control),
            )
        except FrontierLost as exc:
            result.errors += 1
            log.error("crawl %s dropped: %s", crawl.crawl_id, exc)
            await self._drop(crawl)
            return
        except StateError as exc:
            result.errors += 1
            log.warning("crawl %s: claiming stopped: %s", crawl.crawl_id, exc)
            return
        finally:
            self.pages += loop.processed
        result.processed += ran.processed
        result.errors += ran.errors
        await self._heartbeat(crawl.crawl_id)


async def _held(control: RedisControl) -> bool:
    """Whether the crawl stopped running (paused or cancelled); unreadable counts as running."""
    try:
        return await control.state() is not RunState.RUNNING
    except (RedisError, StateError):
        return False

"""The dashboard's source for a fleet: every distributed crawl of one Redis, and PostgreSQL.

Crawls are the definitions in Redis (``runtime.celery.crawls.list_crawls``); each one's
figures, domains and dead letters are read through its ``Frontier``, opened once with the
settings of its definition (``open_crawl_frontier``; reopened when the crawl is started
over: ``crawl_frontier.CrawlFrontier``), and its run state from the operator's
control key and the dispatcher's active set, as ``crawlfleet status`` shows it. Attempts
(with filters) and items come from PostgreSQL through one read-only connection
(``runtime.backends.open_postgres_reader``). Workers are the heartbeats in
``crawlfleet:workers``; pages/s is the rate of each one's ``pages`` counter between
heartbeats. Actions need no state lock: the store is shared, so requeue, purge and pause
run while the crawl does (a cancelled crawl cannot be paused: ``ActionRefused``).

Connections are opened on first use, on the event loop that serves the dashboard; ``probe``
opens and closes them once, so a bad URL fails at start-up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from crawlfleet.dashboard.crawl_frontier import CrawlFrontier
from crawlfleet.dashboard.sources import (
    ITEM_ROWS,
    ActionRefused,
    ItemSample,
    WorkerRow,
    sample_items,
)
from crawlfleet.dashboard.workers import WorkerRates
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.redis.connection import RedisClient
from crawlfleet.monitoring.deadletters import purge_class, requeue_class
from crawlfleet.monitoring.postgres_reader import PostgresReader
from crawlfleet.monitoring.sqlite_reader import AttemptFilter
from crawlfleet.records import Attempt, QueueCounts
from crawlfleet.redact import redact
from crawlfleet.runtime.backends import one_line, open_postgres_reader
from crawlfleet.runtime.celery.crawls import (
    WORKER_SEEN_S,
    WorkerBeat,
    connect,
    dispatcher_ages,
    list_crawls,
    open_crawl_frontier,
    worker_beats,
)
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS
from crawlfleet.runtime.control import RedisControl, crawl_state, set_paused
from crawlfleet.settings import Settings


class DistributedSource:
    """Every crawl of the Redis at ``redis_url``, with the PostgreSQL at ``postgres_dsn``."""

    mode = "distributed"

    def __init__(self, redis_url: str, postgres_dsn: str) -> None:
        self._redis_url = redis_url
        self._dsn = postgres_dsn
        self._stack: AsyncExitStack | None = None
        self._client: RedisClient | None = None
        self._postgres: PostgresReader | None = None
        self._frontiers: dict[str, CrawlFrontier] = {}
        self._rates = WorkerRates()

    async def probe(self) -> None:
        """Open Redis and PostgreSQL once and close them (``StateError`` if either fails)."""
        try:
            await self._redis().ping()
            await self._reader()
        except RedisError as exc:
            raise self._redis_error(exc) from None
        finally:
            await self.close()

    async def crawl_ids(self) -> list[str]:
        try:
            ids, _active = await list_crawls(self._redis())
        except RedisError as exc:
            raise self._redis_error(exc) from None
        return ids

    async def reader(self, crawl_id: str) -> CrawlFrontier:
        opened = self._frontiers.get(crawl_id)
        if opened is None:

            async def opener(stack: AsyncExitStack) -> Frontier:
                try:
                    return await open_crawl_frontier(self._redis_url, crawl_id, stack)
                except ConfigError as exc:
                    raise StateError(f"crawl {crawl_id!r}: {exc}") from None

            opened = self._frontiers[crawl_id] = await CrawlFrontier.open(opener)
        return opened

    async def run_state(self, crawl_id: str, counts: QueueCounts) -> str:
        client = self._redis()
        try:
            active = {str(member) for member in await client.smembers(ACTIVE_CRAWLS)}
            asked = await RedisControl(client, crawl_id).state()
            ages = await dispatcher_ages(client, time.time())
        except RedisError as exc:
            raise self._redis_error(exc) from None
        return crawl_state(
            asked,
            dispatching=crawl_id in active,
            pending=counts.pending,
            dispatcher_age_s=ages.get(crawl_id),
        )

    async def attempts(self, crawl_id: str, where: AttemptFilter, limit: int) -> list[Attempt]:
        return await (await self._reader()).attempts(crawl_id, where, limit)

    async def items(self, crawl_id: str) -> list[ItemSample]:
        return sample_items(await (await self._reader()).latest_items(crawl_id, ITEM_ROWS))

    async def beats(self) -> Sequence[WorkerBeat]:
        try:
            return await worker_beats(self._redis())
        except RedisError as exc:
            raise self._redis_error(exc) from None

    async def workers(self) -> list[WorkerRow]:
        beats = await self.beats()
        now = time.time()
        self._rates.forget_except({beat.name for beat in beats})
        rows = []
        for beat in beats:
            live = now - beat.seen_at < WORKER_SEEN_S
            rate = (
                None
                if beat.pages is None
                else self._rates.observe(beat.name, beat.seen_at, beat.pages)
            )
            rows.append(
                WorkerRow(
                    name=beat.name,
                    seen_ago_s=max(0.0, now - beat.seen_at),
                    live=live,
                    crawl=beat.crawl,
                    concurrency=beat.concurrency,
                    queues=beat.queues,
                    in_flight=beat.in_flight if live else None,
                    pages_per_s=rate if live else 0.0,
                )
            )
        return rows

    async def requeue_class(self, crawl_id: str, name: str) -> int:
        return await requeue_class(await self.reader(crawl_id), name)

    async def purge_class(self, crawl_id: str, name: str) -> int:
        return await purge_class(await self.reader(crawl_id), name)

    async def stored_quality(self, crawl_id: str) -> dict[str, Any] | None:
        return await (await self._reader()).quality(crawl_id)

    def samples_root(self, crawl_id: str) -> Path | None:
        return None

    async def resume_parser(self, crawl_id: str, parser: str, domain: str) -> int:
        from crawlfleet.runtime.drift import resume

        return await resume(await self.reader(crawl_id), parser, domain)

    async def set_paused(self, crawl_id: str, paused: bool) -> None:
        await self.reader(crawl_id)
        try:
            await set_paused(Settings(redis_url=self._redis_url, crawl_id=crawl_id), paused)
        except StateError as exc:
            raise ActionRefused(str(exc)) from None

    async def close(self) -> None:
        stack, self._stack = self._stack, None
        self._client = self._postgres = None
        opened = list(self._frontiers.values())
        self._frontiers.clear()
        for frontier in opened:
            await frontier.close()
        if stack is not None:
            await stack.aclose()

    def _opened(self) -> AsyncExitStack:
        if self._stack is None:
            self._stack = AsyncExitStack()
        return self._stack

    def _redis(self) -> RedisClient:
        if self._client is None:
            client = connect(self._redis_url)
            self._opened().push_async_callback(client.aclose)
            self._client = client
        return self._client

    async def _reader(self) -> PostgresReader:
        if self._postgres is None:
            self._postgres = await open_postgres_reader(self._dsn, self._opened())
        return self._postgres

    def _redis_error(self, exc: RedisError) -> StateError:
        return StateError(one_line(f"Redis at {redact(self._redis_url)}: {exc}"))

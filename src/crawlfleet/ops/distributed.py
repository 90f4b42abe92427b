"""The operations of a fleet: every distributed crawl of one Redis, and PostgreSQL.

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

What the operator asks of a crawl is its control key (``runtime/control.py``): pause sets
it, cancel sets it and takes the crawl off the active set, so its dispatcher exits and
workers drop its tasks. ``add_urls`` offers URLs as seeds through the crawl's own
definition: serialized, scoped and robots-prepared as its dispatcher would.

Connections are opened on first use, on the event loop that serves the dashboard; ``probe``
opens and closes them once, so a bad URL fails at start-up. Without a PostgreSQL DSN (the
operating commands give only ``--redis``) attempts and items are a ``ConfigError``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.events import EventBus
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.monitoring.deadletters import purge_class, requeue_class, resolve_fingerprints
from crawlfleet.monitoring.postgres_reader import PostgresReader
from crawlfleet.ops.crawl_frontier import CrawlFrontier
from crawlfleet.ops.protocols import (
    ITEM_ROWS,
    ActionRefused,
    Added,
    ItemSample,
    WorkerRow,
    sample_items,
)
from crawlfleet.ops.workers import WorkerRates
from crawlfleet.proxies.protocols import ProxyState
from crawlfleet.records import Attempt, AttemptFilter, QueueCounts
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient
from crawlfleet.runtime.backends import (
    one_line,
    open_postgres_reader,
    open_proxy_stores,
    open_store,
)
from crawlfleet.runtime.celery.crawls import (
    WorkerBeat,
    connect,
    dispatcher_ages,
    list_crawls,
    no_worker_reason,
    open_crawl_frontier,
    read_definition,
    worker_beats,
)
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS, definition_key
from crawlfleet.runtime.celery.dispatched import check_seeds
from crawlfleet.runtime.choice.kinds import QUEUES
from crawlfleet.runtime.control import (
    WORKER_SEEN_S,
    RedisControl,
    RunState,
    control_key,
    crawl_state,
)
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.step.drift import resume
from crawlfleet.runtime.wiring import build_admitter, build_frontier
from crawlfleet.settings import Settings


class DistributedOperations:
    """Every crawl of the Redis at ``redis_url``, with the PostgreSQL at ``postgres_dsn``."""

    mode = "distributed"

    def __init__(self, redis_url: str, postgres_dsn: str | None) -> None:
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
            if self._dsn is not None:
                await self._reader()
        except RedisError as exc:
            raise self._redis_error(exc) from None
        finally:
            await self.close()

    def describe(self, crawl_id: str) -> str:
        return f"crawl {crawl_id}"

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

    async def asked(self, crawl_id: str) -> RunState:
        try:
            return await RedisControl(self._redis(), crawl_id).state()
        except RedisError as exc:
            raise self._redis_error(exc) from None

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

    async def no_worker(self, crawl_id: str) -> str | None:
        """Why no live worker serves the crawl on any queue (``crawls.no_worker_reason``)."""
        return no_worker_reason(await self.beats(), crawl_id, QUEUES, time.time())

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

    async def proxies(self, crawl_id: str) -> list[ProxyState]:
        settings = Settings(redis_url=self._redis_url, crawl_id=crawl_id)
        async with AsyncExitStack() as stack:
            states, _ = await open_proxy_stores(settings, stack)
            return await states.all()

    async def requeue_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        frontier = await self.reader(crawl_id)
        chosen = None if prefixes is None else await resolve_fingerprints(frontier, prefixes)
        return await frontier.requeue_dead(chosen)

    async def purge_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        frontier = await self.reader(crawl_id)
        chosen = None if prefixes is None else await resolve_fingerprints(frontier, prefixes)
        return await frontier.purge_dead(chosen)

    async def requeue_class(self, crawl_id: str, name: str) -> int:
        return await requeue_class(await self.reader(crawl_id), name)

    async def purge_class(self, crawl_id: str, name: str) -> int:
        return await purge_class(await self.reader(crawl_id), name)

    async def stored_quality(self, crawl_id: str) -> dict[str, Any] | None:
        return await (await self._reader()).quality(crawl_id)

    def samples_root(self, crawl_id: str) -> Path | None:
        return None

    async def resume_parser(self, crawl_id: str, parser: str, domain: str) -> int:
        return await resume(await self.reader(crawl_id), parser, domain)

    async def set_paused(self, crawl_id: str, paused: bool) -> None:
        """``ActionRefused`` when there is no such crawl, or it was cancelled (for good)."""
        client = self._redis()
        try:
            await self._check(client, crawl_id)
            if await RedisControl(client, crawl_id).state() is RunState.CANCELLED:
                raise ActionRefused(
                    f"crawl {crawl_id!r} was cancelled; start it over with crawl --fresh"
                )
            if paused:
                await client.set(control_key(crawl_id), RunState.PAUSED.value)
            else:
                await client.delete(control_key(crawl_id))
        except RedisError as exc:
            raise self._redis_error(exc) from None
        except StateError as exc:
            raise ActionRefused(str(exc)) from None

    async def cancel(self, crawl_id: str) -> None:
        """Its dispatcher exits and workers stop serving it; its state stays in Redis."""
        client = self._redis()
        try:
            await self._check(client, crawl_id)
            await client.set(control_key(crawl_id), RunState.CANCELLED.value)
            await client.srem(ACTIVE_CRAWLS, crawl_id)
        except RedisError as exc:
            raise self._redis_error(exc) from None

    async def add_urls(
        self, crawl_id: str, urls: Sequence[str], *, clock: Clock | None = None
    ) -> Added:
        """``ConfigError`` for a URL a distributed crawl cannot take (credentials, ``file:``);
        ``StateError`` when there is no such crawl or it was cancelled."""
        check_seeds(urls)
        client = self._redis()
        try:
            definition = await read_definition(client, crawl_id)
            if definition is None:
                raise StateError(f"no crawl {crawl_id!r} in Redis at {redact(self._redis_url)}")
            if await RedisControl(client, crawl_id).state() is RunState.CANCELLED:
                raise StateError(
                    f"crawl {crawl_id!r} was cancelled; start it over with crawl --fresh"
                )
            own = definition.settings.model_copy(update={"redis_url": self._redis_url})
            async with AsyncExitStack() as stack:
                store = (await open_store(own, stack, domain_policy(own))).store
                frontier = build_frontier(own, store, list(definition.seeds))
                admitter = await build_admitter(
                    own, frontier, events=EventBus(), clock=clock or SystemClock(), stack=stack
                )
                requests, refused = frontier.requests_for(list(urls), None)
                admitted = await admitter.add(requests)
            dispatching = bool(await client.sismember(ACTIVE_CRAWLS, crawl_id))
        except RedisError as exc:
            raise self._redis_error(exc) from None
        rejected = [(url, refusal.text) for url, refusal in refused]
        return Added(admitted, len(requests) - admitted, rejected, dispatching)

    async def _check(self, client: RedisClient, crawl_id: str) -> None:
        if not await client.exists(definition_key(crawl_id)):
            raise StateError(f"no crawl {crawl_id!r} in Redis at {redact(self._redis_url)}")

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
        if self._dsn is None:
            raise ConfigError("attempts and items of distributed crawls need --postgres DSN")
        if self._postgres is None:
            self._postgres = await open_postgres_reader(self._dsn, self._opened())
        return self._postgres

    def _redis_error(self, exc: RedisError) -> StateError:
        return StateError(one_line(f"Redis at {redact(self._redis_url)}: {exc}"))

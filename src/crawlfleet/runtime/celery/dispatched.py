"""Opening a distributed crawl: check it can be served, connect, store its definition.

``open_crawl`` checks the seeds and the fetcher kinds, the broker (first, with a bounded
wait, before anything is stored), Redis and PostgreSQL, stores the crawl's definition in
Redis and marks the crawl active; the ``DispatchedCrawl`` it returns holds the open
connections the ``Dispatcher`` (``dispatcher.py``) runs the crawl with.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from redis.exceptions import RedisError

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.events import EventBus
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.monitoring.attempt_copier import AttemptCopier
from crawlfleet.monitoring.attempt_log import AttemptReader
from crawlfleet.monitoring.postgres_quality import DOMAINS, WRITE_EVERY_S
from crawlfleet.monitoring.quality_copier import QualityCopier
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.backends import one_line, open_distributed
from crawlfleet.runtime.celery.app import check_broker, make_app
from crawlfleet.runtime.celery.crawls import WorkerBeat, connect, delete_crawl, worker_beats
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS, CrawlDefinition, definition_key
from crawlfleet.runtime.celery.publisher import TaskPublisher
from crawlfleet.runtime.choice.kinds import (
    AUTO,
    QUEUE_KINDS,
    QUEUES,
    WORKER_KINDS,
    check_kinds,
    named_kinds,
)
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.runtime.control import RedisControl, RunState
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_admitter, build_frontier
from crawlfleet.settings import Settings

BROKER_ENV = "CRAWLFLEET_BROKER_URL"
"""Names the Celery broker when it is not the crawl's Redis (e.g. ``amqp://...``)."""


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
    quality: QualityCopier

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
    backends = await open_distributed(settings, stack, policy=domain_policy(settings), worker=False)
    attempt_log, quality = backends.attempt_log, backends.quality
    if attempt_log is None or quality is None:
        raise StateError("the dispatcher opened no attempt log or quality scores")
    definition = CrawlDefinition(settings, tuple(seeds), uuid.uuid4().hex)
    try:
        await client.set(definition_key(crawl_id), definition.to_json())
        await client.sadd(ACTIVE_CRAWLS, crawl_id)
    except RedisError as exc:
        raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    registry = load_parsers(settings.parsers, settings.selector_parsers)
    frontier = build_frontier(
        settings, backends.store, seeds, Router(registry, settings.domains, settings.browser_wait)
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
    scores = QualityCopier(frontier, quality, every_s=WRITE_EVERY_S, domains=DOMAINS)
    return DispatchedCrawl(
        definition, client, frontier, admitter, attempt_log, copier, publishers, scores
    )

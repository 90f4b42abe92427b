"""A worker's own connections and capacity, and the start-up check of its backends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.redact import redact
from crawlfleet.redisdb import connect
from crawlfleet.runtime.backends import check_redis, one_line


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker's own connections and capacity (not part of any crawl's definition)."""

    redis_url: str
    postgres_dsn: str
    concurrency: int
    queues: tuple[str, ...] = ("http",)
    batch_s: float = 2.0
    parsers: tuple[str, ...] = ()  # the parser modules a crawl definition may name
    accept_unsafe_redis: bool = False


def check_backends(config: WorkerConfig) -> None:
    """Fail fast (one-line ``StateError``, no password) if Redis or PostgreSQL is unusable.

    Runs the PostgreSQL migrations, so a worker may be the first to touch a fresh database.
    """

    async def ping() -> None:
        client = connect(config.redis_url, socket_connect_timeout=5)
        try:
            await client.ping()
        finally:
            await client.aclose()

    try:
        asyncio.run(ping())
    except (RedisError, OSError, ValueError) as exc:
        raise StateError(one_line(f"Redis at {redact(config.redis_url)}: {exc}")) from None
    asyncio.run(check_redis(config.redis_url, accept_unsafe=config.accept_unsafe_redis))
    try:
        migrate(config.postgres_dsn)
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None

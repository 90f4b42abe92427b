"""Distributed crawls as seen in Redis: list them, open one's frontier, delete one, workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import orjson
from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient
from crawlfleet.redisdb import connect as connect_url
from crawlfleet.runtime.backends import frontier_prefix, one_line, partition_pattern
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    DISPATCHERS,
    ROOT,
    WORKERS,
    CrawlDefinition,
    crawl_prefix,
    definition_key,
)
from crawlfleet.runtime.control import WORKER_SEEN_S
from crawlfleet.runtime.wiring import open_frontier

SCAN_COUNT = 1000


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """A worker's last heartbeat."""

    name: str
    seen_at: float
    crawl: str
    concurrency: int
    queues: tuple[str, ...]
    in_flight: int | None = None
    """Steps running at ``seen_at``; None from a worker that does not report it."""
    pages: int | None = None
    """Steps the worker process ran to an outcome since it started, as of ``seen_at``."""
    stalled_since: float | None = None
    """Since when (epoch s) the worker's task window has been full with no task running."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Crawl id -> why this worker refuses that crawl's tasks (a module not in its --parsers)."""


def _count(value: object) -> int | None:
    return None if value is None else int(str(value))


def _seconds(value: object) -> float | None:
    return None if value is None else float(str(value))


def connect(redis_url: str) -> RedisClient:
    """A client for the runtime's own keys (the frontier has its own)."""
    try:
        return connect_url(redis_url, decode_responses=True, socket_connect_timeout=5)
    except ValueError as exc:
        raise StateError(f"bad Redis URL {redact(redis_url)}: {exc}") from None


async def read_definition(client: RedisClient, crawl_id: str) -> CrawlDefinition | None:
    raw = await client.get(definition_key(crawl_id))
    return None if raw is None else CrawlDefinition.from_json(raw)


async def open_crawl_frontier(redis_url: str, crawl_id: str, stack: AsyncExitStack) -> Frontier:
    """The frontier of an existing crawl, opened with the settings it was created with.

    ``StateError`` if Redis is unreachable or holds no crawl of that id.
    """
    client = connect(redis_url)
    try:
        definition = await read_definition(client, crawl_id)
    except RedisError as exc:
        raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    finally:
        await client.aclose()
    if definition is None:
        raise StateError(f"no crawl {crawl_id!r} in Redis at {redact(redis_url)}")
    settings = definition.settings.model_copy(update={"redis_url": redis_url})
    return await open_frontier(settings, stack, definition.seeds)


async def list_crawls(client: RedisClient) -> tuple[list[str], set[str]]:
    """Every crawl id with a definition, sorted, and the ids being dispatched now."""
    suffix = ":definition"
    ids = [
        key[len(ROOT) + 1 : -len(suffix)]
        async for key in client.scan_iter(match=f"{ROOT}:*{suffix}", count=SCAN_COUNT)
    ]
    active = {str(member) for member in await client.smembers(ACTIVE_CRAWLS)}
    return sorted(ids), active


async def dispatcher_ages(client: RedisClient, now: float) -> dict[str, float]:
    """Crawl id -> seconds since its dispatcher's last beat (``DISPATCHERS``)."""
    ages: dict[str, float] = {}
    for crawl_id, raw in (await client.hgetall(DISPATCHERS)).items():
        try:
            ages[str(crawl_id)] = now - float(orjson.loads(raw)["seen_at"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return ages


async def delete_crawl(client: RedisClient, crawl_id: str) -> int:
    """Delete every key of a crawl (SCAN + UNLINK under its prefixes); how many."""
    deleted = 0
    patterns = (f"{crawl_prefix(crawl_id)}:*", f"{frontier_prefix(crawl_id)}:*")
    for pattern in (*patterns, partition_pattern(crawl_id)):
        batch: list[str] = []
        async for key in client.scan_iter(match=pattern, count=SCAN_COUNT):
            batch.append(key)
            if len(batch) >= SCAN_COUNT:
                deleted += int(await client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(await client.unlink(*batch))
    await client.srem(ACTIVE_CRAWLS, crawl_id)
    return deleted


async def worker_beats(client: RedisClient) -> list[WorkerBeat]:
    """Every worker that ever sent a heartbeat, most recent first."""
    beats = []
    for name, raw in (await client.hgetall(WORKERS)).items():
        try:
            data = orjson.loads(raw)
            beat = WorkerBeat(
                name=str(name),
                seen_at=float(data["seen_at"]),
                crawl=str(data["crawl"]),
                concurrency=int(data["concurrency"]),
                queues=tuple(str(q) for q in data["queues"]),
                in_flight=_count(data.get("in_flight")),
                pages=_count(data.get("pages")),
                stalled_since=_seconds(data.get("stalled_since")),
                refused={str(k): str(v) for k, v in (data.get("refused") or {}).items()},
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            continue
        beats.append(beat)
    return sorted(beats, key=lambda b: -b.seen_at)


def no_worker_reason(
    beats: Sequence[WorkerBeat], crawl_id: str, queues: Sequence[str], now: float
) -> str | None:
    """Why no live worker serves crawl ``crawl_id`` on any of ``queues``; None when one does.

    A worker serves it when its heartbeat is recent, it consumes one of the queues, and it
    has not refused the crawl (``refused``: a parser module it was not started to allow).
    """
    live = [b for b in beats if now - b.seen_at < WORKER_SEEN_S]
    if any(crawl_id not in b.refused and set(b.queues) & set(queues) for b in live):
        return None
    refusals = [
        f"{b.name} refuses it: {b.refused[crawl_id]}" for b in live if crawl_id in b.refused
    ]
    if refusals:
        return "; ".join(refusals)
    if live:
        listed = ", ".join(f"{b.name} ({','.join(b.queues)})" for b in live)
        return f"no live worker consumes {', '.join(queues)}: {listed}"
    return f"no worker sent a heartbeat in the last {WORKER_SEEN_S:.0f} s"

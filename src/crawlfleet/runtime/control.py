"""Pause, resume and cancel a crawl from outside the processes that run it.

Where the state lives:

- **distributed**: the Redis key ``crawlfleet:{<crawl_id>}:control`` (``frontier/redis/keys.py``)
  holds ``paused`` or ``cancelled``; no key means running. The dispatcher reads it every tick
  (paused: it publishes no task; cancelled: it exits), a worker before each batch and on its
  claim loop's ticks (it claims nothing of a paused or cancelled crawl; steps in flight
  finish). ``cancel`` also takes the crawl off the active set, so workers drop its tasks.
  A cancelled crawl keeps its state for ``status`` and ``dlq``; ``crawl --fresh`` starts it
  over (it deletes every key of the crawl, this one too).
- **embedded**: the file ``<state>/paused``, looked at by the runner's claim loop on every
  tick (``TICK_S``). Cancel is distributed only: an embedded crawl is stopped with Ctrl-C.

``add_urls`` offers URLs to a running distributed crawl as seeds, through the crawl's own
definition: serialized, scoped and robots-prepared as its dispatcher would.

``redis`` is imported inside the functions that use it, so the embedded runner needs none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.redact import redact
from crawlfleet.settings import Settings
from crawlfleet.statedir import PAUSE_FILE

if TYPE_CHECKING:
    from crawlfleet.redisdb import RedisClient


class RunState(StrEnum):
    """What the operator asked of a crawl."""

    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"


DISPATCHER_SEEN_S = 30.0
"""A dispatched crawl whose dispatcher has not beaten for this long has lost it."""


def crawl_state(
    asked: RunState, *, dispatching: bool, pending: int, dispatcher_age_s: float | None
) -> str:
    """``paused`` or ``cancelled`` when asked, else ``dispatching``, ``dispatcher gone`` (a
    crawl marked dispatched whose dispatcher's last beat, ``dispatcher_age_s`` ago or never,
    is older than ``DISPATCHER_SEEN_S``: killed, or its host lost), ``stopped`` or
    ``finished``."""
    if asked is not RunState.RUNNING:
        return asked.value
    if dispatching:
        if dispatcher_age_s is None or dispatcher_age_s >= DISPATCHER_SEEN_S:
            return "dispatcher gone"
        return "dispatching"
    return "stopped" if pending else "finished"


class Control(Protocol):
    """Reads what the operator asked of one crawl; cheap enough to call on every tick."""

    async def state(self) -> RunState: ...


class FileControl:
    """An embedded crawl's control: the pause file in its state directory."""

    def __init__(self, state_dir: Path) -> None:
        self._path = state_dir / PAUSE_FILE

    async def state(self) -> RunState:
        return RunState.PAUSED if self._path.exists() else RunState.RUNNING

    async def set_paused(self, paused: bool) -> None:
        if paused:
            self._path.touch()
        else:
            self._path.unlink(missing_ok=True)


def control_key(crawl_id: str) -> str:
    """The Redis key of a distributed crawl's run state (in the crawl's hash slot)."""
    from crawlfleet.frontier.redis.keys import CrawlKeys
    from crawlfleet.runtime.backends import frontier_prefix

    return CrawlKeys(frontier_prefix(crawl_id)).key("control")


class RedisControl:
    """A distributed crawl's control, read through a client the caller owns."""

    def __init__(self, client: RedisClient, crawl_id: str) -> None:
        self._client = client
        self._key = control_key(crawl_id)

    async def state(self) -> RunState:
        raw = await self._client.get(self._key)
        if raw is None:
            return RunState.RUNNING
        value = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            return RunState(value)
        except ValueError:
            raise StateError(f"unknown run state {value!r} in Redis key {self._key}") from None


async def run_state(settings: Settings) -> RunState:
    """What was asked of the crawl of ``settings`` (Redis when ``redis_url`` is set)."""
    if settings.redis_url is None:
        _check_embedded(settings.state_dir)
        return await FileControl(settings.state_dir).state()
    async with _redis(settings) as client:
        return await RedisControl(client, settings.crawl_id).state()


async def is_paused(settings: Settings) -> bool:
    return await run_state(settings) is RunState.PAUSED


async def set_paused(settings: Settings, paused: bool) -> None:
    """Pause (or resume) the crawl of ``settings``.

    ``StateError`` when there is no such crawl, or it was cancelled (cancel is for good).
    """
    if settings.redis_url is None:
        _check_embedded(settings.state_dir)
        try:
            await FileControl(settings.state_dir).set_paused(paused)
        except OSError as exc:
            raise StateError(f"cannot change {settings.state_dir / PAUSE_FILE}: {exc}") from None
        return
    async with _redis(settings) as client:
        await _check_distributed(client, settings)
        key = control_key(settings.crawl_id)
        if await RedisControl(client, settings.crawl_id).state() is RunState.CANCELLED:
            raise StateError(
                f"crawl {settings.crawl_id!r} was cancelled; start it over with crawl --fresh"
            )
        if paused:
            await client.set(key, RunState.PAUSED.value)
        else:
            await client.delete(key)


async def cancel(settings: Settings) -> None:
    """Stop a distributed crawl for good: its dispatcher exits, workers stop serving it.

    Its state stays in Redis (``status``, ``dlq``); ``ConfigError`` for an embedded crawl.
    """
    if settings.redis_url is None:
        raise ConfigError(
            "cancel is for distributed crawls (--redis); stop an embedded one with Ctrl-C"
        )
    from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS

    async with _redis(settings) as client:
        await _check_distributed(client, settings)
        await client.set(control_key(settings.crawl_id), RunState.CANCELLED.value)
        await client.srem(ACTIVE_CRAWLS, settings.crawl_id)


@dataclass(frozen=True, slots=True)
class Added:
    """What ``add_urls`` did: URLs queued, not admitted (seen before, or over the page
    budget), and refused (bad URL, out of scope) with why."""

    admitted: int
    not_admitted: int
    rejected: list[tuple[str, str]] = field(default_factory=list)
    dispatching: bool = False
    """Whether a dispatcher runs the crawl now (else the URLs wait for it to run again)."""


async def add_urls(settings: Settings, urls: list[str], *, clock: Clock | None = None) -> Added:
    """Add seed URLs (depth 0) to the distributed crawl of ``settings``.

    ``ConfigError`` for an embedded target or a URL a distributed crawl cannot take
    (credentials, ``file:``); ``StateError`` when there is no such crawl or it was cancelled.
    """
    redis_url = settings.redis_url
    if redis_url is None:
        raise ConfigError("add is for distributed crawls: give --redis URL --crawl-id ID")
    from crawlfleet.events import EventBus
    from crawlfleet.runtime.backends import open_store
    from crawlfleet.runtime.celery.crawls import read_definition
    from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS
    from crawlfleet.runtime.celery.dispatched import check_seeds
    from crawlfleet.runtime.wiring import build_admitter, build_frontier

    check_seeds(urls)
    crawl_id = settings.crawl_id
    async with _redis(settings) as client, AsyncExitStack() as stack:
        definition = await read_definition(client, crawl_id)
        if definition is None:
            raise StateError(f"no crawl {crawl_id!r} in Redis at {redact(redis_url)}")
        if await RedisControl(client, crawl_id).state() is RunState.CANCELLED:
            raise StateError(f"crawl {crawl_id!r} was cancelled; start it over with crawl --fresh")
        own = definition.settings.model_copy(update={"redis_url": redis_url})
        frontier = build_frontier(own, (await open_store(own, stack)).store, list(definition.seeds))
        admitter = await build_admitter(
            own, frontier, events=EventBus(), clock=clock or SystemClock(), stack=stack
        )
        requests, refused = frontier.requests_for(urls, None)
        admitted = await admitter.add(requests)
        dispatching = bool(await client.sismember(ACTIVE_CRAWLS, crawl_id))
    rejected = [(url, refusal.text) for url, refusal in refused]
    return Added(admitted, len(requests) - admitted, rejected, dispatching)


def _check_embedded(state_dir: Path) -> None:
    from crawlfleet.runtime.backends import state_paths

    state_file, _ = state_paths(state_dir)
    if not state_file.exists():
        raise StateError(f"no crawl state in {state_dir} (expected {state_file})")


async def _check_distributed(client: RedisClient, settings: Settings) -> None:
    from crawlfleet.runtime.celery.definition import definition_key

    if not await client.exists(definition_key(settings.crawl_id)):
        raise StateError(
            f"no crawl {settings.crawl_id!r} in Redis at {redact(settings.redis_url or '')}"
        )


@asynccontextmanager
async def _redis(settings: Settings) -> AsyncIterator[RedisClient]:
    """A short-lived client of the crawl's Redis; a Redis error becomes a one-line ``StateError``."""
    from redis.exceptions import RedisError

    from crawlfleet.redisdb import connect

    url = settings.redis_url or ""
    client = connect(url, decode_responses=True, socket_connect_timeout=5)
    try:
        yield client
    except RedisError as exc:
        text = " ".join(str(exc).split())
        raise StateError(f"Redis at {redact(url)}: {text}") from None
    finally:
        await client.aclose()

"""What the operator asked of a crawl, as the processes that run it read it.

Where the state lives (``ops/`` changes it: ``crawlfleet pause|resume|cancel``, the
dashboard):

- **distributed**: the Redis key ``crawlfleet:{<crawl_id>}:control`` (``frontier/redis/keys.py``)
  holds ``paused`` or ``cancelled``; no key means running. The dispatcher reads it every tick
  (paused: it publishes no task; cancelled: it exits), a worker before each batch and on its
  claim loop's ticks (it claims nothing of a paused or cancelled crawl; steps in flight
  finish). ``cancel`` also takes the crawl off the active set, so workers drop its tasks.
  A cancelled crawl keeps its state for ``status`` and ``dlq``; ``crawl --fresh`` starts it
  over (it deletes every key of the crawl, this one too).
- **embedded**: the file ``<state>/paused``, looked at by the runner's claim loop on every
  tick (``TICK_S``). Cancel is distributed only: an embedded crawl is stopped with Ctrl-C.

``redis`` is never imported here: ``RedisControl`` reads through a client its caller owns.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crawlfleet.errors import StateError
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
WORKER_SEEN_S = 30.0
"""A worker whose heartbeat is older than this is not counted as live."""


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

"""The crawl-wide keys of a partitioned crawl, in the crawl's own slot: epoch and budget.

Beside its partitions, a crawl created with ``P > 1`` partitions keeps a few keys under
``crawlfleet:{<crawl_id>}`` (``keys.py``): ``epoch`` (set by the first open, checked with the
partitions' own epochs), ``budget`` (admissions reserved against ``max_total`` over every
partition, ``reserve.lua``) and ``partitions`` (``crawl_store.py``); ``control`` and
``sessions`` there are not the store's. A missing or replaced epoch raises ``FrontierLost``;
any other Redis failure raises ``StateError``.
"""

from __future__ import annotations

import uuid
from typing import Any

from redis.exceptions import RedisError

from crawlfleet.errors import FrontierLost, StateError
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.scripts import Scripts
from crawlfleet.redisdb import RedisClient


class CrawlSlot:
    """A partitioned crawl's epoch and ``max_total`` reservations (module doc)."""

    def __init__(self, client: RedisClient, base: CrawlKeys, where: str) -> None:
        """Use ``attach``; this binds the crawl's keys on ``client`` without reading them."""
        self._client = client
        self._base = base
        self._where = where
        self._scripts = Scripts(client, base)
        self._epoch = uuid.uuid4().hex

    @classmethod
    async def attach(cls, client: RedisClient, base: CrawlKeys, where: str) -> CrawlSlot:
        """The crawl's slot, its epoch set now unless an earlier open set it."""
        slot = cls(client, base, where)
        epoch_key = base.key("epoch")
        try:
            async with client.pipeline(transaction=True) as pipe:
                pipe.set(epoch_key, slot._epoch, nx=True)
                pipe.get(epoch_key)
                _, epoch = await pipe.execute()
        except RedisError as exc:
            raise StateError(f"Redis at {where} failed: {exc}") from exc
        slot._epoch = str(epoch)
        return slot

    @property
    def epoch(self) -> str:
        return self._epoch

    async def check_epoch(self) -> None:
        """``FrontierLost`` when the crawl's epoch is no longer the one this open read."""
        try:
            epoch = await self._client.get(self._base.key("epoch"))
        except RedisError as exc:
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc
        if epoch != self._epoch:
            raise FrontierLost(self._lost())

    async def reserve(self, wanted: int, max_total: int) -> int:
        """Reserve up to ``wanted`` admissions of ``max_total``; how many were granted."""
        return int(await self._run("reserve", wanted, max_total))

    async def count_admitted(self, change: int) -> None:
        """Add admissions made without a reservation, or give back an unused one (< 0)."""
        if change == 0:
            return
        try:
            await self._client.incrby(self._base.key("budget"), change)
        except RedisError as exc:
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc

    async def _run(self, name: str, *args: str | int | float) -> Any:
        try:
            return await self._scripts.run(name, self._epoch, *args)
        except RedisError as exc:
            if str(exc).startswith("FRONTIER_LOST"):
                raise FrontierLost(self._lost()) from None
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc

    def _lost(self) -> str:
        return (
            f"the crawl-wide keys of {self._base.prefix!r} in Redis at {self._where} are gone "
            "(flushed, evicted, or a node restarted without persistence)"
        )

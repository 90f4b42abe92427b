"""One crawl's frontier in Redis, opened: what ``RedisQueueStore`` runs its scripts through.

``RedisCrawl`` creates the crawl or checks its stored settings (dedup, Bloom geometry,
``begin``) and runs the crawl's scripts and reads. Connection errors are retried for about a
second (a restarted Redis is reconnected to by itself); a script whose reply was lost may
therefore run twice, which at worst hands out a lease that later expires, or answers False
to a ``complete`` that took effect. Every script that writes, ``claim`` and ``counts`` check
the crawl's epoch first: a frontier that vanished while the crawl was open (FLUSHALL, a
restart without persistence) raises ``FrontierLost`` instead of looking like a finished
crawl; an ``add`` of requests that the store already saw seen sends nothing (the seen
prefilter, ``RedisQueueStore.add``) and so writes nothing either: the store's next call meets
the loss. Any other Redis failure raises ``StateError``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis.exceptions import RedisError, ResponseError

from crawlfleet.errors import FrontierLost, StateError
from crawlfleet.frontier.redis.bloom import SHARD_BYTES, BloomGeometry
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.scripts import Scripts
from crawlfleet.frontier.redis.views import Arg
from crawlfleet.redisdb import RedisClient

BATCH = 1000  # requests or fingerprints per script call, so no call blocks Redis for long
LOST_MARK = "FRONTIER_LOST"  # how the scripts' error reply starts when the epoch is gone


class RedisCrawl:
    """A crawl's frontier keys on one client, under the crawl's epoch (module doc)."""

    def __init__(
        self,
        client: RedisClient,
        keys: CrawlKeys,
        bloom: BloomGeometry | None,
        where: str,
        *,
        owns_client: bool = True,
    ) -> None:
        """Binds a client (``open_client``) to the crawl under ``keys``; ``begin`` opens it."""
        self.client = client
        self.keys = keys
        self.bloom = bloom
        self._where = where
        self._owns_client = owns_client
        self.scripts = Scripts(client, keys)
        self._epoch = uuid.uuid4().hex

    @property
    def epoch(self) -> str:
        """The token the crawl's first open wrote; another value means another crawl."""
        return self._epoch

    async def begin(self, dedup: str) -> None:
        """Create the crawl, or check that its stored dedup settings are these; size the Bloom
        bitmap. Call once, inside ``guard``."""
        bloom = self.bloom
        wanted = {
            "dedup": dedup,
            "bloom_bits": str(bloom.bits if bloom else 0),
            "bloom_hashes": str(bloom.hashes if bloom else 0),
            "bloom_shard_bytes": str(SHARD_BYTES if bloom else 0),
        }
        flat = [item for pair in wanted.items() for item in pair]
        epoch, *stored_flat = await self.scripts.run("open", self._epoch, *flat)
        if not epoch:
            raise FrontierLost(self.lost())
        self._epoch = epoch
        stored = dict(zip(stored_flat[::2], stored_flat[1::2], strict=True))
        if stored != wanted:
            raise StateError(
                f"crawl {self.keys.prefix!r} in Redis at {self._where} was created with "
                f"{stored}, not {wanted}: use another prefix (crawl id) or the same settings"
            )
        if bloom is not None:
            zeros = b"\0" * SHARD_BYTES
            async with self.client.pipeline(transaction=False) as pipe:
                for index in range(bloom.shards):
                    pipe.set(self.keys.bloom_shard(index), zeros, nx=True)
                await pipe.execute()

    def lost(self) -> str:
        """Why ``FrontierLost`` is raised: the crawl's frontier is gone."""
        return (
            f"the frontier of crawl {self.keys.prefix!r} in Redis at {self._where} is gone "
            "(flushed, evicted, or Redis restarted without persistence): what was queued "
            "and done is unknown, so the crawl cannot go on or be reported complete"
        )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Redis failures inside as ``StateError``, a lost epoch as ``FrontierLost``."""
        try:
            yield
        except ResponseError as exc:
            if str(exc).startswith(LOST_MARK):
                raise FrontierLost(self.lost()) from None
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc
        except RedisError as exc:
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc

    async def run(self, name: str, *args: Arg) -> Any:
        """Run the script ``name`` under the crawl's epoch (``guard``: its failures)."""
        with self.guard():
            return await self.scripts.run(name, self._epoch, *args)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()
